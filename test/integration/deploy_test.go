package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// checkDeployMetrics checks that every cairn_* series the shipped alerting
// rules and dashboard (deploy/) query is one a real node exports, so that
// a renamed metric cannot silently blind an alert.
func checkDeployMetrics(t *testing.T, metrics string) {
	t.Helper()
	files, _ := filepath.Glob("../../deploy/prometheus/*.yml")
	dash, _ := filepath.Glob("../../deploy/grafana/*.json")
	files = append(files, dash...)
	if len(files) < 2 {
		t.Fatalf("deploy/ rules and dashboard not found (%v)", files)
	}
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`).FindAllStringSubmatch(metrics, -1) {
		exported[m[1]] = true
		if m[2] == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[m[1]+s] = true
			}
		}
	}
	missing := map[string][]string{}
	name := regexp.MustCompile(`\bcairn_[a-z0-9_]+`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.yml") {
			continue // the rules' unit tests feed their own series
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(b), -1) {
			if !exported[n] {
				missing[n] = append(missing[n], filepath.Base(f))
			}
		}
	}
	if len(missing) > 0 {
		var l []string
		for n, fs := range missing {
			l = append(l, n+" (in "+strings.Join(fs, ", ")+")")
		}
		sort.Strings(l)
		t.Fatalf("deploy/ queries series no node exports:\n%s", strings.Join(l, "\n"))
	}
}
