package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path"
	"strings"
	"testing"
)

// module is the project's module path.
const module = "github.com/cairn-db/cairn"

// layers lists the project's packages from the bottom up (paths relative
// to the module; "x/..." is x and everything under it). A package may
// import the project's packages of lower layers only; within a layer only
// where the layer says so. The database is the first part, the lab (which
// talks to the database over HTTP and processes) the second.
var layers = []struct {
	name     string
	pkgs     []string
	siblings bool // packages of this layer may import each other
}{
	{name: "security", pkgs: []string{"internal/security"}},
	{name: "leaf", pkgs: []string{"internal/wire", "internal/shard", "internal/deadline", "client", "internal/lint", "internal/faultclock"}},
	{name: "protocol", pkgs: []string{"internal/http1"}},
	{name: "protocol over HTTP/2", pkgs: []string{"internal/http2"}},
	{name: "storage", pkgs: []string{"internal/storage/..."}},
	{name: "log and state machine", pkgs: []string{"internal/raftlog", "internal/statemachine"}},
	{name: "replica", pkgs: []string{"internal/replica"}},
	{name: "transport", pkgs: []string{"internal/transport"}},
	{name: "store", pkgs: []string{"internal/store"}},
	{name: "cluster", pkgs: []string{"internal/cluster/..."}},
	{name: "coordinator", pkgs: []string{"internal/kv"}},
	{name: "api", pkgs: []string{"internal/api/..."}, siblings: true},
	{name: "node", pkgs: []string{"internal/server"}},
	{name: "tools", pkgs: []string{"internal/backup"}},
	{name: "lab", pkgs: []string{"internal/lab/..."}, siblings: true},
	{name: "main", pkgs: []string{"cmd/...", "test/..."}, siblings: true},
}

// labMayImport is what the lab uses of the database: the security, leaf
// and protocol packages (TLS configurations, keys' tokens, the HTTP/1.1
// client, the Go client). Nothing
// of a node's internals: the lab drives real processes.
var labMayImport = []string{"security", "leaf", "protocol", "lab"}

// only lists third-party (or standard) imports and the packages that
// alone may import them directly.
var only = []struct {
	imp  string
	pkgs []string
	why  string
	// helpers: the rule binds test helper packages (footest) too.
	helpers bool
}{
	{"github.com/cockroachdb/pebble/...", []string{"internal/storage/..."},
		"the storage engine is behind internal/storage", true},
	{"go.etcd.io/raft/...", []string{"internal/raftlog", "internal/replica", "internal/store",
		"internal/transport", "internal/statemachine", "internal/cluster/..."},
		"consensus stays inside the replication layers", false},
	{"net/http/...", []string{"internal/api/...", "internal/http1", "internal/http2", "internal/server", "client",
		"internal/backup", "internal/lab/...", "cmd/...", "test/..."},
		"HTTP is the API's (and its clients': the backup tool, the lab drivers) business", false},
	{"go.etcd.io/etcd/client/...", []string{"internal/lab/bench", "test/..."},
		"only the bench's etcd driver talks to etcd", false},
}

// noDeps lists packages that must not pull in an import even indirectly.
var noDeps = []struct{ pkg, dep, why string }{
	{"internal/lab/report", "go.etcd.io/etcd/client/v3", "reports read result files; they need no etcd client"},
	{"internal/lab/chaos", "go.etcd.io/etcd/client/v3", "the chaos lab drives Cairn only"},
	{"internal/lab/checker", "go.etcd.io/etcd/client/v3", "the checker is pure"},
}

type goPackage struct {
	ImportPath string
	Name       string
	Imports    []string
	Deps       []string
}

// packages lists the module's packages with `go list`.
func packages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		p.ImportPath = rel(p.ImportPath)
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: is the test running inside the module?", len(pkgs))
	}
	return pkgs
}

// rel is an import path relative to the module ("" for other modules').
func rel(p string) string {
	if p == module {
		return "."
	}
	if r, ok := strings.CutPrefix(p, module+"/"); ok {
		return r
	}
	return ""
}

// matches reports whether p is pattern or, for "x/...", under x.
func matches(p, pattern string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchesAny(p string, patterns []string) bool {
	for _, pat := range patterns {
		if matches(p, pat) {
			return true
		}
	}
	return false
}

// isHelper: a test helper package (foo/footest) may import any of the
// database's packages, and only tests may import it.
func isHelper(p goPackage) bool {
	return strings.HasSuffix(path.Base(p.ImportPath), "test") && p.Name != "main"
}

// layerOf is the index in layers of the package at p, or -1.
func layerOf(p string) int {
	for i, l := range layers {
		if matchesAny(p, l.pkgs) {
			return i
		}
	}
	return -1
}

func layerIndex(name string) int {
	for i, l := range layers {
		if l.name == name {
			return i
		}
	}
	panic("lint: no layer " + name)
}

func TestDependencyDirection(t *testing.T) {
	lab := layerIndex("lab")
	for _, p := range packages(t) {
		if isHelper(p) {
			continue
		}
		from := layerOf(p.ImportPath)
		if from < 0 {
			t.Errorf("%s is in no layer: add it to layers in internal/lint/deps_test.go (and to docs/architecture.md)", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			r := rel(imp)
			if r == "" {
				continue
			}
			if strings.HasSuffix(path.Base(r), "test") {
				t.Errorf("%s imports the test helper %s", p.ImportPath, r)
				continue
			}
			to := layerOf(r)
			switch {
			case to < 0:
				continue // reported as its own package
			case from == lab && !labMayUse(to):
				t.Errorf("%s (lab) imports %s (%s): the lab drives real processes, not a node's internals", p.ImportPath, r, layers[to].name)
			case to > from:
				t.Errorf("%s (%s) imports %s (%s): against the dependency direction", p.ImportPath, layers[from].name, r, layers[to].name)
			case to == from && !layers[from].siblings:
				t.Errorf("%s imports %s of its own layer (%s)", p.ImportPath, r, layers[from].name)
			}
		}
	}
}

func labMayUse(layer int) bool {
	for _, name := range labMayImport {
		if layerIndex(name) == layer {
			return true
		}
	}
	return false
}

func TestOnlyOwnersImport(t *testing.T) {
	for _, p := range packages(t) {
		for _, imp := range p.Imports {
			for _, o := range only {
				if isHelper(p) && !o.helpers {
					continue
				}
				if matches(imp, o.imp) && !matchesAny(p.ImportPath, o.pkgs) {
					t.Errorf("%s imports %s: only %v may (%s)", p.ImportPath, imp, o.pkgs, o.why)
				}
			}
		}
	}
}

func TestNoIndirectDependency(t *testing.T) {
	byPath := map[string]goPackage{}
	for _, p := range packages(t) {
		byPath[p.ImportPath] = p
	}
	for _, n := range noDeps {
		p, ok := byPath[n.pkg]
		if !ok {
			t.Errorf("%s: no such package", n.pkg)
			continue
		}
		for _, d := range p.Deps {
			if d == n.dep {
				t.Errorf("%s depends on %s: %s", n.pkg, n.dep, n.why)
			}
		}
	}
}

// The rules catch what they are meant to: a layering check that never
// fails would pass any code.
func TestRulesCatchViolations(t *testing.T) {
	if from, to := layerOf("internal/storage"), layerOf("internal/kv"); from >= to {
		t.Fatalf("storage (%d) is not below kv (%d)", from, to)
	}
	if labMayUse(layerOf("internal/replica")) {
		t.Fatal("the lab may import the replica")
	}
	if !matches("internal/storage/vfs", "internal/storage/...") || matches("internal/storagex", "internal/storage/...") {
		t.Fatal("pattern matching is off")
	}
	for _, o := range only {
		if o.imp == "github.com/cockroachdb/pebble/..." && matchesAny("internal/replica", o.pkgs) {
			t.Fatal("the replica may import Pebble")
		}
	}
}
