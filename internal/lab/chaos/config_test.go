package chaos

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{Bin: "cairn", Dir: "/tmp/x"}.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	want := WorkloadConfig{Clients: 6, Keys: 8, Timeout: 5 * time.Second}
	if c.Nodes != 3 || c.Duration != 40*time.Second || c.Logger != slog.Default() || c.Partitions != PartitionsAuto || c.Workload != want {
		t.Fatalf("defaults: %+v", c)
	}
	if w := (WorkloadConfig{Keys: 2}).EnsureDefaults(); w != (WorkloadConfig{Clients: 6, Keys: 2, Timeout: 5 * time.Second}) {
		t.Fatalf("a set field changed or a zero one stayed: %+v", w)
	}
	cc := ClusterConfig{Bin: "cairn", Dir: "/tmp/x"}.EnsureDefaults()
	if err := cc.Validate(); err != nil {
		t.Fatalf("cluster defaults do not validate: %v", err)
	}
	if cc.Nodes != 3 || cc.Shards != 0 || cc.Partitions != PartitionsAuto || cc.NoFaultInjection {
		t.Fatalf("cluster defaults: %+v", cc)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Bin: "cairn", Dir: "/tmp/x", Steps: []Step{{Fault: killFault{}, Target: "leader", At: time.Second, For: time.Second}}}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no bin", func(c *Config) { c.Bin = "" }, "Bin is required"},
		{"no dir", func(c *Config) { c.Dir = "" }, "Dir is required"},
		{"negative nodes", func(c *Config) { c.Nodes = -1 }, "Nodes -1: want at least 1"},
		{"negative duration", func(c *Config) { c.Duration = -time.Second }, "Duration -1s"},
		{"unknown partitions", func(c *Config) { c.Partitions = "magic" }, `not "magic"`},
		{"step without fault", func(c *Config) { c.Steps[0].Fault = nil }, "Steps[0]: no Fault"},
		{"step before the start", func(c *Config) { c.Steps[0].At = -time.Second }, "Steps[0]: At -1s"},
		{"step target", func(c *Config) { c.Steps[0].Target = "nobody" }, "Steps[0]"},
		{"negative clients", func(c *Config) { c.Workload.Clients = -3 }, "Clients -3: want at least 1 (in Workload)"},
		{"negative keys", func(c *Config) { c.Workload.Keys = -1 }, "Keys -1"},
		{"negative timeout", func(c *Config) { c.Workload.Timeout = -time.Second }, "Timeout -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			c.Steps = append([]Step(nil), ok.Steps...)
			tc.edit(&c)
			err := c.EnsureDefaults().Validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "chaos: ") {
				t.Fatalf("Validate: %v, want ErrInvalidConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestClusterConfigValidate(t *testing.T) {
	ok := ClusterConfig{Bin: "cairn", Dir: "/tmp/x"}
	for _, tc := range []struct {
		name string
		edit func(*ClusterConfig)
		want string
	}{
		{"no bin", func(c *ClusterConfig) { c.Bin = "" }, "Bin is required"},
		{"no dir", func(c *ClusterConfig) { c.Dir = "" }, "Dir is required"},
		{"negative nodes", func(c *ClusterConfig) { c.Nodes = -2 }, "Nodes -2"},
		{"negative shards", func(c *ClusterConfig) { c.Shards = -1 }, "Shards -1"},
		{"unknown partitions", func(c *ClusterConfig) { c.Partitions = "nft" }, `not "nft"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.EnsureDefaults().Validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want ErrInvalidConfig mentioning %q", err, tc.want)
			}
			// StartCluster refuses it before touching cgroups, iptables
			// or processes.
			if _, err := StartCluster(c); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("StartCluster: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// Every built-in scenario's schedule passes Validate, at its shortest run
// and at cairn chaos's default length.
func TestScenariosValidate(t *testing.T) {
	for _, n := range Names() {
		s := Scenarios[n]
		for _, d := range []time.Duration{s.MinDuration, 40 * time.Second} {
			c := Config{Scenario: n, Bin: "cairn", Dir: "/tmp/x", Duration: d, Steps: s.Steps(d), Workload: WorkloadConfig{Leases: s.Leases}}
			if s.Etcd {
				c.Etcd = func([]string, *tls.Config) (EtcdKV, error) { return nil, errors.New("not dialed") }
			}
			c = c.EnsureDefaults()
			if err := c.Validate(); err != nil {
				t.Errorf("%s over %v: %v", n, d, err)
			}
		}
	}
}

func TestPreloadConfig(t *testing.T) {
	p := PreloadConfig{}.EnsureDefaults()
	if p.ValueSize != 1024 || p.Percent != 50 || p.Validate() != nil {
		t.Fatalf("defaults %+v: %v", p, p.Validate())
	}
	p.Keys = 10
	if err := p.Validate(); err == nil {
		t.Fatal("keys without a loader accepted")
	}
	p.Load = func(context.Context, []string) error { return nil }
	p.Key = func(i uint64) []byte { return []byte{byte(i)} }
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	p.Percent = 101
	if err := p.Validate(); err == nil {
		t.Fatal("101 % accepted")
	}
}

// A lease workload needs etcd clients.
func TestLeasesNeedEtcd(t *testing.T) {
	c := Config{Bin: "cairn", Dir: "/tmp/x", Workload: WorkloadConfig{Leases: 2}}.EnsureDefaults()
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("leases over HTTP: %v, want ErrInvalidConfig", err)
	}
}

func TestPortBase(t *testing.T) {
	for base, ok := range map[int]bool{0: true, 44000: true, 80: false, -1: false, 65530: false} {
		c := Config{Bin: "cairn", Dir: "/tmp/x", PortBase: base}.EnsureDefaults()
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("PortBase %d: %v", base, err)
		}
	}
}
