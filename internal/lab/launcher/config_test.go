package launcher

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{Bin: "cairn", Dir: "/tmp/x"}.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.Nodes != 3 || c.Replication != 3 || c.StopTimeout != 10*time.Second || c.Shards != 0 {
		t.Fatalf("defaults: %+v", c)
	}
	if len(c.IPs) != 3 || c.IPs[0] != "127.0.0.1" || c.IPs[2] != "127.0.0.1" {
		t.Fatalf("default IPs %v", c.IPs)
	}
	if c.HTTPAddrs != nil || c.PeerAddrs != nil {
		t.Fatalf("addresses must stay free to pick: %v %v", c.HTTPAddrs, c.PeerAddrs)
	}
	if c := (Config{Nodes: 2}).EnsureDefaults(); c.Replication != 2 || len(c.IPs) != 2 {
		t.Fatalf("2 nodes: replication %d, IPs %v", c.Replication, c.IPs)
	}
	set := Config{Bin: "b", Dir: "d", Nodes: 5, Replication: 1, StopTimeout: time.Second, IPs: make([]string, 5)}
	if got := set.EnsureDefaults(); got.Nodes != 5 || got.Replication != 1 || got.StopTimeout != time.Second {
		t.Fatalf("set fields changed: %+v", got)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Bin: "cairn", Dir: "/tmp/x"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no bin", func(c *Config) { c.Bin = "" }, "Bin is required"},
		{"no dir", func(c *Config) { c.Dir = "" }, "Dir is required"},
		{"negative nodes", func(c *Config) { c.Nodes = -1 }, "Nodes -1: want at least 1"},
		{"negative shards", func(c *Config) { c.Shards = -2 }, "Shards -2"},
		{"negative replication", func(c *Config) { c.Replication = -1 }, "Replication -1: want at least 1"},
		{"negative stop timeout", func(c *Config) { c.StopTimeout = -time.Second }, "StopTimeout -1s"},
		{"short IPs", func(c *Config) { c.IPs = []string{"127.0.0.1"} }, "1 IPs for 3 nodes"},
		{"long HTTPAddrs", func(c *Config) { c.HTTPAddrs = make([]string, 4) }, "4 HTTPAddrs for 3 nodes"},
		{"empty PeerAddrs", func(c *Config) { c.PeerAddrs = []string{} }, "0 PeerAddrs for 3 nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.EnsureDefaults().Validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "launcher: ") {
				t.Fatalf("Validate: %v, want ErrInvalidConfig mentioning %q", err, tc.want)
			}
			if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// The addresses the launcher picks are all different, also between
// kinds on one IP, and the fixed ones are kept.
func TestPickAddrsNeverRepeats(t *testing.T) {
	ips := []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}
	for i := 0; i < 20; i++ {
		h, p, e, err := pickAddrs(Config{IPs: ips}, true)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, a := range append(append(h, p...), e...) {
			if seen[a] {
				t.Fatalf("address %s picked twice: http %v peer %v etcd %v", a, h, p, e)
			}
			seen[a] = true
		}
		if len(seen) != 9 {
			t.Fatalf("%d addresses, want 9", len(seen))
		}
	}
	fixed, err := FreeAddrs(ips)
	if err != nil {
		t.Fatal(err)
	}
	_, p, e, err := pickAddrs(Config{IPs: ips, PeerAddrs: fixed}, false)
	if err != nil || !slices.Equal(p, fixed) || e != nil {
		t.Fatalf("fixed peer addresses %v, etcd %v, %v; want %v and none", p, e, err, fixed)
	}
}
