package checker

import (
	"strings"
	"testing"
)

func TestAppliedTwiceCleanHistory(t *testing.T) {
	h := []Op{
		{Kind: Write, Key: "x", Value: "a", Outcome: OK, Version: 5},
		{Kind: Read, Key: "x", Value: "a", Outcome: OK, Version: 5},
		{Kind: Write, Key: "x", Value: "b", Outcome: Unknown},
		{Kind: Read, Key: "x", Value: "b", Outcome: OK, Version: 9},
		{Kind: Read, Key: "x", Value: "b", Outcome: OK, Version: 9},
		{Kind: CAS, Key: "x", Expected: "a", Value: "c", Outcome: Fail},
		{Kind: Read, Key: "y", Value: "", Outcome: OK},
		{Kind: Write, Key: "y", Value: "a", Outcome: OK, Version: 5}, // same value, other key
	}
	if got := AppliedTwice(h); len(got) != 0 {
		t.Fatalf("clean history flagged: %q", got)
	}
}

func TestAppliedTwiceFindsARetryAppliedAgain(t *testing.T) {
	h := []Op{
		{Kind: Write, Key: "x", Value: "a", Outcome: OK, Version: 5},
		{Kind: Write, Key: "x", Value: "b", Outcome: OK, Version: 6},
		// The retry of "a" applied again: a read sees it at a new version.
		{Kind: Read, Key: "x", Value: "a", Outcome: OK, Version: 7},
	}
	got := AppliedTwice(h)
	if len(got) != 1 || !strings.Contains(got[0], "[5 7]") {
		t.Fatalf("got %q", got)
	}
}

func TestAppliedTwiceFindsACASEvaluatedAgain(t *testing.T) {
	h := []Op{
		{Kind: Write, Key: "x", Value: "a", Outcome: OK, Version: 5},
		// Applied by its first attempt; the retry saw version 6, not 5,
		// and answered 412.
		{Kind: CAS, Key: "x", Expected: "a", Value: "c", Outcome: Fail},
		{Kind: Read, Key: "x", Value: "c", Outcome: OK, Version: 6},
	}
	got := AppliedTwice(h)
	if len(got) != 1 || !strings.Contains(got[0], "412") {
		t.Fatalf("got %q", got)
	}
}
