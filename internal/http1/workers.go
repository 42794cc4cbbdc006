package http1

import "time"

// Workers runs functions on reused goroutines: Run hands f to a goroutine
// waiting for work, or starts one. Reusing goroutines saves growing a
// fresh stack per request. The HTTP/1.1 and HTTP/2 servers run their
// handlers on one each.
type Workers chan func()

// NewWorkers returns an empty pool.
func NewWorkers() Workers { return make(chan func()) }

// workerIdle: a worker waits this long for more work before it exits.
const workerIdle = 10 * time.Second

// Run runs f on an idle worker, or a new one.
func (w Workers) Run(f func()) {
	select {
	case w <- f:
	default:
		go w.worker(f)
	}
}

// worker runs f and then what it is handed, until it was handed nothing
// for a whole workerIdle (it ends after one to two of them: its timer is
// not reset per request, which cost a timer operation each).
func (w Workers) worker(f func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		f()
		select {
		case f = <-w:
			continue
		case <-t.C:
		}
		// A workerIdle passed with work done in it: wait one more.
		t.Reset(workerIdle)
		select {
		case f = <-w:
		case <-t.C:
			return
		}
	}
}
