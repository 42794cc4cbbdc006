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
		// A value over what a peer message carries would wedge its shard.
		"--max-value-size": func(c *Config) { c.MaxValueSize = 60 << 20 },
	} {
		bad := ok
		edit(&bad)
		if _, err := New(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}

// A joining node tells the cluster its addresses: they must be dialable.
func TestJoinNeedsDialableAddresses(t *testing.T) {
	ok := Config{NodeID: 4, DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:8083", PeerAddr: "127.0.0.1:9083",
		Replication: 3, Join: []string{"http://127.0.0.1:8080"}}.EnsureDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if ok.DeadNodeTimeout != 5*time.Minute || ok.TransferLimit != 2 || ok.MembersPoll != time.Second {
		t.Fatalf("membership defaults: %+v", ok)
	}
	for _, edit := range []func(*Config){
		func(c *Config) { c.HTTPAddr = "127.0.0.1:0" },
		func(c *Config) { c.PeerAddr = "" },
		func(c *Config) { c.PeerAddr = "0.0.0.0:9083" },
		func(c *Config) { c.HTTPAddr = "[::]:8083" },
	} {
		bad := ok
		edit(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--join needs") {
			t.Errorf("%s / %s: %v", bad.HTTPAddr, bad.PeerAddr, err)
		}
	}
	for addr, want := range map[string]string{"127.0.0.1:80": "127.0.0.1:80", "0.0.0.0:80": "", "[::]:80": "", "host:80": "host:80", "bad": ""} {
		if got := advertised(addr); got != want {
			t.Errorf("advertised(%q) = %q, want %q", addr, got, want)
		}
	}
}
