package kv

import "github.com/cairn-db/cairn/internal/replica"

// ReadLocal exposes readLocal to the external tests.
func (c *Coordinator) ReadLocal(r *replica.Replica, key []byte) (Value, error) {
	return c.readLocal(r, key)
}
