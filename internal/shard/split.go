package shard

// A split halves a shard's token range: the shard keeps [Start, mid) and a
// new shard owns [mid, End). The new shard's id is mid itself. Ranges only
// ever split (never merge), so a token that once started a shard starts
// one for ever, and no two shards, live or gone, ever get the same id;
// bootstrap ids are at most 65536, below every split point (MinSplitWidth
// keeps mid above it).

// MinSplitWidth is the narrowest token range that may be split: its
// midpoint is then above every bootstrap shard id.
const MinSplitWidth = 1 << 18

// SplitPoint returns the midpoint of d's token range — the first token of
// the new half and the new shard's id — and false when the range is too
// narrow to split.
func (d Descriptor) SplitPoint() (uint64, bool) {
	// width-1 without overflow (End 0 means 2^64).
	last := d.End - 1 - d.Start
	if d.End != 0 && d.End <= d.Start {
		return 0, false
	}
	if last < MinSplitWidth-1 {
		return 0, false
	}
	half := last>>1 + last&1 // ceil((width-1)/2) = floor(width/2)
	mid := d.Start + half
	if mid < MinSplitWidth {
		return 0, false
	}
	return mid, true
}

// Halves returns the descriptors of d's two halves after a split at mid:
// the shard keeps the lower one, the new shard (id mid) gets the upper;
// both keep d's members and take epoch d.Epoch+1.
func (d Descriptor) Halves(mid uint64) (lower, upper Descriptor) {
	lower, upper = d.Clone(), d.Clone()
	lower.End, lower.Epoch = mid, d.Epoch+1
	upper.ID, upper.Start, upper.Epoch = mid, mid, d.Epoch+1
	return lower, upper
}
