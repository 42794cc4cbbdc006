package replicatest

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// nodeConfig is the replica configuration every node shares (zero: the
// replica's default).
type nodeConfig struct {
	ElectionTick, HeartbeatTick int
	TruncateThreshold           uint64
	TruncateKeep                uint64
	TruncateBytes               uint64
	DedupTTL                    time.Duration
	CutPastDown                 bool
	// LeaseDuration: the leader lease (0: none), measured on the
	// harness's clock without skew.
	LeaseDuration time.Duration
}

// dataDir is where every node's engine lives on its own in-memory FS.
const dataDir = "/data"

// engineOptions keep the in-memory engines small.
func engineOptions(fs *storage.CrashableFS) storage.Options {
	return storage.Options{FS: fs.FS(), CacheSize: 1 << 20, MemTableSize: 4 << 20}
}

// Node is one node of the environment: an engine on a crashable
// in-memory filesystem and the shard's replica on it.
type Node struct {
	ID      uint64
	Engine  *storage.Engine
	Replica *replica.Replica

	env *Env
	fs  *storage.CrashableFS
	// skew is added to the environment's monotonic clock to make this
	// node's (Config.Clock): a node whose clock runs ahead.
	skew time.Duration
	// gen counts the node's incarnations; a replica of an earlier one
	// (crashed) sends nothing.
	gen    int
	staged *stagedRound
	// busy: the replica is inside Stage..Finish (locked); left set by a
	// panic, when the replica must not be touched again.
	busy bool
	last string // the status line printed last
	// dropped: the replica's DroppedMessages count printed last.
	dropped uint64
}

type stagedRound struct {
	b    *storage.Batch
	rr   *replica.Round
	sync bool
}

// open opens the node's engine (creating its filesystem if new) and its
// replica.
func (nd *Node) open(bootstrap bool) error {
	if err := nd.openEngine(); err != nil {
		return err
	}
	r, err := replica.Open(nd.env.replicaConfig(nd), bootstrap)
	if err != nil {
		nd.Engine.Close()
		return fmt.Errorf("replicatest: open node %d: %w", nd.ID, err)
	}
	nd.Replica = r
	nd.last = ""
	nd.dropped = 0
	return nil
}

// openEngine opens the node's engine (creating its filesystem if new)
// and counts a new incarnation.
func (nd *Node) openEngine() error {
	if nd.fs == nil {
		nd.fs = storage.NewCrashableFS()
	}
	eng, err := storage.Open(dataDir, engineOptions(nd.fs))
	if err != nil {
		return err
	}
	nd.Engine = eng
	nd.gen++
	nd.last = ""
	nd.dropped = 0
	return nil
}

// sender is the replica's Config.Send for the node's current incarnation.
func (nd *Node) sender() func(uint64, []raftpb.Message) {
	gen := nd.gen // open counts the incarnation before replica.Open
	return func(_ uint64, msgs []raftpb.Message) {
		if nd.gen != gen {
			return // a crashed incarnation
		}
		nd.env.send(nd, msgs)
	}
}

// close stops the replica and closes the engine (a clean shutdown, or the
// end of a crashed incarnation).
func (nd *Node) close() {
	if nd.busy && nd.staged == nil {
		return // wedged by a panic mid-round
	}
	if nd.staged != nil {
		nd.staged.b.Close()
		nd.Replica.Finish(nd.staged.rr)
		nd.staged = nil
		nd.busy = false
	}
	nd.Replica.Stop()
	_ = nd.Engine.Close()
}

// crash drops everything the node did not fsync (with percent > 0, keeps
// each unsynced block with that probability) and restarts it from what
// survived.
func (nd *Node) crash(percent int) error {
	survived := nd.fs.CrashClone(percent, nd.env.rng)
	nd.gen++ // the old incarnation sends nothing from now on
	nd.close()
	nd.fs = survived
	return nd.open(false)
}

// durable is the raft state the node's storage holds durably: what a
// crash at this instant would leave.
type durable struct {
	hs   raftpb.HardState
	last uint64
}

func (nd *Node) durableState() (durable, error) {
	eng, err := storage.Open(dataDir, engineOptions(nd.fs.CrashClone(0, nil)))
	if err != nil {
		return durable{}, err
	}
	defer eng.Close()
	lg, _, err := raftlog.Open(eng, ShardID, nil)
	if err != nil {
		return durable{}, err
	}
	hs, _, _ := lg.InitialState()
	last, _ := lg.LastIndex()
	return durable{hs: hs, last: last}, nil
}

// statusLine describes the replica's raft state.
func (nd *Node) statusLine() string {
	st := nd.Replica.Status()
	first, last := nd.Replica.LogBounds()
	return fmt.Sprintf("n%d: %s term=%d vote=%d lead=%d commit=%d applied=%d log=[%d,%d]",
		nd.ID, shortState(st.RaftState), st.Term, st.Vote, st.Lead, st.Commit, nd.Replica.Applied(), first, last)
}

func shortState(s raft.StateType) string {
	switch s {
	case raft.StateLeader:
		return "leader"
	case raft.StateFollower:
		return "follower"
	case raft.StateCandidate:
		return "candidate"
	case raft.StatePreCandidate:
		return "precandidate"
	}
	return s.String()
}

// printStatus prints the status line if it changed since last printed.
func (nd *Node) printStatus() {
	if s := nd.statusLine(); s != nd.last {
		nd.last = s
		nd.env.printf("%s", s)
	}
}

// get reads key from the node's engine (what its state machine holds).
func (nd *Node) get(key string) (version uint64, value string, ok bool, err error) {
	v, err := nd.Engine.Get(storage.DataKey(shard.Token([]byte(key)), []byte(key)))
	if errors.Is(err, storage.ErrNotFound) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, err
	}
	ver, data, err := storage.DecodeValue(v)
	if err != nil {
		return 0, "", false, err
	}
	return ver, string(data), true, nil
}

// dedupGroups counts the groups of the shard's dedup table (one per entry
// and bucket of shard clock) by bucket, in ascending bucket order.
func (nd *Node) dedupGroups() (buckets []uint64, counts []int, err error) {
	p := storage.DedupPrefix(ShardID)
	it, err := nd.Engine.NewIter(p, storage.PrefixEnd(p))
	if err != nil {
		return nil, nil, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		b, _, err := storage.DecodeDedupKey(it.Key())
		if err != nil {
			continue // the shard clock's own key
		}
		if n := len(buckets); n == 0 || buckets[n-1] != b {
			buckets, counts = append(buckets, b), append(counts, 0)
		}
		counts[len(counts)-1]++
	}
	return buckets, counts, it.Close()
}

// stagingFiles lists the files in the engine's staging folder (snapshots
// being received, or left by a failed one).
func (nd *Node) stagingFiles() ([]string, error) {
	return nd.fs.FS().List(nd.Engine.StagingDir())
}
