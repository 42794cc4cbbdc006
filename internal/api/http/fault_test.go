package httpapi

import (
	"reflect"
	"testing"
	"time"
)

// fakeFaults records what the fault hook was asked.
type fakeFaults struct{ calls []string }

func (f *fakeFaults) Partition(nodes []uint64)  { f.calls = append(f.calls, "partition") }
func (f *fakeFaults) DiskStall(d time.Duration) { f.calls = append(f.calls, "stall "+d.String()) }
func (f *fakeFaults) DiskFull(on bool) {
	if on {
		f.calls = append(f.calls, "disk full")
	} else {
		f.calls = append(f.calls, "disk has space")
	}
}
func (f *fakeFaults) ClockOffset(d time.Duration, jump bool) {
	kind := "skew "
	if jump {
		kind = "jump "
	}
	f.calls = append(f.calls, kind+d.String())
}

func TestFaultHookSetsClockOffsets(t *testing.T) {
	ff := &fakeFaults{}
	h := mustNew(t, newFake(), Config{Faults: ff})
	for _, q := range []string{"clock-skew=2m", "clock-jump=-30s", "clock-skew=0s", "disk-full=true", "disk-full=false"} {
		if r := do(t, h, "POST", "/v1/admin/fault?"+q, nil, nil); r.code != 200 {
			t.Fatalf("%s: %d %s", q, r.code, r.body)
		}
	}
	for _, q := range []string{"clock-skew=soon", "clock-jump=25h", "clock-skew=", "disk-full=maybe"} {
		r := do(t, h, "POST", "/v1/admin/fault?"+q, nil, nil)
		if r.code != 400 || errCode(t, r) == "" {
			t.Fatalf("%s: %d %s, want 400", q, r.code, r.body)
		}
	}
	want := []string{"skew 2m0s", "jump -30s", "skew 0s", "disk full", "disk has space"}
	if !reflect.DeepEqual(ff.calls, want) {
		t.Fatalf("hook calls %q, want %q", ff.calls, want)
	}
	// Without the hook, clock faults are refused like every other.
	if r := do(t, mustNew(t, newFake(), Config{}), "POST", "/v1/admin/fault?clock-skew=1m", nil, nil); r.code != 403 {
		t.Fatalf("clock fault without hook: %d", r.code)
	}
}
