package etcdapi

import (
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"

	"github.com/cairn-db/cairn/internal/kv"
)

// A node cut off from a shard's leader answers as etcd does without a
// leader: Unavailable "etcdserver: no leader", which clientv3 turns into
// rpctypes.ErrNoLeader (and retries on another endpoint for a Range).
func TestNoLeaderIsEtcdsNoLeader(t *testing.T) {
	err := grpcError(fmt.Errorf("%w: shard 3: cut off", kv.ErrNoLeader))
	if code(err) != codes.Unavailable {
		t.Fatalf("code %v, want Unavailable", code(err))
	}
	if !errors.Is(rpctypes.Error(err), rpctypes.ErrNoLeader) {
		t.Fatalf("%v: clientv3 would not read it as ErrNoLeader", err)
	}
}
