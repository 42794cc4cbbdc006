package server

import (
	"os"
	"path/filepath"
	"testing"
)

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	cases := []struct {
		name, cgroup string
		files        map[string]string
		want         int64
		ok           bool
	}{
		{"v1 limited", "5:devices:/\n4:memory:/chaos/n1\n1:cpu,cpuacct:/\n",
			map[string]string{"memory/chaos/n1/memory.limit_in_bytes": "134217728\n"}, 134217728, true},
		{"v1 unlimited", "4:memory:/\n",
			map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false},
		{"v1 controller list", "3:cpu,memory:/x\n",
			map[string]string{"memory/x/memory.limit_in_bytes": "1000\n"}, 1000, true},
		{"v2 limited", "0::/chaos/n2\n",
			map[string]string{"chaos/n2/memory.max": "268435456\n"}, 268435456, true},
		{"v2 max", "0::/\n", map[string]string{"memory.max": "max\n"}, 0, false},
		{"no file", "4:memory:/gone\n", nil, 0, false},
		{"garbage", "not a cgroup line\n", nil, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "fs")
			writeFile(t, filepath.Join(dir, "cgroup"), c.cgroup)
			for f, body := range c.files {
				writeFile(t, filepath.Join(root, f), body)
			}
			got, ok := cgroupMemoryLimit(filepath.Join(dir, "cgroup"), root)
			if got != c.want || ok != c.ok {
				t.Fatalf("got %d %v, want %d %v", got, ok, c.want, c.ok)
			}
		})
	}
	if _, ok := cgroupMemoryLimit(filepath.Join(t.TempDir(), "absent"), "/"); ok {
		t.Fatal("a missing /proc/self/cgroup gave a limit")
	}
}
