package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestCommandRoundTrip(t *testing.T) {
	c := Command{RequestID: []byte("0123456789abcdef"), Op: OpPut, Cond: CondIfMatch,
		Version: 1 << 40, Key: []byte("k\x00/"), Value: bytes.Repeat([]byte{0xff}, 300)}
	var d Command
	if err := d.Unmarshal(c.Marshal()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.RequestID, c.RequestID) || d.Op != c.Op ||
		d.Cond != c.Cond || d.Version != c.Version || !bytes.Equal(d.Key, c.Key) || !bytes.Equal(d.Value, c.Value) {
		t.Fatalf("round trip: %+v != %+v", d, c)
	}
}

func TestCommandRejectsTruncation(t *testing.T) {
	c := Command{RequestID: []byte("id"), Op: OpDelete, Key: []byte("key"), Value: []byte("v")}
	b := c.Marshal()
	for i := 0; i < len(b); i++ {
		var d Command
		if err := d.Unmarshal(b[:i]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("prefix %d: err %v", i, err)
		}
	}
	var d Command
	if err := d.Unmarshal(append(b, 0)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing byte accepted: %v", err)
	}
}

func TestRequestResponseRoundTrip(t *testing.T) {
	r := Request{Kind: KindWrite, ShardID: 7, Epoch: 2, Ack: 3, From: 3, DeadlineUnixNano: 99,
		Key: []byte("k"), Command: []byte("cmd")}
	var d Request
	if err := d.Unmarshal(r.Marshal()); err != nil {
		t.Fatal(err)
	}
	if d.Kind != r.Kind || d.ShardID != 7 || d.Epoch != 2 || d.Ack != 3 || d.From != 3 ||
		d.DeadlineUnixNano != 99 || string(d.Key) != "k" || string(d.Command) != "cmd" {
		t.Fatalf("got %+v", d)
	}
	resp := Response{Status: StatusNotLeader, Leader: 3, Version: 9, Created: true, Index: 4,
		Value: []byte("v"), Message: "m"}
	var e Response
	if err := e.Unmarshal(resp.Marshal()); err != nil {
		t.Fatal(err)
	}
	if e.Status != resp.Status || e.Leader != 3 || e.Version != 9 || !e.Created || e.Index != 4 ||
		string(e.Value) != "v" || e.Message != "m" {
		t.Fatalf("got %+v", e)
	}
	// The queue depth rides after the optional size and terms.
	for _, q := range []Response{{Status: StatusOverloaded, Queue: 300}, {Status: StatusOK, Size: 5, Queue: 1}} {
		var f Response
		if err := f.Unmarshal(q.Marshal()); err != nil {
			t.Fatal(err)
		}
		if f.Queue != q.Queue || f.Size != q.Size || f.Status != q.Status {
			t.Fatalf("got %+v, want %+v", f, q)
		}
	}
}

func TestBatchRoundTrip(t *testing.T) {
	var encoded [][]byte
	for i := 0; i < 5; i++ {
		c := Command{RequestID: []byte{byte(i)}, Op: OpPut, Key: []byte{'k', byte(i)}, Value: bytes.Repeat([]byte{'v'}, i*100)}
		encoded = append(encoded, c.Marshal())
	}
	got, err := SplitEntry(MarshalBatch(encoded))
	if err != nil || len(got) != len(encoded) {
		t.Fatalf("split: %d commands, %v", len(got), err)
	}
	for i := range got {
		var c Command
		if !bytes.Equal(got[i], encoded[i]) || c.Unmarshal(got[i]) != nil || c.Key[1] != byte(i) {
			t.Fatalf("command %d differs after the batch", i)
		}
	}
	// A plain command is an entry of one.
	if got, err := SplitEntry(encoded[2]); err != nil || len(got) != 1 || !bytes.Equal(got[0], encoded[2]) {
		t.Fatalf("plain command: %v %v", got, err)
	}
	b := MarshalBatch(encoded)
	for i := 1; i < len(b); i++ {
		if _, err := SplitEntry(b[:i]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("truncated batch (%d of %d bytes): %v", i, len(b), err)
		}
	}
	if _, err := SplitEntry(append(b, 0)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing byte accepted: %v", err)
	}
	if _, err := SplitEntry([]byte{batchV1, 0}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("empty batch accepted: %v", err)
	}
}

// A command of the earlier encoding (with the proposer's wall clock)
// still decodes, its time ignored.
func TestCommandV1Decodes(t *testing.T) {
	w := writer{}
	w.u8(commandV1)
	w.bytes([]byte("id"))
	w.i64(1 << 60)
	w.u8(uint8(OpPut))
	w.u8(uint8(CondIfMatch))
	w.u64(7)
	w.bytes([]byte("k"))
	w.bytes([]byte("v"))
	var c Command
	if err := c.Unmarshal(w.b); err != nil {
		t.Fatal(err)
	}
	if string(c.RequestID) != "id" || c.Op != OpPut || c.Cond != CondIfMatch || c.Version != 7 || string(c.Key) != "k" || string(c.Value) != "v" {
		t.Fatalf("v1 command decoded as %+v", c)
	}
}

// Stamped entries carry the leader's clock reading and zero or more
// commands; plain and batch entries are unstamped.
func TestStampedEntryRoundTrip(t *testing.T) {
	c := Command{RequestID: []byte("id"), Op: OpPut, Key: []byte("k"), Value: []byte("v")}
	for _, n := range []int{0, 1, 3} {
		cmds := make([][]byte, n)
		for i := range cmds {
			cmds[i] = c.Marshal()
		}
		data := MarshalStamped(1<<50+uint64(n), cmds)
		e, err := DecodeEntry(data)
		if err != nil || !e.Stamped || e.Clock != 1<<50+uint64(n) || len(e.Commands) != n {
			t.Fatalf("%d commands: %+v %v", n, e, err)
		}
		for i := 1; i < len(data); i++ {
			if _, err := DecodeEntry(data[:i]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("truncated stamped entry (%d of %d bytes): %v", i, len(data), err)
			}
		}
	}
	for _, data := range [][]byte{c.Marshal(), MarshalBatch([][]byte{c.Marshal()})} {
		if e, err := DecodeEntry(data); err != nil || e.Stamped || len(e.Commands) != 1 {
			t.Fatalf("unstamped entry: %+v %v", e, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	c := Command{RequestID: []byte("id"), Op: OpPut, Key: []byte("k"), Value: []byte("v")}
	f.Add(c.Marshal())
	f.Add(MarshalBatch([][]byte{c.Marshal(), c.Marshal()}))
	f.Add(MarshalStamped(5, [][]byte{c.Marshal()}))
	r := Request{Kind: KindRead, ShardID: 1, Key: []byte("k")}
	f.Add(r.Marshal())
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	ic := c
	ic.Index = []IndexTerm{{Name: "e_bin", Term: []byte("x")}, {Name: "n_int", Term: EncodeIntTerm(-3)}}
	f.Add(ic.Marshal())
	sq := ScanRequest{Index: "e_bin", Shards: []ScanShard{{ID: 1, Epoch: 1}}, From: []byte("a"), Limit: 10}
	f.Add(sq.Marshal())
	sr := ScanResult{Entries: []ScanEntry{{SortKey: []byte("k"), Key: []byte("k")}}, More: true, Last: []byte("k")}
	f.Add(sr.Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Command
		if c.Unmarshal(b) == nil {
			// A decoded command survives a re-encoding unchanged.
			var d Command
			if err := d.Unmarshal(c.Marshal()); err != nil || !bytes.Equal(d.Key, c.Key) ||
				!bytes.Equal(d.Value, c.Value) || d.Version != c.Version || d.Op != c.Op {
				t.Fatalf("command re-encoding differs: %v", err)
			}
		}
		if cmds, err := SplitEntry(b); err == nil && len(b) > 0 && b[0] == batchV1 {
			// A decoded batch survives a re-encoding unchanged.
			again, err := SplitEntry(MarshalBatch(cmds))
			if err != nil || len(again) != len(cmds) {
				t.Fatalf("batch re-encoding differs: %v", err)
			}
		}
		var r Request
		_ = r.Unmarshal(b)
		var resp Response
		_ = resp.Unmarshal(b)
		var res Result
		_ = res.Unmarshal(b)
		var q ScanRequest
		if q.Unmarshal(b) == nil {
			var q2 ScanRequest
			if err := q2.Unmarshal(q.Marshal()); err != nil || len(q2.Shards) != len(q.Shards) || (q2.After == nil) != (q.After == nil) {
				t.Fatalf("scan request re-encoding differs: %v", err)
			}
		}
		var sr ScanResult
		_ = sr.Unmarshal(b)
		_, _ = DecodeIndexTerms(b)
	})
}

// The fingerprint covers what a command does and nothing else.
func TestCommandFingerprint(t *testing.T) {
	base := Command{RequestID: []byte("id"), Op: OpPut, Cond: CondIfMatch, Version: 3, Key: []byte("k"), Value: []byte("v")}
	same := base
	same.RequestID = []byte("other id")
	if base.Fingerprint() != same.Fingerprint() {
		t.Fatal("the request id changed the fingerprint")
	}
	for name, change := range map[string]func(*Command){
		"op":      func(c *Command) { c.Op = OpDelete },
		"cond":    func(c *Command) { c.Cond = CondIfAbsent },
		"version": func(c *Command) { c.Version = 4 },
		"key":     func(c *Command) { c.Key = []byte("k2") },
		"value":   func(c *Command) { c.Value = []byte("v2") },
		// The key's length is part of it: key "kv" with value "" is not
		// key "k" with value "v".
		"split": func(c *Command) { c.Key, c.Value = []byte("kv"), nil },
	} {
		c := base
		change(&c)
		if c.Fingerprint() == base.Fingerprint() {
			t.Fatalf("a different %s kept the fingerprint", name)
		}
	}
}
