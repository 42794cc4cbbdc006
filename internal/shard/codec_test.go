package shard

import (
	"errors"
	"reflect"
	"testing"
)

func TestDescriptorRoundTrip(t *testing.T) {
	for _, d := range []Descriptor{
		{ID: 1, Start: 0, End: 1 << 60, Replicas: []uint64{1, 2, 3}, Epoch: 1},
		{ID: 7, Start: 1 << 62, End: 0, Replicas: []uint64{4, 2, 3, 1}, Learners: []uint64{9}, Epoch: 12},
	} {
		got, err := UnmarshalDescriptor(d.Marshal())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, d) {
			t.Fatalf("round trip: got %+v want %+v", got, d)
		}
	}
}

func TestDescriptorDecodeRefusesGarbage(t *testing.T) {
	good := Descriptor{ID: 1, End: 10, Replicas: []uint64{1, 2}, Learners: []uint64{3}, Epoch: 2}.Marshal()
	bad := [][]byte{
		nil,
		{0},
		good[:len(good)-1],
		append(append([]byte(nil), good...), 0),
		Descriptor{ID: 1, End: 10, Replicas: []uint64{1, 1}}.Marshal(),
		Descriptor{ID: 1, End: 10, Replicas: []uint64{1}, Learners: []uint64{1}}.Marshal(),
		Descriptor{ID: 1, End: 10, Replicas: []uint64{0}}.Marshal(),
		Descriptor{ID: 0, End: 10, Replicas: []uint64{1}}.Marshal(),
		Descriptor{ID: 1, Start: 10, End: 5, Replicas: []uint64{1}}.Marshal(),
	}
	for i, b := range bad {
		if _, err := UnmarshalDescriptor(b); !errors.Is(err, ErrBadDescriptor) {
			t.Errorf("case %d: err %v", i, err)
		}
	}
}

func TestHasReplicaCountsLearners(t *testing.T) {
	d := Descriptor{ID: 1, Replicas: []uint64{1, 2}, Learners: []uint64{3}}
	if !d.HasReplica(3) || d.IsVoter(3) || !d.IsLearner(3) || d.HasReplica(4) || !d.IsVoter(1) {
		t.Fatal("membership tests wrong")
	}
}
