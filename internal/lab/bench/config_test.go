package bench

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	r := RunConfig{}.EnsureDefaults()
	if err := r.Validate(); err != nil {
		t.Fatalf("run defaults do not validate: %v", err)
	}
	if r.Clients != 1 || r.Conns != 1 || r.OpTimeout != 10*time.Second || r.Duration != 10*time.Second || r.Rate != 0 || r.Warmup != 0 {
		t.Fatalf("run defaults: %+v", r)
	}
	// With a Total the run is not timed: Duration stays 0.
	if r := (RunConfig{Total: 5}).EnsureDefaults(); r.Duration != 0 || r.Validate() != nil {
		t.Fatalf("Total 5: %+v", r)
	}
	d := DriverConfig{Target: "http://127.0.0.1:1"}.EnsureDefaults()
	if err := d.Validate(); err != nil {
		t.Fatalf("driver defaults do not validate: %v", err)
	}
	if d.Conns != 1 || d.Pipeline != 1 || d.Route != RouteLeader || d.Timeout != 10*time.Second || d.HTTP2 || d.Serializable {
		t.Fatalf("driver defaults: %+v", d)
	}
	if d := (DriverConfig{Target: "etcd://h:1", Conns: 4, Pipeline: 8, Route: RouteFixed}).EnsureDefaults(); d.Conns != 4 || d.Pipeline != 8 || d.Route != RouteFixed {
		t.Fatalf("set fields changed: %+v", d)
	}
}

func TestRunConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  RunConfig
		want string
	}{
		{"negative clients", RunConfig{Clients: -1}, "Clients -1: want at least 1"},
		{"negative conns", RunConfig{Conns: -2}, "Conns -2"},
		{"negative duration", RunConfig{Duration: -time.Second}, "Duration -1s"},
		{"negative warmup", RunConfig{Warmup: -time.Second}, "Warmup -1s"},
		{"negative rate", RunConfig{Rate: -5}, "Rate -5"},
		{"infinite rate", RunConfig{Rate: math.Inf(1)}, "Rate +Inf"},
		{"negative op timeout", RunConfig{OpTimeout: -time.Millisecond}, "OpTimeout -1ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.EnsureDefaults().Validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "bench: ") {
				t.Fatalf("Validate: %v, want ErrInvalidConfig mentioning %q", err, tc.want)
			}
			// Run refuses it before driving any load (a nil driver would
			// panic otherwise).
			if _, err := Run(context.Background(), nil, nil, tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Run: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestDriverConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  DriverConfig
		want string
	}{
		{"no target", DriverConfig{}, `got ""`},
		{"other scheme", DriverConfig{Target: "ftp://h:1"}, `got "ftp://h:1"`},
		{"negative conns", DriverConfig{Target: "http://h:1", Conns: -1}, "Conns -1"},
		{"negative pipeline", DriverConfig{Target: "http://h:1", Pipeline: -4}, "Pipeline -4"},
		{"unknown route", DriverConfig{Target: "http://h:1", Route: "nearest"}, `got "nearest"`},
		{"unknown route, etcd", DriverConfig{Target: "etcd://h:1", Route: "nearest"}, `got "nearest"`},
		{"negative timeout", DriverConfig{Target: "http://h:1", Timeout: -time.Second}, "Timeout -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.EnsureDefaults().Validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "bench: ") {
				t.Fatalf("Validate: %v, want ErrInvalidConfig mentioning %q", err, tc.want)
			}
			if d, err := NewDriver(tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				if d != nil {
					d.Close()
				}
				t.Fatalf("NewDriver: %v, want ErrInvalidConfig", err)
			}
		})
	}
}
