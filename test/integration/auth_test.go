package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A cluster started with --auth: the first admin token appears in node
// 1's data dir, which node 1's log names (no log holds the token); tokens
// it makes work on every node with their roles; requests without a valid
// token get 401, with too low a role 403; the open routes stay open; the
// refusals are counted in /metrics; `cairn admin` sends its token, and a
// token it revokes is refused on every node; the etcd API takes the
// same tokens (etcdauth_test.go).
func TestAuthTokensAndRoles(t *testing.T) {
	c := newCluster(t, 3, "--auth")
	file := filepath.Join(c.lc.Node(1).Dir, "admin-token")
	var admin string
	eventually(t, readyTimeout, func() string {
		b, err := os.ReadFile(file)
		if err != nil {
			return err.Error()
		}
		admin = strings.TrimSpace(string(b))
		return ""
	})
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v %v", fi.Mode(), err)
	}
	eventually(t, readyTimeout, func() string {
		if !strings.Contains(c.lc.Log(1), file) {
			return "node 1's log does not name the admin token file " + file
		}
		return ""
	})
	for id := 1; id <= 3; id++ {
		if strings.Contains(c.lc.Log(id), admin) {
			t.Fatalf("the admin token is in node %d's log", id)
		}
	}
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	create := func(role string) string {
		r := c.do("POST", c.url(2)+"/v1/admin/tokens?role="+role, nil, bearer(admin)...)
		var out struct{ Token, Role string }
		if r.code != 201 || json.Unmarshal([]byte(r.body), &out) != nil || out.Role != role {
			t.Fatalf("create %s token: %s", role, r)
		}
		return out.Token
	}
	read, write := create("read"), create("write")
	key := c.v1URL(3, "guarded", "")
	for _, step := range []struct {
		name, method, url string
		body              []byte
		hdr               []string
		want              int
	}{
		{"put without a token", "PUT", key, []byte("x"), nil, 401},
		{"put with a bad token", "PUT", key, []byte("x"), bearer("cairn_nope"), 401},
		{"put with a read token", "PUT", key, []byte("x"), bearer(read), 403},
		{"put with a write token", "PUT", key, []byte("v1"), bearer(write), 201},
		{"get without a token", "GET", key, nil, nil, 401},
		{"get with a read token", "GET", c.v1URL(1, "guarded", ""), nil, bearer(read), 200},
		{"delete with a read token", "DELETE", key, nil, bearer(read), 403},
		{"pprof with a write token", "GET", c.url(1) + "/debug/pprof/cmdline", nil, bearer(write), 403},
		{"pprof with the admin token", "GET", c.url(1) + "/debug/pprof/cmdline", nil, bearer(admin), 200},
		{"fault hook without a token", "POST", c.url(1) + "/v1/admin/fault", []byte("{}"), nil, 401},
		{"token creation with a write token", "POST", c.url(1) + "/v1/admin/tokens?role=admin", nil, bearer(write), 403},
		{"system key with the admin token", "GET", c.url(1) + "/v1/kv/%00sys/auth/bootstrap", nil, bearer(admin), 403},
		{"status without a token", "GET", c.url(1) + "/v1/status", nil, nil, 200},
		{"v0 status without a token", "GET", c.url(1) + "/v0/status", nil, nil, 200},
		{"metrics without a token", "GET", c.url(1) + "/metrics", nil, nil, 200},
	} {
		r := c.do(step.method, step.url, step.body, step.hdr...)
		if r.code != step.want {
			t.Errorf("%s: %s, want %d", step.name, r, step.want)
		}
		if step.want == 401 || step.want == 403 {
			if !isJSONError(r.body) {
				t.Errorf("%s: body %q is no JSON error", step.name, r.body)
			}
		}
	}
	if r := c.do("GET", c.v1URL(2, "guarded", ""), nil, bearer(write)...); r.code != 200 || r.body != "v1" {
		t.Fatalf("read back with the write token on node 2: %s", r)
	}
	var unauth, forbidden float64
	for i := 1; i <= 3; i++ {
		unauth += metric(t, c.hc, c.url(i), `cairn_auth_failures_total{reason="unauthenticated"}`)
		forbidden += metric(t, c.hc, c.url(i), `cairn_auth_failures_total{reason="forbidden"}`)
	}
	if unauth < 4 || forbidden < 5 {
		t.Fatalf("counted %v unauthenticated and %v forbidden, want at least 4 and 5", unauth, forbidden)
	}
	if strings.Contains(c.lc.Log(1), "authentication is off") {
		t.Fatal("a node with --auth says authentication is off")
	}

	// `cairn admin` sends its token: a node list, then the write token
	// revoked through node 1 (named by the token; the id is computed by
	// the command). Node 2 found the token above and may trust it for the
	// cache's 5 s; then every node refuses it, and the read token still
	// works.
	adminCmd := func(args ...string) string {
		out, err := exec.Command(binary, append([]string{"admin", "--endpoint", c.url(1)}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("cairn admin %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := adminCmd("node", "list", "--json", "--token", admin); !strings.Contains(out, `"state"`) {
		t.Fatalf("cairn admin node list with the admin token: %s", out)
	}
	adminCmd("token", "revoke", write, "--token", admin)
	eventually(t, 15*time.Second, func() string {
		for i := 1; i <= 3; i++ {
			if r := c.do("GET", c.v1URL(i, "guarded", ""), nil, bearer(write)...); r.code != 401 {
				return fmt.Sprintf("node %d answers the revoked token %s", i, r)
			}
		}
		return ""
	})
	if r := c.do("GET", c.v1URL(2, "guarded", ""), nil, bearer(read)...); r.code != 200 || r.body != "v1" {
		t.Fatalf("the read token after another was revoked: %s", r)
	}
	// A token made with a time to live (`token create --ttl`) works, then
	// every node refuses it, saying it expired. The first read counts
	// only if it was made well within the 8 s, however slow the machine.
	made := time.Now()
	var short string
	for _, line := range strings.Split(adminCmd("token", "create", "--role", "read", "--ttl", "8s", "--token", admin), "\n") {
		if strings.HasPrefix(line, "cairn_") {
			short = line
		}
	}
	if short == "" {
		t.Fatal("cairn admin token create --ttl 8s printed no token")
	}
	if r := c.do("GET", c.v1URL(2, "guarded", ""), nil, bearer(short)...); r.code != 200 && time.Since(made) < 5*time.Second {
		t.Fatalf("a token with 8 s to live, just made: %s", r)
	}
	eventually(t, 30*time.Second, func() string {
		for i := 1; i <= 3; i++ {
			if r := c.do("GET", c.v1URL(i, "guarded", ""), nil, bearer(short)...); r.code != 401 || !strings.Contains(r.body, "expired") {
				return fmt.Sprintf("node %d answers a token past its time: %s", i, r)
			}
		}
		return ""
	})
	if took := time.Since(made); took < 8*time.Second {
		t.Fatalf("a token with 8 s to live refused after %v", took)
	}

	// The etcd API takes the same tokens.
	testEtcdWithTokens(t, c, create("write"), read)
}
