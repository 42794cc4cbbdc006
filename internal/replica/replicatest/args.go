package replicatest

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"
)

// cmdArgs are a script command's arguments.
type cmdArgs []datadriven.CmdArg

func args(td *datadriven.TestData) cmdArgs { return td.CmdArgs }

func (a cmdArgs) get(key string) (string, bool) {
	for _, c := range a {
		if c.Key == key {
			if len(c.Vals) == 0 {
				return "", true
			}
			return c.Vals[0], true
		}
	}
	return "", false
}

func (a cmdArgs) has(key string) bool { _, ok := a.get(key); return ok }

func (a cmdArgs) str(key, def string) string {
	if v, ok := a.get(key); ok {
		return v
	}
	return def
}

func (a cmdArgs) int(key string, def int, errp *error) int {
	v, ok := a.get(key)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil && *errp == nil {
		*errp = fmt.Errorf("%w: %s=%q: %v", ErrBadCommand, key, v, err)
	}
	return n
}

func (a cmdArgs) duration(key string, def time.Duration, errp *error) time.Duration {
	v, ok := a.get(key)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil && *errp == nil {
		*errp = fmt.Errorf("%w: %s=%q: %v", ErrBadCommand, key, v, err)
	}
	return d
}

// filter parses from=, to=, type= and held.
func (a cmdArgs) filter(errp *error) msgFilter {
	return msgFilter{
		from: uint64(a.int("from", 0, errp)),
		to:   uint64(a.int("to", 0, errp)),
		typ:  a.str("type", ""),
		held: a.has("held"),
	}
}

// nodes lists the bare numeric arguments (node ids).
func (a cmdArgs) nodes() []uint64 {
	var out []uint64
	for _, c := range a {
		if len(c.Vals) > 0 {
			continue
		}
		if n, err := strconv.ParseUint(c.Key, 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// groups parses "1 / 2 3" into {{1}, {2, 3}}.
func (a cmdArgs) groups() ([][]uint64, error) {
	groups := [][]uint64{nil}
	for _, c := range a {
		if c.Key == "/" {
			groups = append(groups, nil)
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(c.Key), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: partition: %q is not a node", ErrBadCommand, c.Key)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], n)
	}
	if len(groups) < 2 {
		return nil, fmt.Errorf("%w: partition needs groups separated by /", ErrBadCommand)
	}
	return groups, nil
}
