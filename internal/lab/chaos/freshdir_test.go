package chaos

import (
	"os"
	"path/filepath"
	"testing"
)

// A run in an output directory that holds an earlier run's nodes starts
// its cluster afresh: their data is removed; the rest of the directory
// (the earlier results) is left alone.
func TestFreshClusterDir(t *testing.T) {
	out := t.TempDir()
	dir := filepath.Join(out, "cluster")
	if removed, err := freshClusterDir(dir); err != nil || removed {
		t.Fatalf("no earlier cluster: removed %v, %v", removed, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "node-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node-1", "MANIFEST"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if removed, err := freshClusterDir(dir); err != nil || !removed {
		t.Fatalf("an earlier cluster: removed %v, %v", removed, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the earlier cluster's data is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "results.json")); err != nil {
		t.Fatalf("the earlier results went too: %v", err)
	}
}
