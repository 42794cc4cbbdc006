//go:build linux

package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/lab/chaos"
)

// TestContainerCluster brings up deploy/docker/compose.yml (three nodes on
// a private network), records the chaos lab's workload against it while
// one node is cut off the network with `docker network disconnect` and
// another is killed with `docker kill`, and checks the history:
// linearizable, no acknowledged write lost, replicas converged.
func TestContainerCluster(t *testing.T) {
	image := os.Getenv("CAIRN_DOCKER_IMAGE")
	if image == "" {
		t.Skip("CAIRN_DOCKER_IMAGE is not set: run `make docker-test`, which builds the image first")
	}
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("no Docker engine answers: %v\n%s", err, lastLines(string(out), 3))
	}
	d := newDeployment(t, image)
	d.up()

	dir := t.TempDir()
	res, err := chaos.RunExternal(context.Background(), chaos.ExternalConfig{
		Endpoints: d.endpoints(),
		Duration:  40 * time.Second,
		Dir:       dir,
		Scenario:  "containers",
		Progress:  testWriter{t},
		Faults: []chaos.ExternalFault{
			{Kind: "partition", Param: "network-disconnect", Node: 2, At: 8 * time.Second, For: 10 * time.Second,
				Inject: func() error { return d.disconnect(2) }, Heal: func() error { return d.reconnect(2) }},
			{Kind: "kill", Param: "docker-kill", Node: 3, At: 22 * time.Second, For: 8 * time.Second,
				Inject: func() error { return d.kill(3) }, Heal: func() error { return d.start(3) }},
		},
	})
	if err != nil {
		d.logs()
		t.Fatal(err)
	}
	t.Logf("%d ops, %d acknowledged unique writes, linearizable=%v, lost=%d, converged=%v",
		res.Ops, res.AckedWrites, res.Linearizable, res.LostWrites, res.ReplicasConverged)
	for _, f := range res.Faults {
		t.Logf("fault %s (%s) on node %d: %d–%d ms, unavailable %d ms, client errors %d %v",
			f.Kind, f.Param, f.Node, f.StartMs, f.EndMs, f.UnavailableMs, f.ClientErrors, f.ClientErrorsByKind)
		if f.Error != "" {
			t.Errorf("fault %s on node %d: %s", f.Kind, f.Node, f.Error)
		}
	}
	if len(res.Faults) != 2 {
		t.Errorf("%d faults ran, want 2", len(res.Faults))
	}
	if res.AckedWrites == 0 || res.Ops == 0 {
		t.Errorf("the workload did nothing: %d ops, %d acknowledged writes", res.Ops, res.AckedWrites)
	}
	if !res.Passed() {
		d.logs()
		t.Errorf("checks failed: linearizable=%v (timed out %v), lost %d %v, diverged %v",
			res.Linearizable, res.CheckTimedOut, res.LostWrites, res.LostKeys, res.Diverged)
	}
}

// deployment is one compose project of the test's own: its own name, its
// own subnet, removed with its volumes when the test ends.
type deployment struct {
	t       *testing.T
	project string
	net     string // first three octets of the subnet
	env     []string
	compose []string // the compose command and its fixed arguments
}

func newDeployment(t *testing.T, image string) *deployment {
	file, err := filepath.Abs("../../deploy/docker/compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	d := &deployment{t: t, project: fmt.Sprintf("%s%d", projectPrefix, os.Getpid())}
	d.compose = append(composeCommand(), "-p", d.project, "-f", file)
	d.removeStale(file)
	// A subnet of the test's own among 172.31.100-199.0/24; another
	// network holding it makes `up` fail and the test pick again.
	d.net = fmt.Sprintf("172.31.%d", 100+rand.IntN(100))
	d.env = append(os.Environ(), "CAIRN_IMAGE="+image, "CAIRN_NET="+d.net, "CAIRN_SUBNET="+d.net+".0/24",
		"CAIRN_PORT1=", "CAIRN_PORT2=", "CAIRN_PORT3=")
	t.Cleanup(func() { _, _ = d.run(d.compose, "down", "-v", "--remove-orphans", "-t", "5") })
	return d
}

// projectPrefix names the test's compose projects; the number after it is
// the test process's pid.
const projectPrefix = "cairntest"

// removeStale takes down the projects of earlier runs of this test whose
// process is gone (killed before its cleanup ran), so that their
// containers, networks and volumes do not pile up.
func (d *deployment) removeStale(file string) {
	out, err := d.run([]string{"docker"}, "ps", "-a", "--format", `{{.Label "com.docker.compose.project"}}`)
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, p := range strings.Fields(out) {
		pid, err := strconv.Atoi(strings.TrimPrefix(p, projectPrefix))
		if !strings.HasPrefix(p, projectPrefix) || err != nil || seen[p] || processAlive(pid) {
			continue
		}
		seen[p] = true
		d.t.Logf("removing the containers of an earlier run: %s", p)
		_, _ = d.run(append(composeCommand(), "-p", p, "-f", file), "down", "-v", "--remove-orphans", "-t", "1")
	}
}

func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil || errors.Is(syscall.Kill(pid, 0), syscall.EPERM)
}

// composeCommand is `docker compose` where the plugin is installed, else
// the standalone docker-compose.
func composeCommand() []string {
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	return []string{"docker-compose"}
}

func (d *deployment) up() {
	for attempt := 0; ; attempt++ {
		out, err := d.run(d.compose, "up", "-d")
		if err == nil {
			return
		}
		if attempt < 3 && strings.Contains(out, "overlap") {
			_, _ = d.run(d.compose, "down", "-v", "--remove-orphans")
			d.net = fmt.Sprintf("172.31.%d", 100+rand.IntN(100))
			d.env = append(d.env, "CAIRN_NET="+d.net, "CAIRN_SUBNET="+d.net+".0/24")
			continue
		}
		d.t.Fatalf("compose up: %v\n%s", err, out)
	}
}

func (d *deployment) endpoints() []string {
	var eps []string
	for i := 1; i <= 3; i++ {
		eps = append(eps, fmt.Sprintf("http://%s:8080", d.ip(i)))
	}
	return eps
}

func (d *deployment) ip(node int) string { return fmt.Sprintf("%s.1%d", d.net, node) }

func (d *deployment) container(node int) string {
	out, err := d.run(d.compose, "ps", "-q", fmt.Sprintf("node%d", node))
	if err != nil || strings.TrimSpace(out) == "" {
		d.t.Fatalf("no container for node %d: %v %s", node, err, out)
	}
	return strings.TrimSpace(out)
}

func (d *deployment) network() string { return d.project + "_cairn" }

// disconnect cuts node off the network and checks that it is cut: its
// client port no longer answers.
func (d *deployment) disconnect(node int) error {
	if out, err := d.run([]string{"docker"}, "network", "disconnect", d.network(), d.container(node)); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	hc := &http.Client{Timeout: time.Second}
	if resp, err := hc.Get(fmt.Sprintf("http://%s:8080/v0/status", d.ip(node))); err == nil {
		resp.Body.Close()
		return fmt.Errorf("node %d still answers after docker network disconnect", node)
	}
	return nil
}

func (d *deployment) reconnect(node int) error {
	out, err := d.run([]string{"docker"}, "network", "connect", "--ip", d.ip(node), d.network(), d.container(node))
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func (d *deployment) kill(node int) error {
	out, err := d.run([]string{"docker"}, "kill", d.container(node))
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func (d *deployment) start(node int) error {
	out, err := d.run([]string{"docker"}, "start", d.container(node))
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func (d *deployment) logs() {
	out, _ := d.run(d.compose, "logs", "--tail", "40")
	d.t.Logf("container logs:\n%s", out)
}

// run runs cmd with args under the deployment's environment, bounded.
func (d *deployment) run(cmd []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, cmd[0], append(append([]string(nil), cmd[1:]...), args...)...)
	c.Env = d.env
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return out.String(), err
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
