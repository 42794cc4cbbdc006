package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	rpprof "runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/http1"
)

// Bounds of the debug endpoints: what one request may make the node do.
const (
	// maxProfileSeconds bounds ?seconds= of a CPU profile or a delta
	// profile (/debug/pprof/heap?seconds=N and the like).
	maxProfileSeconds = 60
	// maxTraceSeconds bounds ?seconds= of an execution trace, which grows
	// by megabytes a second on a busy node.
	maxTraceSeconds = 30
	// maxDebugOutput bounds the bytes one profile or trace answer holds:
	// past it the run stops early and the rest is dropped (the answer is
	// cut short, and says so in a trailer-less way: the log notes it).
	maxDebugOutput = 256 << 20
	// profileGrace is how long past its seconds a run may take to write
	// its output before its context ends.
	profileGrace = 5 * time.Second
)

// debugRoutes registers /debug/pprof/ on mux. Every endpoint that runs
// for a while (a CPU profile, a trace, a delta profile with ?seconds=)
// runs one at a time per node, for at most its bound, without the
// request timeout (a profile is longer) but stopped when the client goes
// or the node stops.
func (a *api) debugRoutes(mux *http.ServeMux) {
	mux.Handle("/debug/pprof/", a.profiling(knownProfile(pprof.Index), 0, maxProfileSeconds))
	mux.Handle("/debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
	mux.Handle("/debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	mux.Handle("/debug/pprof/profile", a.profiling(pprof.Profile, 30, maxProfileSeconds))
	mux.Handle("/debug/pprof/trace", a.profiling(pprof.Trace, 1, maxTraceSeconds))
}

// knownProfile answers, in JSON as every other error, what pprof's index
// handler would answer in plain text: an unknown profile (404) or a
// debug parameter that is not a number (400).
func knownProfile(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/")
		if name != "" && rpprof.Lookup(name) == nil {
			writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no profile %q (GET /debug/pprof/ lists them)", name))
			return
		}
		if d := r.URL.Query().Get("debug"); d != "" {
			if _, err := strconv.Atoi(d); err != nil {
				badRequest(w, "debug: want a whole number")
				return
			}
		}
		h(w, r)
	}
}

// profiling wraps a pprof handler that honours ?seconds= (default def;
// 0: the request runs only when it asks for seconds).
func (a *api) profiling(h http.HandlerFunc, def, max int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secs := def
		if s := r.URL.Query().Get("seconds"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 || n > max {
				badRequest(w, "seconds: want a whole number of seconds from 1 to "+strconv.Itoa(max))
				return
			}
			secs = n
		}
		if secs == 0 {
			h(w, r) // an index page or an instant profile
			return
		}
		select {
		case a.profiles <- struct{}{}:
			defer func() { <-a.profiles }()
		default:
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			writeError(w, http.StatusServiceUnavailable, "busy", "a profile or trace is already running on this node")
			return
		}
		ctx, cancel := a.runContext(r.Context(), time.Duration(secs)*time.Second+profileGrace)
		defer cancel()
		h(&cappedWriter{ResponseWriter: w, left: maxDebugOutput, full: cancel}, r.WithContext(ctx))
	})
}

// runContext is the context of a long run started by a request with
// context rc: it ends after d, when rc is canceled or its HTTP/1.1 client
// closed the connection (the client went; rc's own deadline, the request
// timeout, does not count) or when the node stops (Config.Stopping).
func (a *api) runContext(rc context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rc), d)
	if gone := http1.ClientGone(rc); gone != nil {
		go func() {
			select {
			case <-gone:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	stopClient := context.AfterFunc(rc, func() {
		if !errors.Is(rc.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	stopNode := context.AfterFunc(a.cfg.Stopping, cancel)
	return ctx, func() {
		stopClient()
		stopNode()
		cancel()
	}
}

// cappedWriter drops what is written past left bytes, and calls full
// once when that happens (to end the run early).
type cappedWriter struct {
	http.ResponseWriter
	left int
	full func()
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if len(p) > c.left {
		if c.left >= 0 {
			c.full()
		}
		p, c.left = p[:max(c.left, 0)], -1
		n, err := c.ResponseWriter.Write(p)
		if err == nil {
			err = errors.New("httpapi: debug output over its bound")
		}
		return n, err
	}
	c.left -= len(p)
	return c.ResponseWriter.Write(p)
}
