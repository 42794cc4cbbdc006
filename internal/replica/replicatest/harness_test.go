package replicatest

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/cockroachdb/datadriven"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the harness (default $CAIRN_HARNESS_SEED, else 1)")

// seed is the seed the scripts run with: -seed, else $CAIRN_HARNESS_SEED,
// else 1 (the golden outputs are written with 1).
func seed(t *testing.T) uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	if s := os.Getenv("CAIRN_HARNESS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CAIRN_HARNESS_SEED=%q: %v", s, err)
		}
		return n
	}
	return 1
}

// runScript runs one script in its own bubble and returns the whole
// trace. The golden outputs hold the traces of seed 1: with another seed
// the script runs for its invariants only (violations, errors), as the
// message orders it draws differ.
func runScript(t *testing.T, path string, seed uint64) string {
	var trace strings.Builder
	synctest.Test(t, func(t *testing.T) {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("seed %d (rerun with -seed=%d or CAIRN_HARNESS_SEED=%d)", seed, seed, seed)
			}
		})
		env := New(Options{Seed: seed})
		defer env.Close()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			out := env.Handle(td)
			trace.WriteString(td.Pos + " " + td.FullCmd() + "\n" + out + "\n")
			if seed != 1 {
				if strings.HasPrefix(out, "error:") && !strings.HasPrefix(td.Expected, "error:") {
					t.Errorf("%s: %s", td.Pos, out)
				}
				return td.Expected
			}
			return out
		})
		for _, v := range env.Violations() {
			t.Errorf("violation: %s", v)
		}
	})
	return trace.String()
}

func TestScripts(t *testing.T) {
	s := seed(t)
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if filepath.Ext(path) != ".txt" {
			return
		}
		runScript(t, path, s)
	})
}

// TestDeterministic runs a script that reorders messages at random twice
// with the same seed: the traces are the same.
func TestDeterministic(t *testing.T) {
	s := seed(t)
	path := filepath.Join("testdata", "transfer_reads.txt")
	a := runScript(t, path, s)
	b := runScript(t, path, s)
	if a != b {
		t.Fatalf("seed %d: two runs differ:\n--- first\n%s\n--- second\n%s", s, a, b)
	}
}

// TestSeeds runs every script under a few more seeds for its invariants
// (the random message orders and partial crashes differ from the golden
// run's).
func TestSeeds(t *testing.T) {
	if *seedFlag != 0 || os.Getenv("CAIRN_HARNESS_SEED") != "" {
		t.Skip("a seed is set: TestScripts runs it")
	}
	for s := uint64(2); s <= 5; s++ {
		t.Run("seed="+strconv.FormatUint(s, 10), func(t *testing.T) {
			datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
				if filepath.Ext(path) == ".txt" {
					runScript(t, path, s)
				}
			})
		})
	}
}
