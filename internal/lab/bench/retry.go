package bench

import (
	"context"
	"errors"
	"math/rand"
	"net/http"
	"time"
)

// A well-mannered client. A node answers 503 with Retry-After when its
// in-flight budget (--max-inflight) or a shard's queue (the soft limit,
// --shard-soft-limit) is full: the request was not worked on, and the
// client is asked to come back later. Every operation the runner drives
// (reads, HEADs, 2i queries, writes) then waits what Retry-After asks,
// plus up to a tenth more at random (so the clients refused together do
// not all come back in the same instant) — or a shorter backoff of the
// run's choosing (RunConfig.RetryWait, --retry-wait) — and is tried again whole — a
// HEAD-then-GET from its HEAD. A refusal is counted per operation kind
// (OpResult.Refused), not as an error. The operation's latency runs from
// when it was due to its final answer, the waits included; its answered
// latency from when the attempt that was answered was sent
// (result.Recorder.RecordRetried). An operation still waiting when the
// run ends is not recorded (its refusals are).

const (
	// defaultRetryWait is the wait after a 503 without a Retry-After.
	defaultRetryWait = time.Second
	// maxRetryWait bounds the wait a Retry-After asks for.
	maxRetryWait = 10 * time.Second
)

// overloaded reports whether err is a node's 503 (its queue, or a
// shard's, was full).
func overloaded(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusServiceUnavailable
}

// retryWait is how long to wait before trying again an operation that
// failed with err, and whether to: only a 503 is waited out and tried
// again. fixed 0: what Retry-After asks plus up to a tenth more; else
// a backoff from fixed/2 to 3·fixed/2 (RunConfig.RetryWait). r draws the
// jitter (nil: none).
func retryWait(err error, r *rand.Rand, fixed time.Duration) (time.Duration, bool) {
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusServiceUnavailable {
		return 0, false
	}
	if fixed > 0 {
		if r == nil {
			return fixed, true
		}
		return fixed/2 + time.Duration(r.Int63n(int64(fixed)+1)), true
	}
	wait := se.RetryAfter
	if wait <= 0 {
		wait = defaultRetryWait
	}
	wait = min(wait, maxRetryWait)
	if r != nil {
		wait += time.Duration(r.Int63n(int64(wait)/10 + 1))
	}
	return wait, true
}

// sleep waits d or until ctx ends; false when ctx ended. Tests replace it.
var sleep = func(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// sleepBeforeRetry waits before a load write is tried again: what a
// 503's Retry-After asks (retryWait), 100 ms after another failure.
// False when ctx ended.
func sleepBeforeRetry(ctx context.Context, err error) bool {
	wait, ok := retryWait(err, nil, 0)
	if !ok {
		wait = 100 * time.Millisecond
	}
	return sleep(ctx, wait)
}
