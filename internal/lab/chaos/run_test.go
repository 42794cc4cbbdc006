package chaos

import (
	"fmt"
	"github.com/cairn-db/cairn/internal/lab/result"
	"reflect"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/lab/checker"
)

func TestErrKind(t *testing.T) {
	cases := map[string]string{
		// What the client returns after retrying until its deadline: the
		// last attempt's failure counts.
		"cairn: timeout: cairn: 503 overloaded: too many requests in flight":                                              "unavailable",
		"cairn: timeout: cairn: 503 stopping: node stopping":                                                              "unavailable",
		"cairn: timeout: cairn: 504 timeout: the request deadline passed before the operation completed":                  "timeout",
		"cairn: timeout: cairn: 504 ack_timeout: not acknowledged":                                                        "timeout",
		`cairn: timeout: Put "http://127.0.0.1:4001/v1/kv/reg%2F1": dial tcp 127.0.0.1:4001: connect: connection refused`: "connection",
		`cairn: timeout: Put "http://127.0.0.1:4001/v1/kv/reg%2F1": read: connection reset by peer`:                       "connection",
		`cairn: timeout: Put "http://127.0.0.1:4001/v1/kv/reg%2F1": EOF`:                                                  "connection",
		`cairn: timeout: Put "http://127.0.0.1:4001/v1/kv/reg%2F1": context deadline exceeded`:                            "timeout",
		"cairn: timeout": "timeout",
		// Answers the client does not retry.
		"cairn: 500 internal: boom":       "http_500",
		"cairn: 400 bad_request: bad key": "http_400",
		"something else":                  "other",
		"":                                "other",
	}
	for msg, want := range cases {
		if got := errKind(msg); got != want {
			t.Errorf("%q: %q, want %q", msg, got, want)
		}
	}
	// The messages the client really produces.
	wrapped := fmt.Errorf("%w: %v", client.ErrTimeout, &client.Error{Status: 503, Code: "overloaded", Message: "busy"})
	if got := errKind(wrapped.Error()); got != "unavailable" {
		t.Errorf("%v: %q", wrapped, got)
	}
	if got := errKind(client.ErrTimeout.Error()); got != "timeout" {
		t.Errorf("ErrTimeout: %q", got)
	}
}

// A synthetic history around two faults: only register writes and
// compare-and-sets with an unknown outcome, called from the injection to
// 5 s after healing, count, by the kind of their error.
func TestFaultClientErrorsByKind(t *testing.T) {
	s := func(sec float64) int64 { return int64(sec * 1e9) }
	unknown := func(kind checker.Kind, call float64, err string) checker.Op {
		return checker.Op{Kind: kind, Key: "reg/0", Value: fmt.Sprint("v", call), Call: s(call), Return: s(call + 5), Outcome: checker.Unknown, Node: 2, Err: err}
	}
	const (
		refused = `cairn: timeout: Put "http://127.0.0.1:4001/v1/kv/reg%2F0": dial tcp 127.0.0.1:4001: connect: connection refused`
		busy    = "cairn: timeout: cairn: 503 overloaded: too many requests in flight"
		late    = "cairn: timeout: cairn: 504 timeout: the request deadline passed"
	)
	rec := &recorder{history: []checker.Op{
		unknown(checker.Write, 9.9, late),     // before the first fault
		unknown(checker.Write, 10.5, refused), // fault 1
		unknown(checker.CAS, 12, refused),     // fault 1
		unknown(checker.Write, 14, busy),      // fault 1
		unknown(checker.Read, 14.5, late),     // a read: not counted
		{Kind: checker.Write, Key: "reg/0", Value: "ok", Call: s(15), Return: s(15.1), Outcome: checker.OK}, // acknowledged
		{Kind: checker.CAS, Key: "reg/0", Value: "no", Call: s(16), Return: s(16.1), Outcome: checker.Fail, Err: "cairn: 412 precondition_failed: x"},
		unknown(checker.Write, 24.9, late),     // fault 1, 5 s after healing at 20 s
		unknown(checker.Write, 25.1, refused),  // too late for fault 1, before fault 2
		unknown(checker.CAS, 30, late),         // fault 2
		unknown(checker.Write, 31, "mystery"),  // fault 2
		unknown(checker.Write, 40, busy),       // fault 2 (35 s + 5 s)
		unknown(checker.Write, 40.01, refused), // after both
	}}
	var series []result.Point
	for i := 1; i <= 45; i++ {
		series = append(series, result.Point{Second: i, Throughput: 100})
	}
	res := &Result{DurationSeconds: 45, Series: series, Faults: []FaultResult{
		{Kind: "kill", Node: 1, StartMs: 10000, EndMs: 20000},
		{Kind: "partition", Node: 1, StartMs: 30000, EndMs: 35000},
	}}
	measureFaults(res, rec, time.Time{})
	want := []struct {
		n      int
		byKind map[string]int
	}{
		{4, map[string]int{"connection": 2, "unavailable": 1, "timeout": 1}},
		{3, map[string]int{"timeout": 1, "other": 1, "unavailable": 1}},
	}
	for i, w := range want {
		f := res.Faults[i]
		if f.ClientErrors != w.n || !reflect.DeepEqual(f.ClientErrorsByKind, w.byKind) {
			t.Errorf("fault %d: %d %v, want %d %v", i, f.ClientErrors, f.ClientErrorsByKind, w.n, w.byKind)
		}
		sum := 0
		for _, v := range f.ClientErrorsByKind {
			sum += v
		}
		if sum != f.ClientErrors {
			t.Errorf("fault %d: kinds add up to %d of %d", i, sum, f.ClientErrors)
		}
	}
	// A fault without errors reports an empty map, not null.
	quiet := &Result{DurationSeconds: 45, Series: series, Faults: []FaultResult{{Kind: "pause", StartMs: 1000, EndMs: 2000}}}
	measureFaults(quiet, &recorder{}, time.Time{})
	if quiet.Faults[0].ClientErrors != 0 || quiet.Faults[0].ClientErrorsByKind == nil || len(quiet.Faults[0].ClientErrorsByKind) != 0 {
		t.Errorf("quiet fault: %d %v", quiet.Faults[0].ClientErrors, quiet.Faults[0].ClientErrorsByKind)
	}
}

func TestRecorderCountsErrorsByKind(t *testing.T) {
	start := time.Now()
	rec := &recorder{start: start, perf: result.NewRecorder(start, nil)}
	now := start.Add(time.Millisecond)
	rec.record("write", now, now, nil)
	rec.record("read", now, now, client.ErrNotFound)
	rec.record("cas", now, now, client.ErrPreconditionFailed)
	rec.record("write", now, now, fmt.Errorf("%w: %v", client.ErrTimeout, &client.Error{Status: 504, Code: "timeout", Message: "late"}))
	rec.record("set", now, now, fmt.Errorf("%w: %v", client.ErrTimeout, &client.Error{Status: 503, Code: "stopping", Message: "bye"}))
	if want := map[string]uint64{"timeout": 1, "unavailable": 1}; !reflect.DeepEqual(rec.errKinds, want) {
		t.Errorf("%v, want %v", rec.errKinds, want)
	}
}

// A backup that lost acknowledged writes, or could not be restored, fails
// the run even when every other check passed.
func TestBackupChecksFailTheRun(t *testing.T) {
	ok := Result{Linearizable: true, ReplicasConverged: true}
	for _, tc := range []struct {
		b    BackupCheck
		fail bool
	}{
		{BackupCheck{Dir: "/x/backup-1", AckedBefore: 10}, false},
		{BackupCheck{Dir: "/x/backup-1", AckedBefore: 10, Missing: 1, MissingKeys: []string{"set/000003"}}, true},
		{BackupCheck{Dir: "/x/backup-1", Error: "cairn restore: exit status 1"}, true},
	} {
		r := ok
		r.Backups = []BackupCheck{tc.b}
		if got := len(r.Failures()) > 0; got != tc.fail || r.Passed() == tc.fail {
			t.Errorf("%+v: failures %v, passed %v; want failing %v", tc.b, r.Failures(), r.Passed(), tc.fail)
		}
	}
}
