// Package deadline gives many short operations their deadlines cheaply:
// the operations that start within one short window share a context, and
// so one timer, instead of each making (and canceling) its own — under
// load that was a few percent of a node's CPU.
package deadline

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Windows hands out contexts that end between Timeout and Timeout+Width
// after they are handed out, or when the parent ends. A context is shared
// and never canceled early: an operation that finishes just drops it.
type Windows struct {
	parent         context.Context
	timeout, width time.Duration
	cur            atomic.Pointer[window]
	mu             sync.Mutex
}

type window struct {
	ctx context.Context
	// cancel is never called: the window's timer (or the parent) ends the
	// context and releases it. It is held, not discarded, because an
	// operation may still be using ctx when the next window opens.
	cancel context.CancelFunc
	from   time.Time // ctx is handed out to operations starting in [from, from+width)
}

// serves reports whether an operation starting at now gets this window
// (not one from before a clock that went back).
func (cw *window) serves(now time.Time, width time.Duration) bool {
	return cw != nil && !now.Before(cw.from) && now.Before(cw.from.Add(width))
}

// New returns windows of width over parent. A width of zero or more than
// a fiftieth of timeout is taken as a fiftieth of it (at most 100 ms).
func New(parent context.Context, timeout, width time.Duration) *Windows {
	if width <= 0 || width > timeout/50 {
		width = min(timeout/50, 100*time.Millisecond)
	}
	return &Windows{parent: parent, timeout: timeout, width: max(width, time.Nanosecond)}
}

// Context returns a context whose deadline is Timeout to Timeout+Width
// after now (the caller's current time).
func (w *Windows) Context(now time.Time) context.Context {
	if cw := w.cur.Load(); cw.serves(now, w.width) {
		return cw.ctx
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if cw := w.cur.Load(); cw.serves(now, w.width) {
		return cw.ctx
	}
	ctx, cancel := context.WithDeadline(w.parent, now.Add(w.timeout+w.width))
	w.cur.Store(&window{ctx: ctx, cancel: cancel, from: now})
	return ctx
}
