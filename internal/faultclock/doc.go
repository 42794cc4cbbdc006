// Package faultclock is a node's injectable clock: the real clocks plus an
// offset that only fault injection moves (`cairn chaos --fault
// clock-skew=D` and `clock-jump=D`, through the node's fault hook). The
// lab never touches the machine's clock; it shifts what one node reads
// instead.
//
// Monotonic is the reading a leader stamps its entries with
// (replica.Config.Clock, which moves the shard clock that ages dedup
// records); Offset shifts the node's wall clock where the node hands a
// wall-clock time to another node or keeps one (request ids, forwarded
// deadlines). A nil *Clock reads the real clocks.
package faultclock
