package store

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/transport"
)

// listenHigh listens on 127.0.0.1 at a free port in 44000–45999.
func listenHigh() (net.Listener, error) {
	var err error
	for range 100 {
		var l net.Listener
		if l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 44000+rand.IntN(2000))); err == nil {
			return l, nil
		}
	}
	return nil, err
}

// fakeDisk is the free space a node's transport measures for incoming
// snapshots (transport.Config.DiskFree): below the reserve (low), or
// with room for the start of a stream and cutAfter-1 chunks and then
// below it, the staged files listed at that moment (cut), or with room.
type fakeDisk struct {
	mu       sync.Mutex
	mode     string // "low", "cut", "room"
	measures int    // since the mode was set
	cutAfter int
	staging  string
	atCut    []string // the staged files when the stream was cut
	cuts     int
}

const fakeReserve = 64 << 20

func (d *fakeDisk) set(mode string) {
	d.mu.Lock()
	d.mode, d.measures = mode, 0
	d.mu.Unlock()
}

func (d *fakeDisk) free() (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.measures++
	switch {
	case d.mode == "room", d.mode == "cut" && d.measures <= d.cutAfter:
		return 1 << 40, nil
	case d.mode == "cut":
		d.atCut, _ = stagedFiles(d.staging)
		d.cuts++
		d.mode = "low" // the sender's retries are refused at their start
	}
	return fakeReserve - 1, nil
}

func stagedFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, err
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20 s for %s", what)
		}
	}
}

// A follower that needs a snapshot while its disk is below the reserve
// refuses every stream at its start (the leader retries: raft hears of a
// failure, not of a follower gone for good), cuts a stream once the disk
// falls below the reserve while it comes, leaves no staged file either
// way and stays at its old state; once the disk has room, the leader's
// next try installs the snapshot.
func TestSnapshotKeepsTheDiskReserve(t *testing.T) {
	c := newGRPCClusterOn(t, listenHigh)
	c.leader()
	c.stop(3)
	c.fill(300) // about 600 KB: some 37 chunks of 16 KiB
	disk := &fakeDisk{mode: "low", cutAfter: 6, staging: c.nodes[3].dir + "/staging"}
	c.tuneTr = func(id uint64, cfg *transport.Config) {
		if id == 3 {
			cfg.DiskFree, cfg.DiskReserve = disk.free, fakeReserve
		}
	}
	c.start(3, false)
	n3 := c.nodes[3]
	if n3.eng.StagingDir() != disk.staging {
		t.Fatalf("staging folder %s, not %s", n3.eng.StagingDir(), disk.staging)
	}
	applied := func() uint64 {
		a, _, _ := n3.st.Replica(1).Hash()
		return a
	}
	// Short of the leaders' logs, node 3 gets no further than this
	// without a snapshot (it may still apply what it had committed).
	logStart := ^uint64(0)
	for _, id := range []uint64{1, 2} {
		first, _ := c.nodes[id].st.Replica(1).LogBounds()
		logStart = min(logStart, first-1)
	}
	refused := func() uint64 { return n3.tr.Stats().SnapshotsRefused }
	noStaged := func(when string) {
		t.Helper()
		if files, err := stagedFiles(disk.staging); err != nil || len(files) > 0 {
			t.Fatalf("%s: staged files %v (%v), want none", when, files, err)
		}
	}

	// Below the reserve: refused at the start, again and again.
	waitFor(t, "two snapshots refused below the reserve", func() bool { return refused() >= 2 })
	noStaged("after snapshots refused at their start")
	if a := applied(); a >= logStart {
		t.Fatalf("node 3 reached index %d (the leaders' logs begin after %d) while refusing snapshots", a, logStart)
	}

	// Room for the start and five chunks, then below the reserve. The
	// cut stream's handler removes what it staged as it ends.
	disk.set("cut")
	waitFor(t, "a snapshot cut as the disk fell below the reserve", func() bool {
		disk.mu.Lock()
		defer disk.mu.Unlock()
		return disk.cuts == 1
	})
	disk.mu.Lock()
	atCut := disk.atCut
	disk.mu.Unlock()
	if len(atCut) == 0 {
		t.Fatal("nothing was staged when the stream was cut: it was not cut midway")
	}
	waitFor(t, fmt.Sprintf("the cut stream's staged files %v to go", atCut), func() bool {
		files, err := stagedFiles(disk.staging)
		return err == nil && len(files) == 0
	})
	n := refused()
	waitFor(t, "the leader's next try refused at its start", func() bool { return refused() > n })
	noStaged("after the next try")
	if a := applied(); a >= logStart {
		t.Fatalf("node 3 reached index %d (the leaders' logs begin after %d) by a snapshot that was cut", a, logStart)
	}

	// Room: the leader's next try installs the snapshot.
	disk.set("room")
	waitFor(t, "node 3 to catch up by a snapshot", func() bool {
		la, lh, err1 := c.nodes[1].st.Replica(1).Hash()
		fa, fh, err2 := n3.st.Replica(1).Hash()
		return err1 == nil && err2 == nil && la == fa && lh == fh && fa > logStart
	})
	waitFor(t, "the installed snapshot's staged files to go", func() bool {
		files, err := stagedFiles(disk.staging)
		return err == nil && len(files) == 0
	})
	// The sender counts a stream once SendSnapshot returns, a moment
	// after the receiver installed it.
	var failed, sent uint64
	waitFor(t, "the leader to count the snapshot sent", func() bool {
		failed, sent = 0, 0
		for _, id := range []uint64{1, 2} {
			st := c.nodes[id].st.SnapshotStats()
			failed, sent = failed+st.Failed, sent+st.Sent
		}
		return sent > 0
	})
	if failed < 4 {
		t.Fatalf("the leaders counted %d snapshots failed, want at least 4 (refused at the start, cut, refused again)", failed)
	}
}
