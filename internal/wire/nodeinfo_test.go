package wire

import (
	"errors"
	"reflect"
	"testing"
)

func TestNodeInfoRoundTrip(t *testing.T) {
	in := NodeInfo{HTTPAddr: "127.0.0.1:8080", Leaders: []ShardLeader{{ShardID: 1, Leader: 2, Term: 7}, {ShardID: 9, Leader: 0, Term: 1}}}
	var out NodeInfo
	if err := out.Unmarshal(in.Marshal()); err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("%+v %v, want %+v", out, err, in)
	}
	b := in.Marshal()
	for _, bad := range [][]byte{b[:len(b)-1], append(b, 0), {0, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if err := out.Unmarshal(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("Unmarshal(%x): %v, want ErrMalformed", bad, err)
		}
	}
	in.Descriptors = [][]byte{{1, 2, 3}, {4}}
	if err := out.Unmarshal(in.Marshal()); err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("with descriptors: %+v %v, want %+v", out, err, in)
	}
	req := Request{Kind: KindNodeInfo, Sender: 3}
	var got Request
	if err := got.Unmarshal(req.Marshal()); err != nil || got.Kind != KindNodeInfo {
		t.Fatalf("request: %+v %v", got, err)
	}
}
