package etcdapi

import (
	"bytes"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// checkTxn checks r before anything of it runs, in etcd's order: first
// what etcd refuses in any Txn (empty keys, empty operations, value or
// lease provided with ignore_value or ignore_lease, bad sort options;
// and Cairn's key and value size bounds), then writes to one key that
// etcd refuses together (dupChecker.writes), and only then what Cairn
// does not serve (ranges, several keys, some compares, past revisions).
// So a request etcd refuses gets etcd's error, and one etcd runs is
// either run or refused naming the limitation. It returns the one key
// r names, nested Txns included (nil: r has no compare and no
// operation on any key).
func (s *Server) checkTxn(r *pb.TxnRequest) ([]byte, error) {
	c := txnChecker{s: s}
	if err := c.txn(r, MaxTxnOps); err != nil {
		return nil, err
	}
	// For a request on one key the write check is linear; for one
	// Cairn refuses anyway, its cost is bounded and, past the bound,
	// the limitation is answered instead of etcd's verdict.
	d := dupChecker{budget: -1}
	if c.limit != nil {
		d.budget = maxDupCheckWork
	}
	for _, ops := range [][]*pb.RequestOp{r.GetSuccess(), r.GetFailure()} {
		_, err := d.writes(ops)
		if errors.Is(err, errDupCheckTooCostly) {
			return nil, c.limit
		}
		if err != nil {
			return nil, err
		}
	}
	if c.limit != nil {
		return nil, c.limit
	}
	return c.key, nil
}

// txnChecker walks a Txn and its nested Txns for checkTxn; limit holds
// the first thing found that Cairn does not serve, key the key named
// first.
type txnChecker struct {
	s     *Server
	key   []byte
	limit error
}

// refuse records why Cairn does not serve the Txn, unless a reason is
// recorded already.
func (c *txnChecker) refuse(err error) {
	if c.limit == nil {
		c.limit = err
	}
}

// name checks a key the Txn names (and the end of its range, if any).
func (c *txnChecker) name(key, end []byte) error {
	if err := c.s.checkKey(key); err != nil {
		return err
	}
	switch {
	case len(end) > 0:
		c.refuse(notSupported("a Txn over a range of keys is not served yet"))
	case c.key == nil:
		c.key = key
	case !bytes.Equal(c.key, key):
		c.refuse(notSupported("a Txn's compares and operations must all name one key, nested Txns included"))
	}
	return nil
}

// MaxTxnOps bounds a Txn's compares, and each of its lists of
// operations, as etcd's --max-txn-ops does with its default; a nested
// Txn gets what its enclosing Txn's longest list leaves of its own bound.
const MaxTxnOps = 128

// txn checks r's compares, then its success and failure operations, as
// etcd's checkTxnRequest does: at most maxOps of each
// (rpctypes.ErrGRPCTooManyOps beyond).
func (c *txnChecker) txn(r *pb.TxnRequest, maxOps int) error {
	opc := max(len(r.GetCompare()), len(r.GetSuccess()), len(r.GetFailure()))
	if opc > maxOps {
		return rpctypes.ErrGRPCTooManyOps
	}
	for _, cmp := range r.GetCompare() {
		if err := c.name(cmp.Key, cmp.RangeEnd); err != nil {
			return err
		}
		if err := compareSupported(cmp); err != nil {
			c.refuse(err)
		}
	}
	for _, ops := range [][]*pb.RequestOp{r.GetSuccess(), r.GetFailure()} {
		for _, op := range ops {
			if err := c.op(op, maxOps-opc); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *txnChecker) op(op *pb.RequestOp, maxOps int) error {
	switch o := op.GetRequest().(type) {
	case *pb.RequestOp_RequestRange:
		rr := o.RequestRange
		if err := c.name(rr.GetKey(), rr.GetRangeEnd()); err != nil {
			return err
		}
		if !sortDefined(rr) {
			return rpctypes.ErrGRPCInvalidSortOption
		}
		if rr.GetRevision() != 0 {
			c.refuse(notSupported("reads at a past revision: Cairn keeps no history"))
		}
	case *pb.RequestOp_RequestPut:
		p := o.RequestPut
		if err := c.name(p.GetKey(), nil); err != nil {
			return err
		}
		if p.GetIgnoreValue() && len(p.GetValue()) != 0 {
			return rpctypes.ErrGRPCValueProvided
		}
		if p.GetIgnoreLease() && p.GetLease() != 0 {
			return rpctypes.ErrGRPCLeaseProvided
		}
		if len(p.GetValue()) > c.s.cfg.MaxValueSize {
			return rpctypes.ErrGRPCRequestTooLarge
		}
	case *pb.RequestOp_RequestDeleteRange:
		d := o.RequestDeleteRange
		if err := c.name(d.GetKey(), d.GetRangeEnd()); err != nil {
			return err
		}
	case *pb.RequestOp_RequestTxn:
		return c.txn(o.RequestTxn, maxOps)
	default:
		// An operation with no request: etcd answers "key not found".
		return rpctypes.ErrGRPCKeyNotFound
	}
	return nil
}

// maxDupCheckWork bounds the set operations dupChecker.writes spends
// on a request that names several keys or ranges (refused by Cairn
// anyway). On one key the work is linear in the request, and not
// bounded.
const maxDupCheckWork = 1 << 20

// errDupCheckTooCostly: the bound ran out before dupChecker.writes
// decided.
var errDupCheckTooCostly = errors.New("etcdapi: duplicate-key check over its bound")

// writeSet is what a list of a Txn's operations writes, its nested Txns'
// included: the keys it puts and the keys and ranges it deletes.
type writeSet struct {
	puts   map[string]struct{}
	dels   map[string]struct{}
	ranges []keyRange
}

// keyRange is a deleted range [from, to), compared as etcd's check
// compares it: bytewise, so a range whose end is not above its start
// (from-key's "\x00" end among them) holds no key.
type keyRange struct{ from, to string }

type dupChecker struct {
	budget int // set operations left; negative: no bound
}

func (d *dupChecker) spend(n int) error {
	if d.budget < 0 {
		return nil
	}
	if d.budget -= n; d.budget < 0 {
		return errDupCheckTooCostly
	}
	return nil
}

// deleted reports whether w deletes key k.
func (d *dupChecker) deleted(w *writeSet, k string) (bool, error) {
	if err := d.spend(1 + len(w.ranges)); err != nil {
		return false, err
	}
	if _, ok := w.dels[k]; ok {
		return true, nil
	}
	for _, r := range w.ranges {
		if r.from <= k && k < r.to {
			return true, nil
		}
	}
	return false, nil
}

// put adds k to w's puts, refusing it (etcd's duplicate key) when w
// puts it already and ok does not allow it, or deletes it.
func (d *dupChecker) put(w *writeSet, k string, ok func(string) bool) error {
	if err := d.spend(1); err != nil {
		return err
	}
	if _, dup := w.puts[k]; dup && (ok == nil || !ok(k)) {
		return rpctypes.ErrGRPCDuplicateKey
	}
	del, err := d.deleted(w, k)
	if err != nil {
		return err
	}
	if del {
		return rpctypes.ErrGRPCDuplicateKey
	}
	if w.puts == nil {
		w.puts = map[string]struct{}{}
	}
	w.puts[k] = struct{}{}
	return nil
}

// addDeletes adds the deletes of from to w.
func (d *dupChecker) addDeletes(w *writeSet, from writeSet) error {
	if err := d.spend(len(from.dels) + len(from.ranges)); err != nil {
		return err
	}
	for k := range from.dels {
		if w.dels == nil {
			w.dels = map[string]struct{}{}
		}
		w.dels[k] = struct{}{}
	}
	w.ranges = append(w.ranges, from.ranges...)
	return nil
}

// writes applies etcd's rule (checkIntervals, in etcd's
// server/etcdserver/api/v3rpc/key.go) to a list of operations and
// returns what they write. Deleting a key more than once is allowed;
// putting a key twice, or putting and deleting it, is refused with
// rpctypes.ErrGRPCDuplicateKey, whatever their order, when either
// operation is in the list itself, and across two nested Txns of the
// list when the deleting Txn comes first or both put. A nested Txn's
// success and failure operations are checked each on its own (only one
// of them runs), against the list's own deletes and against the nested
// Txns before it; its success and failure may put the same key.
func (d *dupChecker) writes(ops []*pb.RequestOp) (writeSet, error) {
	var w writeSet
	// The list's own deletes first: every put, its own or a nested
	// Txn's, is checked against them.
	for _, op := range ops {
		dr := op.GetRequestDeleteRange()
		if dr == nil {
			continue
		}
		if err := d.spend(1); err != nil {
			return w, err
		}
		if len(dr.RangeEnd) > 0 {
			w.ranges = append(w.ranges, keyRange{string(dr.Key), string(dr.RangeEnd)})
			continue
		}
		if w.dels == nil {
			w.dels = map[string]struct{}{}
		}
		w.dels[string(dr.Key)] = struct{}{}
	}
	// The nested Txns, in order: their puts against the puts and the
	// deletes so far, then their deletes join the list's.
	for _, op := range ops {
		nested := op.GetRequestTxn()
		if nested == nil {
			continue
		}
		then, err := d.writes(nested.Success)
		if err != nil {
			return w, err
		}
		els, err := d.writes(nested.Failure)
		if err != nil {
			return w, err
		}
		for k := range then.puts {
			if err := d.put(&w, k, nil); err != nil {
				return w, err
			}
		}
		inThen := func(k string) bool { _, ok := then.puts[k]; return ok }
		for k := range els.puts {
			if err := d.put(&w, k, inThen); err != nil {
				return w, err
			}
		}
		if err := d.addDeletes(&w, then); err != nil {
			return w, err
		}
		if err := d.addDeletes(&w, els); err != nil {
			return w, err
		}
	}
	// The list's own puts, against everything the list writes.
	for _, op := range ops {
		if p := op.GetRequestPut(); p != nil {
			if err := d.put(&w, string(p.Key), nil); err != nil {
				return w, err
			}
		}
	}
	return w, nil
}
