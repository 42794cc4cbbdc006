//go:build tools

// Package tools pins etcd's own benchmark tool (go.etcd.io/etcd/v3's
// tools/benchmark), which scripts/bench-etcd-tool.sh builds from the Go
// module proxy to drive etcd and Cairn with the same unmodified client.
// It is a module of its own so that Cairn's module does not depend on
// etcd's server.
package tools

import _ "go.etcd.io/etcd/v3/tools/benchmark"
