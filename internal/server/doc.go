// Package server wires one node together and owns its start/stop order:
// engine → persisted identity → store (replicas) → transport → coordinator →
// HTTP; stopping runs the other way (HTTP first so no new requests arrive,
// engine last).
package server
