package kv

import (
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/shard"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	m, err := shard.Bootstrap([]uint64{1, 2, 3}, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	c := Config{NodeID: 1, Replication: 3, Map: m}.EnsureDefaults()
	if c.DefaultTimeout.Seconds() != 5 || c.RetryWindow != MaxRetryWindow || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for want, bad := range map[string]Config{
		"NodeID":      {Replication: 3, Map: m},
		"Replication": {NodeID: 1, Map: m},
		"no shard":    {NodeID: 1, Replication: 3},
		"RetryWindow": {NodeID: 1, Replication: 3, Map: m, RetryWindow: 2 * MaxRetryWindow},
	} {
		if err := bad.EnsureDefaults().Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
		if _, err := New(bad); err == nil {
			t.Errorf("%s: New accepted the config", want)
		}
	}
}
