package server

import (
	"context"
	"reflect"
	"testing"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
)

// infoTransport answers KindNodeInfo requests with infos[to] (none:
// StatusError); it carries nothing else.
type infoTransport struct {
	transport.Transport
	infos map[uint64]*wire.NodeInfo
}

func (f infoTransport) Request(_ context.Context, to uint64, req *wire.Request) (*wire.Response, error) {
	if info, ok := f.infos[to]; ok && req.Kind == wire.KindNodeInfo {
		return &wire.Response{Status: wire.StatusOK, Value: info.Marshal()}, nil
	}
	return &wire.Response{Status: wire.StatusError, Message: "no"}, nil
}

// The balancer's prober reads a member's replicas from its NodeInfo: the
// descriptors it reports, as sent.
func TestProberReadsAMembersReplicas(t *testing.T) {
	ds := []shard.Descriptor{
		{ID: 2, Start: 1 << 63, End: 3 << 62, Replicas: []uint64{2, 3, 1}, Epoch: 5},
		{ID: 3 << 62, Start: 3 << 62, Replicas: []uint64{2, 3, 4}, Learners: []uint64{5}, Epoch: 2},
	}
	info := &wire.NodeInfo{HTTPAddr: "h:2"}
	for _, d := range ds {
		info.Descriptors = append(info.Descriptors, d.Marshal())
	}
	p := prober{self: 1, tr: infoTransport{infos: map[uint64]*wire.NodeInfo{2: info}}}
	ctx := context.Background()
	got, err := p.Replicas(ctx, 2)
	if err != nil || !reflect.DeepEqual(got, ds) {
		t.Fatalf("node 2's replicas: %+v, %v; want %+v", got, err, ds)
	}
	if !p.Alive(ctx, 2) {
		t.Fatal("node 2 answered, yet is not alive")
	}
	if _, err := p.Replicas(ctx, 3); err == nil || p.Alive(ctx, 3) {
		t.Fatal("node 3 did not answer, yet its replicas were read or it is alive")
	}
}
