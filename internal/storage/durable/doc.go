// Package durable makes changes to a file system's directories outlast a
// crash: after a file is created, renamed or removed, its directory's
// entry is durable only once the directory itself is synced.
//
// It imports nothing but the standard library, so any of Cairn's packages
// may use it: the node (its data directory's files) and the backup tool
// alike. Its functions are safe to call concurrently.
package durable
