package replica

import (
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	eng := &storage.Engine{}
	d := shard.Descriptor{ID: 1, Replicas: []uint64{1, 2, 3}}
	c := Config{NodeID: 1, Desc: d, Engine: eng}.EnsureDefaults()
	if c.ElectionTick != 10 || c.HeartbeatTick != 1 || c.MaxPending != 4096 || c.Clock == nil || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for want, bad := range map[string]Config{
		"NodeID":          {Desc: d, Engine: eng},
		"names no shard":  {NodeID: 1, Engine: eng},
		"not a replica":   {NodeID: 4, Desc: d, Engine: eng},
		"Engine":          {NodeID: 1, Desc: d},
		"ElectionTick 2 ": {NodeID: 1, Desc: d, Engine: eng, ElectionTick: 2, HeartbeatTick: 2},
	} {
		if err := bad.EnsureDefaults().Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}
