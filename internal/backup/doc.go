// Package backup takes hot backups of a running Cairn cluster and restores
// them, over the nodes' HTTP API only.
//
// A backup is a directory: one file per shard, shard-<id>.cbk, holding the
// wire backup stream the shard's replica sent (its data at one applied
// index, taken after a read index, so every write acknowledged before the
// backup started is in it), and manifest.json naming each file with its
// token range, applied index, key count, size and SHA-256. Verify re-reads
// every file against the manifest and the streams' own ends. A backup is
// written beside its directory (inside it when it exists, empty) and put
// in place only once its manifest is synced: one that fails or is
// cancelled leaves the directory as it was (stage.go).
//
// Restore writes every key of a verified backup into a cluster through
// ordinary writes (each replicated and fsync'd on a quorum before it
// counts), so the target may have any node and shard count. Keys keep their
// values; their versions are the target cluster's own. Keys Cairn reserves
// for itself (beginning with byte 0x00: the cluster's own records) are not
// restored. Incremental backups are not supported yet.
//
// Dependencies: the Go client (client), the stream format (internal/wire),
// token ranges (internal/shard) and directory syncs (internal/storage/durable,
// the standard library only); never a node's internals.
package backup
