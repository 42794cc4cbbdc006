// Package lint holds the project's structural rules as Go tests: the
// dependency direction of DESIGN §7 (api → kv → store → replica →
// statemachine/raftlog → storage, transport beside store), which package
// alone may import Pebble (test helper packages included), etcd's Raft,
// net/http or the etcd client, and that the lab never reaches into the
// database's internals. It has no code of its own; `go test
// ./internal/lint` runs the rules.
package lint
