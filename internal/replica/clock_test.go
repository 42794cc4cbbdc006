package replica

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/wire"
)

// A leader stamps its entries with its clock, and while the dedup table
// holds records it stamps the shard clock on its own when nothing else
// does, so an idle shard's records expire; then it stops.
func TestLeaderStampsTheShardClockUntilRecordsExpire(t *testing.T) {
	var now atomic.Int64 // the leader's clock, moved by hand
	const ttl = 1600 * time.Millisecond
	r := singleReplicaWith(t, Config{DedupTTL: ttl, Clock: func() time.Duration { return time.Duration(now.Load()) }})
	done := make(chan error, 1)
	go func() {
		_, err := r.Propose(context.Background(), &wire.Command{RequestID: []byte("w"), Op: wire.OpPut, Key: []byte("k"), Value: []byte("v")})
		done <- err
	}()
	for answered := false; !answered; {
		r.Process()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			answered = true
		case <-time.After(time.Millisecond):
		}
	}
	if !r.sm.HasRecords() {
		t.Fatal("no dedup record after a write")
	}
	// Half the TTL passes on the leader: the record stays.
	for i := 0; i < 8; i++ {
		now.Add(int64(100 * time.Millisecond))
		r.Process()
		r.Process()
	}
	if c := r.sm.Clock(); c < 500*time.Millisecond || c > 800*time.Millisecond || !r.sm.HasRecords() {
		t.Fatalf("after 800 ms idle: shard clock %v, records %v", c, r.sm.HasRecords())
	}
	// Past 1.25 TTL the record is gone and the leader stops stamping.
	for i := 0; i < 40; i++ {
		now.Add(int64(100 * time.Millisecond))
		r.Process()
		r.Process()
	}
	if r.sm.HasRecords() {
		t.Fatalf("record kept at shard clock %v (TTL %v)", r.sm.Clock(), ttl)
	}
	applied := r.Applied()
	for i := 0; i < 10; i++ {
		now.Add(int64(100 * time.Millisecond))
		r.Process()
	}
	if r.Applied() != applied {
		t.Fatalf("an idle leader with an empty table still proposes: applied %d -> %d", applied, r.Applied())
	}
}
