package replica

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/wire"
)

// Two writes under one request id in flight together: each proposal is
// answered by its own command — the first applied gets its result, the
// other is refused — never one with the other's result.
func TestProposalsOfAReusedRequestIDGetTheirOwnAnswer(t *testing.T) {
	r := singleReplica(t)
	r.Process()
	cmds := []wire.Command{
		{RequestID: []byte("shared"), Op: wire.OpPut, Key: []byte("alpha"), Value: []byte("a")},
		{RequestID: []byte("shared"), Op: wire.OpPut, Key: []byte("beta"), Value: []byte("b")},
	}
	type answer struct {
		res Result
		err error
	}
	answers := make([]chan answer, len(cmds))
	for i := range cmds {
		answers[i] = make(chan answer, 1)
		go func() {
			res, err := r.Propose(context.Background(), &cmds[i])
			answers[i] <- answer{res, err}
		}()
		// Queue them in order, both before the round that takes them.
		for deadline := time.Now().Add(5 * time.Second); ; {
			r.in.Lock()
			queued := len(r.in.props)
			r.in.Unlock()
			if queued == i+1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	var got [2]answer
	for i := range got {
		for done := false; !done; {
			r.Process()
			select {
			case got[i] = <-answers[i]:
				done = true
			case <-time.After(time.Millisecond):
			}
		}
	}
	if got[0].err != nil || got[0].res.Status != wire.StatusOK {
		t.Fatalf("first write: %+v %v", got[0].res, got[0].err)
	}
	if got[1].err != nil || got[1].res.Status != wire.StatusRequestIDReused {
		t.Fatalf("second write under the same id: %+v %v, want request id reused", got[1].res, got[1].err)
	}
	if _, _, err := r.Get([]byte("beta")); err != ErrNotFound {
		t.Fatalf("beta: %v, want absent", err)
	}
}
