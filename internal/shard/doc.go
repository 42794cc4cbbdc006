// Package shard maps keys to shards: a key's token is xxhash64(key), a shard
// owns a half-open token range, and Bootstrap splits the token space into
// equal ranges placed round-robin over the nodes so that every node holds the
// same number of replicas and shard i prefers node i mod n as its leader.
//
// Everything here is pure and safe for concurrent use once built.
package shard
