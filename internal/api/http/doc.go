// Package httpapi serves Cairn's client HTTP API (docs/http-api.md): the v0
// entity API, the v1 key-value API, status, cluster, Prometheus metrics and
// pprof. It is the only place where errors become status codes. Handlers are
// safe for concurrent use; a semaphore bounds requests in flight and answers
// 503 with Retry-After beyond it.
package httpapi
