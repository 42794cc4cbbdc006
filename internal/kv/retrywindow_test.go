package kv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/statemachine"
)

// Every retry a client makes must find its write's dedup record: the
// coordinator's window and the Go client's together stay inside what a
// shard keeps, with room for messages that are slow to arrive.
func TestRetryWindowsStayInsideDedupRetention(t *testing.T) {
	keep := statemachine.MinRetention(statemachine.DefaultDedupTTL)
	if sum := kv.MaxRetryWindow + client.MaxWriteRetryWindow; sum+30*time.Second > keep {
		t.Fatalf("retry windows %v + %v leave less than 30 s of the %v a record is kept", kv.MaxRetryWindow, client.MaxWriteRetryWindow, keep)
	}
}

// A write whose deadline is past the retry window gives up at the window
// (504), not at its deadline: it is retried under its request id only
// while the shard remembers that id.
func TestWriteRetriesEndAtTheRetryWindow(t *testing.T) {
	c := newCluster(t, 3, 1, replica.Config{})
	if _, _, err := c.nodes[1].coord.Put(ctx5(t), []byte("k"), []byte("v"), kv.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Node 1 alone: no write can commit through it.
	c.net.Isolate(1, true)
	defer c.net.Isolate(1, false)
	n := c.nodes[1]
	tr := c.net.Join(98, &adapter{st: n.st}, nil)
	c.net.Isolate(98, true)
	// A window well inside the 200 ms or more (two election timeouts of
	// 10 ms ticks) node 1's replica takes to report it has lost its
	// leader, after which the write would be answered ErrNoLeader.
	coord := mustCoordinator(t, kv.Config{NodeID: 1, Replication: 3, Map: c.m, Store: n.st,
		Transport: tr, DefaultTimeout: time.Hour, RetryWindow: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := coord.Put(ctx, []byte("k"), []byte("w"), kv.WriteOptions{RequestID: []byte("window")})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, kv.ErrTimeout) {
			t.Fatalf("write without a quorum: %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write was retried past its retry window")
	}
}
