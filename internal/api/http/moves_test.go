package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/shard"
)

// moverFake is a backend that moves replicas in its own descriptor.
type moverFake struct {
	*fakeBackend
	calls int
	err   error
}

func (m *moverFake) MoveReplica(_ context.Context, id, from, to uint64) (shard.Descriptor, error) {
	m.calls++
	if m.err != nil {
		return shard.Descriptor{}, m.err
	}
	return shard.Descriptor{ID: id, Replicas: []uint64{1, 2, to}, Epoch: 4}, nil
}

func TestAdminMove(t *testing.T) {
	m := &moverFake{fakeBackend: newFake()}
	h := mustNew(t, m, Config{})
	r := do(t, h, "POST", "/v1/admin/shards/3/move?from=2&to=4", nil, nil)
	if r.code != 200 {
		t.Fatalf("move: %d %s", r.code, r.body)
	}
	var ans moveAnswer
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || ans.Shard.ID != 3 || ans.Shard.Epoch != 4 || !ans.Shard.IsVoter(4) {
		t.Fatalf("answer %q: %+v %v", r.body, ans, err)
	}
	// Bad input: 400 (or 404/405) with a JSON body, and no move.
	m.calls = 0
	for target, want := range map[string]int{
		"/v1/admin/shards/x/move?from=1&to=2":            400,
		"/v1/admin/shards/0/move?from=1&to=2":            400,
		"/v1/admin/shards/1/move?from=1":                 400,
		"/v1/admin/shards/1/move?from=a&to=2":            400,
		"/v1/admin/shards/1/move?from=2&to=2":            400,
		"/v1/admin/shards/1/move?from=1&to=2&timeout=1h": 400,
		"/v1/admin/shards/1/split":                       404,
		"/v1/admin/shards/1":                             404,
	} {
		r := do(t, h, "POST", target, nil, nil)
		if r.code != want {
			t.Errorf("%s: %d %s, want %d", target, r.code, r.body, want)
			continue
		}
		errCode(t, r)
	}
	if r := do(t, h, "GET", "/v1/admin/shards/1/move?from=1&to=2", nil, nil); r.code != 405 {
		t.Errorf("GET: %d", r.code)
	}
	if m.calls != 0 {
		t.Fatalf("%d moves made on bad requests", m.calls)
	}
	// The backend's refusal is a 400; its timeout a 504.
	m.err = fmt.Errorf("%w: node 9 holds no replica", kv.ErrInvalidArgument)
	if r := do(t, h, "POST", "/v1/admin/shards/1/move?from=9&to=4", nil, nil); r.code != 400 || errCode(t, r) != "bad_request" {
		t.Fatalf("refused move: %d %s", r.code, r.body)
	}
	m.err = fmt.Errorf("%w: no leader", kv.ErrTimeout)
	if r := do(t, h, "POST", "/v1/admin/shards/1/move?from=1&to=4", nil, nil); r.code != 504 {
		t.Fatalf("timed out move: %d %s", r.code, r.body)
	}
}
