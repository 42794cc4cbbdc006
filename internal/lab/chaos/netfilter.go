package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// How partition faults cut the network (ClusterConfig.Partitions).
const (
	// PartitionsAuto uses iptables where the lab can, else the hook.
	PartitionsAuto = "auto"
	// PartitionsIPTables gives every node its own loopback address
	// (127.a.b.n) and drops the packets between cut nodes' addresses with
	// iptables rules in a chain of the lab's own: the kernel loses the
	// traffic, connections stall and time out as on a real network.
	PartitionsIPTables = "iptables"
	// PartitionsHook tells every node, through its fault hook
	// (--fault-injection), to drop what it exchanges with the other side.
	PartitionsHook = "hook"
)

// netfilter cuts traffic between node addresses with iptables.
type netfilter struct {
	chain string
}

// iptables runs one iptables command.
func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetfilter creates the lab's chain and sends every locally generated
// packet through it.
func newNetfilter() (*netfilter, error) {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, fmt.Errorf("%w: no iptables command", ErrUnsupported)
	}
	nf := &netfilter{chain: fmt.Sprintf("CAIRN-CHAOS-%d", os.Getpid())}
	if err := iptables("-N", nf.chain); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	if err := iptables("-I", "OUTPUT", "-j", nf.chain); err != nil {
		_ = iptables("-X", nf.chain)
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return nf, nil
}

// cutRules are the rule specifications (after "-A chain") that drop the
// traffic between peer addresses a and b: each side's packets to the
// other's peer port, so neither can reach the other's server and the
// connections it has stall.
func cutRules(a, b string) ([][]string, error) {
	var rules [][]string
	for _, dir := range [][2]string{{a, b}, {b, a}} {
		src, _, err := net.SplitHostPort(dir[0])
		if err != nil {
			return nil, err
		}
		dst, port, err := net.SplitHostPort(dir[1])
		if err != nil {
			return nil, err
		}
		rules = append(rules, []string{"-s", src, "-d", dst, "-p", "tcp", "--dport", port, "-j", "DROP"})
	}
	return rules, nil
}

// cut drops the traffic between every pair of peer addresses.
func (nf *netfilter) cut(pairs [][2]string) error {
	for _, p := range pairs {
		rules, err := cutRules(p[0], p[1])
		if err != nil {
			return err
		}
		for _, r := range rules {
			if err := iptables(append([]string{"-A", nf.chain}, r...)...); err != nil {
				return err
			}
		}
	}
	return nil
}

// heal removes every rule.
func (nf *netfilter) heal() error { return iptables("-F", nf.chain) }

// close removes the chain.
func (nf *netfilter) close() {
	_ = iptables("-D", "OUTPUT", "-j", nf.chain)
	_ = iptables("-F", nf.chain)
	_ = iptables("-X", nf.chain)
}

// nodeIPs picks a /24 of the loopback range for a cluster's nodes, at
// random so that concurrent runs do not share addresses: node n gets
// 127.a.b.n.
func nodeIPs(n int) ([]string, error) {
	if n > 250 {
		return nil, errors.New("chaos: too many nodes for one loopback /24")
	}
	a, b := 1+rand.IntN(254), 1+rand.IntN(254)
	out := make([]string, n)
	for i := range out {
		out[i] = "127." + strconv.Itoa(a) + "." + strconv.Itoa(b) + "." + strconv.Itoa(i+1)
	}
	return out, nil
}
