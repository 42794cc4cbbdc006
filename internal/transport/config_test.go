package transport

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	c := Config{NodeID: 1, ListenAddr: "127.0.0.1:0", Handler: &recorder{}}.EnsureDefaults()
	if c.QueueLen != 1024 || c.QueueBytes != 128<<20 || c.MaxSnapshotBytes != 64<<30 || c.MaxIncomingSnapshots != 2 ||
		c.SnapshotIdleTimeout != time.Minute || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for want, bad := range map[string]Config{
		"NodeID":              {ListenAddr: "x", Handler: &recorder{}},
		"ListenAddr":          {NodeID: 1, Handler: &recorder{}},
		"Handler":             {NodeID: 1, ListenAddr: "x"},
		"QueueLen":            {NodeID: 1, ListenAddr: "x", Handler: &recorder{}, QueueLen: -1},
		"QueueBytes":          {NodeID: 1, ListenAddr: "x", Handler: &recorder{}, QueueBytes: -1},
		"SnapshotIdleTimeout": {NodeID: 1, ListenAddr: "x", Handler: &recorder{}, SnapshotIdleTimeout: -time.Second},
	} {
		if err := bad.EnsureDefaults().Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	if _, err := NewGRPC(Config{NodeID: 1, ListenAddr: "127.0.0.1:0"}); err == nil {
		t.Fatal("NewGRPC accepted a config without a handler")
	}
}
