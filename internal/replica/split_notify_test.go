package replica

import (
	"context"
	"testing"
	"time"
)

// Applying a split entry moves the applied index, so it must wake
// AppliedChanged / WaitApplied like any other apply. A 3/3 read
// (KindAppliedIndex) or a watch waiting for the split's index otherwise
// waits out its whole deadline.
func TestSplitApplyWakesAppliedWaiters(t *testing.T) {
	r := singleReplica(t)
	for i := 0; i < 5; i++ {
		r.Process()
	}
	before := r.Applied()
	ch := r.AppliedChanged()
	waitErr := make(chan error, 1)
	// The bounds are generous: Process syncs the engine, which takes
	// long on a loaded disk. Without the wake-up the waiter still fails
	// at its bound.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		waitErr <- r.WaitApplied(ctx, before+1)
	}()
	time.Sleep(20 * time.Millisecond) // the waiter is parked on the channel
	done := make(chan error, 1)
	go func() {
		_, err := r.ProposeSplit(context.Background(), r.Desc().Epoch)
		done <- err
	}()
	descCh := r.DescChanged()
	for deadline := time.Now().Add(20 * time.Second); ; {
		r.Process()
		select {
		case <-descCh: // split applied
		default:
			if time.Now().After(deadline) {
				// Stopping here would leave ProposeSplit waiting for ever.
				t.Fatal("the split was not applied within 20 s")
			}
			time.Sleep(time.Millisecond)
			continue
		}
		break
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.Applied() != before+1 {
		t.Fatalf("applied %d, want %d (the split entry)", r.Applied(), before+1)
	}
	select {
	case <-ch:
	default:
		t.Errorf("applied index moved %d -> %d (split entry) but AppliedChanged was not closed", before, r.Applied())
	}
	if err := <-waitErr; err != nil {
		t.Errorf("WaitApplied(%d) with the replica applied at %d: %v", before+1, r.Applied(), err)
	}
}
