package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/client"
)

// diskFullFault makes the node's disk look full through its fault hook:
// the node's disk guard refuses new values (HTTP 507 disk_full) as it
// does when the data directory's free space falls below the node's
// reserve, still serves reads and deletes, and hands its leaderships
// away. It simulates the guard's reserve being reached — the engine
// itself keeps writing (its followers append, as a node with its reserve
// left does); the engine never meets ENOSPC. Injecting checks that the
// node refuses a value sent to it alone; healing checks that it takes one
// again within 10 s.
type diskFullFault struct{}

func (diskFullFault) Kind() string  { return "disk-full" }
func (diskFullFault) Param() string { return "" }
func (diskFullFault) Inject(c *Cluster, n int) error {
	if err := c.admin(n, func(ctx context.Context, a *client.Admin) error { return a.DiskFull(ctx, true) }); err != nil {
		return err
	}
	err := probePut(c, n, "inject")
	var e *client.Error
	if errors.As(err, &e) && e.Status == 507 && e.Code == "disk_full" {
		c.Notef("node %d answers new values with 507 disk_full", n)
		return nil
	}
	return fmt.Errorf("chaos: node %d with its disk full answered a put with %v, want 507 disk_full", n, err)
}

func (diskFullFault) Heal(c *Cluster, n int) error {
	if err := c.admin(n, func(ctx context.Context, a *client.Admin) error { return a.DiskFull(ctx, false) }); err != nil {
		return err
	}
	start := time.Now()
	var err error
	for time.Since(start) < 10*time.Second {
		if err = probePut(c, n, "heal"); err == nil {
			c.Notef("node %d took a new value %d ms after healing", n, time.Since(start).Milliseconds())
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("chaos: node %d still refuses new values 10 s after its disk was healed: %v", n, err)
}

// probePut writes one value through node n alone, without retries.
func probePut(c *Cluster, n int, what string) error {
	o := c.clientOptions(5 * time.Second)
	o.NoRetry = true
	cl, err := client.New([]string{c.URL(n)}, o)
	if err != nil {
		return err
	}
	key := fmt.Sprintf("probe/disk-full/%d/%s/%d", n, what, time.Now().UnixNano())
	_, err = cl.Put(context.Background(), []byte(key), []byte("x"), client.PutOptions{})
	return err
}
