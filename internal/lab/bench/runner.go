package bench

import (
	"context"
	"errors"
	"fmt"
	"github.com/cairn-db/cairn/internal/lab/result"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/deadline"
	"google.golang.org/grpc/status"
)

// ErrKind classifies an error for the "errors by kind" report.
func ErrKind(err error) string {
	var se *StatusError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &se):
		return fmt.Sprintf("http_%d", se.Code)
	}
	if s, ok := status.FromError(err); ok {
		return "grpc_" + s.Code().String()
	}
	return result.ErrKind(err)
}

func exec(ctx context.Context, d Driver, conn int, op Op) error {
	switch op.Kind {
	case KindPut:
		if len(op.Index) > 0 {
			id, err := indexDriver(d)
			if err != nil {
				return err
			}
			return id.PutIndexed(ctx, conn, op.Key, op.Value, op.Index)
		}
		return d.Put(ctx, conn, op.Key, op.Value)
	case KindGet:
		return d.Get(ctx, conn, op.Key)
	case KindScan:
		return d.Scan(ctx, conn, op.Key, op.Limit)
	case KindRMW:
		if err := d.Get(ctx, conn, op.Key); err != nil && err != ErrNotFound {
			return err
		}
		return d.Put(ctx, conn, op.Key, op.Value)
	case KindEntityPut:
		if len(op.Index) > 0 {
			id, err := indexDriver(d)
			if err != nil {
				return err
			}
			return id.EntityPutIndexed(ctx, conn, op.Key, op.Value, op.Index)
		}
		return d.EntityPut(ctx, conn, op.Key, op.Value)
	case KindEntityGet:
		return d.EntityGet(ctx, conn, op.Key)
	}
	return execIndexed(ctx, d, conn, op)
}

// Preload writes the workload's initial records with parallel clients.
func Preload(ctx context.Context, d Driver, w Workload, clients int, timeout time.Duration) (uint64, error) {
	n, gen := w.Preload()
	if n == 0 {
		return 0, nil
	}
	put := func(ctx context.Context, conn int, _ uint64, k, v []byte) error { return d.Put(ctx, conn, k, v) }
	if ip, ok := w.(indexPreloader); ok {
		id, ok := d.(IndexDriver)
		if !ok {
			return 0, errIndexUnsupported
		}
		put = func(ctx context.Context, conn int, i uint64, k, v []byte) error {
			return id.PutIndexed(ctx, conn, k, v, ip.PreloadIndex(i))
		}
	}
	var next atomic.Uint64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for c := 0; c < max(clients, 1); c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				k, v := gen(i)
				var err error
				// Five tries, but an overloaded node's 503 is no failure:
				// waited out (a second each, until ctx ends) without
				// counting, so a per-shard soft limit that bites does not
				// fail the load.
				for try := 0; try < 5; {
					octx, cancel := context.WithTimeout(ctx, timeout)
					err = put(octx, c, i, k, v)
					cancel()
					if err == nil || !sleepBeforeRetry(ctx, err) {
						break
					}
					if !overloaded(err) {
						try++
					}
				}
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("bench: preload record %d: %w", i, err) })
					return
				}
			}
		}(c)
	}
	wg.Wait()
	return n, firstErr
}

// Run drives the workload with the load model and returns its results;
// it fills cfg's defaults and validates it first.
func Run(ctx context.Context, d Driver, w Workload, cfg RunConfig) (result.RunResult, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return result.RunResult{}, err
	}
	begin := time.Now()
	rec := result.NewRecorder(begin.Add(cfg.Warmup), ErrKind)
	if cfg.Total == 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, begin.Add(cfg.Warmup+cfg.Duration))
		defer c2()
	}
	// waits: what a refused operation's wait ends with (the run's end);
	// not the cancel that stops issuing after Total operations, so the
	// operations already issued complete.
	waits := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var issued atomic.Uint64 // measured operations started (for Total)
	take := func(now time.Time) bool {
		if cfg.Total == 0 || now.Before(rec.Start()) {
			return true
		}
		if issued.Add(1) > cfg.Total {
			cancel()
			return false
		}
		return true
	}
	var due chan time.Time
	if cfg.Rate > 0 {
		due = make(chan time.Time, cfg.Clients*4)
		go schedule(ctx, begin, cfg.Rate, due)
	}
	stopProgress := startProgress(rec, cfg, begin)
	// The loop speaks the plain kinds only (the nhs workload's HEADs,
	// index headers and queries go through the driver).
	_, indexed := w.(*nhsWL)
	if hd, ok := d.(*httpDriver); ok && !hd.c.HTTP2 && due == nil && !indexed {
		// HTTP/1.1 in a closed loop: without a goroutine per client.
		runLoops(ctx, waits, hd, w, cfg, rec, take)
	} else {
		runClients(ctx, waits, d, w, cfg, rec, take, due)
	}
	stopProgress()
	elapsed := time.Since(rec.Start())
	all, per := rec.Results(elapsed)
	return result.RunResult{Clients: cfg.Clients, Conns: cfg.Conns, Rate: cfg.Rate, Elapsed: elapsed.Seconds(), All: all, Operations: per}, nil
}

// runClients runs each client as a goroutine: the closed loop, or with
// due the open loop. A refused operation's wait ends early with waits.
func runClients(ctx, waits context.Context, d Driver, w Workload, cfg RunConfig, rec *result.Recorder, take func(time.Time) bool, due chan time.Time) {
	// Operations share their deadlines' timers (one per 10 ms) rather
	// than each making one: the load generator shares the machine.
	deadlines := deadline.New(context.Background(), cfg.OpTimeout, 10*time.Millisecond)
	var wg sync.WaitGroup
	for c := 0; c < cfg.Clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(cfg.Seed + int64(c)*7919 + 1))
			conn := c % cfg.Conns
			for ctx.Err() == nil {
				intended := time.Now()
				if due != nil {
					select {
					case intended = <-due:
					case <-ctx.Done():
						return
					}
				}
				if !take(intended) {
					return
				}
				op := w.Next(rng)
				// Refused (503): waited out and tried again (retry.go).
				sent := intended
				err := exec(deadlines.Context(time.Now()), d, conn, op)
				for {
					wait, ok := retryWait(err, rng, cfg.RetryWait)
					if !ok {
						break
					}
					rec.Refused(op.Name, intended)
					if !sleep(waits, wait) {
						return // the run ended: the operation never completed
					}
					sent = time.Now()
					err = exec(deadlines.Context(sent), d, conn, op)
				}
				rec.RecordRetried(op.Name, intended, sent, time.Now(), err)
			}
		}(c)
	}
	wg.Wait()
}

// schedule emits the due time of operation i, begin + i/rate.
func schedule(ctx context.Context, begin time.Time, rate float64, due chan<- time.Time) {
	interval := time.Duration(float64(time.Second) / rate)
	for i := int64(0); ; i++ {
		t := begin.Add(time.Duration(i) * interval)
		if d := time.Until(t); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		}
		select {
		case due <- t:
		case <-ctx.Done():
			return
		}
	}
}

func startProgress(rec *result.Recorder, cfg RunConfig, begin time.Time) func() {
	if cfg.Progress == nil {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var last uint64
		for i := 1; ; i++ {
			select {
			case <-t.C:
			case <-stop:
				if cfg.TTY {
					fmt.Fprintln(cfg.Progress)
				}
				return
			}
			n, errs, p99 := rec.Progress()
			rate := n - last
			last = n
			var where string
			if cfg.Total > 0 {
				where = fmt.Sprintf("%d/%d", n, cfg.Total)
			} else {
				where = fmt.Sprintf("%s/%s", time.Since(begin).Round(time.Second), (cfg.Warmup + cfg.Duration).Round(time.Second))
			}
			line := fmt.Sprintf("%s  %d ops/s  p99 %.2f ms  errors %d", where, rate, p99, errs)
			if cfg.TTY {
				fmt.Fprintf(cfg.Progress, "\r\033[K%s", line)
			} else if i%5 == 0 {
				fmt.Fprintln(cfg.Progress, line)
			}
		}
	}()
	return func() { close(stop); <-done }
}
