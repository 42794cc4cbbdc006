package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// metricValue reads one series of node i's /metrics (-1: absent).
func (c *cluster) metricValue(i int, series string) float64 {
	_, body, _ := c.get(i, "/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// A shard that lost its quorum holds its writes; once its queue on the
// node is at --shard-soft-limit, the next write for it is answered 503
// shard_overloaded with Retry-After at once (not after the request
// deadline), counted on /metrics; when the quorum returns, the queue
// drains and writes are served again.
func TestShardSoftLimit(t *testing.T) {
	const timeout = 6 * time.Second
	c := newCluster(t, 3, "--request-timeout", timeout.String(), "--shard-soft-limit", "2")
	if r := c.put0(1, "hot", "v", ""); r.code != 201 {
		t.Fatal(r)
	}
	sh := strconv.FormatUint(c.shardOf(1, []string{"hot"})["hot"], 10)
	depth := `cairn_shard_queue_depth{shard="` + sh + `"}`
	rejections := `cairn_shard_soft_limit_rejections_total{shard="` + sh + `"}`
	if v := c.metricValue(1, rejections); v != 0 {
		t.Fatalf("%s = %v before any load, want 0", rejections, v)
	}
	c.kill(2)
	c.kill(3)

	// Writes to the key's shard pile up on node 1 until one is refused.
	var wg sync.WaitGroup
	refused := make(chan result, 1)
	var got result
	for i := 0; got.code == 0; i++ {
		if i == 40 {
			t.Fatalf("40 writes to a shard without quorum, none refused over a soft limit of 2 (%s = %v)", depth, c.metricValue(1, depth))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := c.put0(1, "hot", fmt.Sprint(i), ""); r.code == 503 {
				select {
				case refused <- r:
				default:
				}
			}
		}()
		select {
		case got = <-refused:
		case <-time.After(100 * time.Millisecond):
		}
	}
	if code, ok := errorCode(got); !ok || code != "shard_overloaded" || got.h.Get("Retry-After") == "" || got.took > timeout/2 {
		t.Fatalf("refusal: %v (%s), Retry-After %q, after %v: want 503 shard_overloaded with Retry-After well before the %v deadline",
			got, code, got.h.Get("Retry-After"), got.took, timeout)
	}
	if v := c.metricValue(1, rejections); v < 1 {
		t.Fatalf("%s = %v after a refusal", rejections, v)
	}

	c.start(2)
	c.start(3)
	c.waitReady(readyTimeout)
	wg.Wait()
	eventually(t, 10*time.Second, func() string {
		if r := c.put0(1, "hot", "after", ""); r.code != 201 {
			return fmt.Sprintf("write after the quorum returned: %v", r)
		}
		if v := c.metricValue(1, depth); v != 0 {
			return fmt.Sprintf("%s = %v once every request was answered", depth, v)
		}
		return ""
	})
}
