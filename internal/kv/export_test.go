package kv

import "github.com/cairn-db/cairn/internal/replica"

// ReadLocal exposes readLocal to the external tests.
func (c *Coordinator) ReadLocal(r *replica.Replica, key []byte) (Value, error) {
	return c.readLocal(r, key)
}

// SetScanBudget sets the steps and the share of the time left that a
// node's scan may take for one request, until restore is called.
func SetScanBudget(steps int, timeShare float64) (restore func()) {
	oldSteps, oldShare := maxExamined, scanTimeShare
	maxExamined, scanTimeShare = steps, timeShare
	return func() { maxExamined, scanTimeShare = oldSteps, oldShare }
}
