package main

import (
	"testing"

	"github.com/cairn-db/cairn/internal/lab/chaos"
)

func TestPreloadDefaultsToMemoryScenarios(t *testing.T) {
	o := runOpts{preload: -1, valueSize: 512}
	p, err := preloadFor(chaos.Scenarios["memory-leader"], o)
	if err != nil || p.Keys != defaultMemoryPreload || p.ValueSize != 512 || p.Load == nil || p.Key == nil {
		t.Fatalf("memory-leader: %+v %v", p, err)
	}
	if string(p.Key(1)) == string(p.Key(2)) {
		t.Fatal("records share a key")
	}
	if p, _ := preloadFor(chaos.Scenarios["leader-kill"], o); p.Keys != 0 {
		t.Fatalf("leader-kill preloads %d by default", p.Keys)
	}
	o.preload = 0
	if p, _ := preloadFor(chaos.Scenarios["memory-leader"], o); p.Keys != 0 {
		t.Fatal("--preload 0 ignored")
	}
	o.preload = 7
	if p, _ := preloadFor(chaos.Scenarios["leader-kill"], o); p.Keys != 7 {
		t.Fatal("--preload 7 ignored")
	}
}
