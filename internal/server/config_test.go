package server

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	ok := Config{NodeID: 1, DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Replication: 3, GroupCommitDelay: time.Millisecond}
	c := ok.EnsureDefaults()
	if c.Logger == nil || c.GroupCommitWrites != 256 {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for want, edit := range map[string]func(*Config){
		"node id":     func(c *Config) { c.NodeID = 0 },
		"data dir":    func(c *Config) { c.DataDir = "" },
		"HTTP":        func(c *Config) { c.HTTPAddr = "" },
		"replication": func(c *Config) { c.Replication = 0 },
		"shards":      func(c *Config) { c.Shards = -1 },
		"negative":    func(c *Config) { c.MaxValueSize = -1 },
	} {
		bad := ok
		edit(&bad)
		if _, err := New(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}
