package chaos

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseFault reads a fault from the command line: kill, pause, restart,
// partition (isolate the target), split (a minority with the target against
// a majority), disk-stall=DURATION, disk-full (the node's disk guard
// refuses new values), corrupt (one replica's values changed while the node
// is down; healing waits for the scrub to repair it), clock-skew=DURATION (the node's
// clocks off by it while the fault lasts), clock-jump=DURATION (the
// clocks step by it once), cpu=FRACTION-OF-A-CORE or memory=MB.
// needsCgroups is true for cpu and memory.
func ParseFault(spec string) (f Fault, needsCgroups bool, err error) {
	kind, arg, hasArg := strings.Cut(spec, "=")
	noArg := func(f Fault) (Fault, bool, error) {
		if hasArg {
			return nil, false, fmt.Errorf("chaos: fault %q takes no value", kind)
		}
		return f, false, nil
	}
	switch kind {
	case "kill":
		return noArg(killFault{})
	case "pause":
		return noArg(pauseFault{})
	case "restart":
		return noArg(restartFault{})
	case "partition":
		return noArg(partitionFault{})
	case "split":
		return noArg(splitFault{})
	case "disk-full":
		return noArg(diskFullFault{})
	case "corrupt":
		return noArg(corruptFault{})
	case "disk-stall":
		d, err := time.ParseDuration(arg)
		if err != nil || d <= 0 {
			return nil, false, fmt.Errorf("chaos: disk-stall=DURATION (e.g. disk-stall=1s), got %q", spec)
		}
		return diskStallFault{d}, false, nil
	case "clock-skew", "clock-jump":
		d, err := time.ParseDuration(arg)
		if err != nil || d == 0 || d < -24*time.Hour || d > 24*time.Hour {
			return nil, false, fmt.Errorf("chaos: %s=DURATION (e.g. %s=2m, -24h to 24h, not 0), got %q", kind, kind, spec)
		}
		return clockFault{by: d, jump: kind == "clock-jump"}, false, nil
	case "cpu":
		q, err := strconv.ParseFloat(arg, 64)
		if err != nil || q <= 0 || q > 64 {
			return nil, false, fmt.Errorf("chaos: cpu=FRACTION of a core (e.g. cpu=0.1), got %q", spec)
		}
		return cgroupFault{cpu: q}, true, nil
	case "memory":
		mb, err := strconv.ParseInt(strings.TrimSuffix(strings.ToUpper(arg), "MB"), 10, 64)
		if err != nil || mb < 16 || mb > 1<<20 {
			return nil, false, fmt.Errorf("chaos: memory=MB (16 or more, e.g. memory=256), got %q", spec)
		}
		return cgroupFault{memory: mb << 20}, true, nil
	}
	return nil, false, fmt.Errorf("chaos: unknown fault %q (kill, pause, restart, partition, split, disk-stall=D, disk-full, corrupt, clock-skew=D, clock-jump=D, cpu=Q, memory=MB)", spec)
}

// Schedule repeats one fault: the first at At, lasting For, Repeat times,
// one every Every (start to start).
type Schedule struct {
	At, For, Every time.Duration
	Repeat         int
}

// Validate checks the schedule.
func (s Schedule) Validate() error {
	switch {
	case s.At < time.Second:
		return fmt.Errorf("chaos: --at must be at least 1s (a baseline comes first)")
	case s.For <= 0:
		return fmt.Errorf("chaos: --for must be positive")
	case s.Repeat < 1 || s.Repeat > 100:
		return fmt.Errorf("chaos: --repeat must be 1 to 100")
	case s.Repeat > 1 && s.Every < s.For+time.Second:
		return fmt.Errorf("chaos: --every must leave at least 1s between faults (more than --for)")
	}
	return nil
}

// End is when the last fault heals.
func (s Schedule) End() time.Duration {
	return s.At + time.Duration(s.Repeat-1)*s.Every + s.For
}

// Steps lays the schedule out for fault f on target.
func (s Schedule) Steps(f Fault, target string) []Step {
	out := make([]Step, 0, s.Repeat)
	for i := 0; i < s.Repeat; i++ {
		out = append(out, Step{Fault: f, Target: target, At: s.At + time.Duration(i)*s.Every, For: s.For})
	}
	return out
}

// ValidTarget checks a target: leader, follower (of shard 1, or
// leader:SHARD / follower:SHARD), node:N or random.
func ValidTarget(target string) error {
	_, _, err := parseTarget(target)
	return err
}

// parseTarget splits a target into its kind and number: the shard for
// leader and follower (1 when not given), the node for node:N, 0 for random.
func parseTarget(target string) (kind string, n uint64, err error) {
	kind, arg, has := strings.Cut(target, ":")
	switch kind {
	case "leader", "follower":
		if !has {
			return kind, 1, nil
		}
		fallthrough
	case "node":
		if n, err := strconv.ParseUint(arg, 10, 64); has && err == nil && n > 0 {
			return kind, n, nil
		}
	case "random":
		if !has {
			return kind, 0, nil
		}
	}
	return "", 0, fmt.Errorf("chaos: bad target %q (leader, follower, leader:SHARD, follower:SHARD, node:N or random)", target)
}
