package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
)

// Hasher is implemented by backends that can fingerprint their replicas.
type Hasher interface {
	ShardHashes() ([]kv.ShardHash, error)
}

// FaultInjector is the node's fault hook; it exists only when the node was
// started with fault injection enabled (Config.Faults).
type FaultInjector interface {
	// Partition drops everything exchanged with the listed nodes (nil heals).
	Partition(nodes []uint64)
	// DiskStall delays every storage commit by d (0 heals).
	DiskStall(d time.Duration)
	// ClockOffset shifts the node's clocks (wall and monotonic): to d
	// from the real ones (a skew; 0 heals), or by d from where they are
	// (jump).
	ClockOffset(d time.Duration, jump bool)
	// DiskFull makes the node's disk look full (true) or lifts that.
	DiskFull(on bool)
}

// adminHashes serves GET /v1/admin/hashes.
func (a *api) adminHashes(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	h, ok := a.b.(Hasher)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "this node cannot hash its replicas")
		return
	}
	release, ok := a.scanSlot(w)
	if !ok {
		return
	}
	defer release()
	hs, err := h.ShardHashes()
	if err != nil {
		writeBackendError(w, a.cfg.Logger, err)
		return
	}
	writeJSON(w, hs)
}

// adminFault serves POST /v1/admin/fault?partition=2,3&disk-stall=1s&clock-skew=2m
// (clock-jump=D moves the clock offset by D instead of setting it;
// disk-full=true|false).
func (a *api) adminFault(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	if a.cfg.Faults == nil {
		writeError(w, http.StatusForbidden, "forbidden", "fault injection is disabled; start the node with --fault-injection")
		return
	}
	// Every parameter is checked before any fault is applied: a bad
	// request changes nothing.
	q := r.URL.Query()
	var apply []func()
	if _, ok := q["partition"]; ok {
		var nodes []uint64
		for _, s := range strings.Split(q.Get("partition"), ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil || n == 0 {
				badRequest(w, "partition: want a comma-separated list of node ids")
				return
			}
			nodes = append(nodes, n)
		}
		apply = append(apply, func() { a.cfg.Faults.Partition(nodes) })
	}
	if _, ok := q["disk-stall"]; ok {
		d, err := time.ParseDuration(q.Get("disk-stall"))
		if err != nil || d < 0 || d > time.Minute {
			badRequest(w, "disk-stall: want a duration between 0 and 1m")
			return
		}
		apply = append(apply, func() { a.cfg.Faults.DiskStall(d) })
	}
	if _, ok := q["disk-full"]; ok {
		on, err := strconv.ParseBool(q.Get("disk-full"))
		if err != nil {
			badRequest(w, "disk-full: want true or false")
			return
		}
		apply = append(apply, func() { a.cfg.Faults.DiskFull(on) })
	}
	for _, name := range []string{"clock-skew", "clock-jump"} {
		if _, ok := q[name]; !ok {
			continue
		}
		d, err := time.ParseDuration(q.Get(name))
		if err != nil || d < -24*time.Hour || d > 24*time.Hour {
			badRequest(w, name+": want a duration between -24h and 24h")
			return
		}
		jump := name == "clock-jump"
		apply = append(apply, func() { a.cfg.Faults.ClockOffset(d, jump) })
	}
	for _, f := range apply {
		f()
	}
	writeJSON(w, map[string]string{"status": "ok"})
}

// scanSlot takes the node's slot for a full-data scan (hashes, a backup
// stream): at most one runs at a time. When another holds it, it answers
// 503 busy with Retry-After and reports false.
func (a *api) scanSlot(w http.ResponseWriter) (release func(), ok bool) {
	select {
	case a.scans <- struct{}{}:
		return func() { <-a.scans }, true
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "busy", "a full-data scan is already running on this node")
		return nil, false
	}
}
