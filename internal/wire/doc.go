// Package wire holds the binary encodings that cross a process boundary or
// go into the Raft log: write commands, their results, and the requests a
// coordinator forwards to a shard leader. Encodings are length-prefixed,
// versioned by a leading byte, and every decoder rejects truncated or
// trailing bytes with ErrMalformed instead of panicking.
package wire
