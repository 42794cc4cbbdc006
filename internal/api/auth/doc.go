// Package auth authenticates a node's HTTP requests with bearer tokens
// and authorizes them by role (--auth; docs/security.md).
//
// A token is 32 random bytes, written "cairn_" + base64url. Only its
// SHA-256 is stored, as the value of the reserved system key
// "\x00sys/auth/token/" + hex(hash), written and read through the
// normal replicated kv path (Store), so every node knows every token and
// a token survives any node's loss. A request's token is hashed, looked
// up by its hash, and the stored hash compared in constant time.
//
// Roles are ordered: read < write < admin; a role allows what the roles
// below it allow. Required (route.go) maps each method and path to the
// role it needs; a path it does not know needs admin. /metrics,
// /v0/status, /v1/status and /v1/cluster stay open (health checks and
// clients' routing need them; they reveal no key or value). A request
// without a valid token gets 401, one with a token of too low a role
// 403, both with a JSON body; failures are counted (Failures).
//
// Middleware also serves POST /v1/admin/tokens?role=R (admin): it creates
// a token and answers it once, with its id (TokenID, the hex SHA-256);
// and DELETE /v1/admin/tokens/ID (admin), which revokes the token of
// that id (revoke.go). Bootstrap creates the first admin token when the
// cluster has none.
//
// Found tokens are cached for CacheTTL (a revoked token may keep working
// that long on a node that found it before); unknown ones are not cached. At most MaxLookups checks read
// the store at once on a node; a request whose token would need one more
// is answered 503 with Retry-After. Safe for concurrent use.
package auth
