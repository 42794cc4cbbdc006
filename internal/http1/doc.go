// Package http1 is a lean HTTP/1.1 server and client that carry pipelined
// requests concurrently.
//
// Go's net/http server reads a connection's next request only after it has
// answered the previous one, so a client that sends many requests on one
// connection (HTTP/1.1 pipelining, RFC 9112 §9.3.2) gets them served one at
// a time; HTTP/2 multiplexes them but costs far more CPU per request. This
// server reads requests as they arrive, runs each in its own goroutine
// (bounded per connection by Server.MaxPipeline), and writes the answers in
// request order, batching the ones that are ready into one write. A client
// that sends one request at a time (curl, wrk) sees an ordinary HTTP/1.1
// server. Connections that open with the HTTP/2 preface are handed to
// Server.H2 (Cairn's internal/http2, or an http.Server that speaks HTTP/2
// without TLS), so one port serves both. With Server.TLSConfig the port
// speaks TLS only (tls.go): ALPN chooses h2 (handed to the same H2
// server) or http/1.1 (served here), and DialTLS is the client's side of it.
//
// Conn is the matching client: one TCP connection on which many goroutines
// issue requests at once; they are written back to back and their answers
// matched in order.
//
// # Limits
//
// Every resource a client can make the server hold is bounded (defaults in
// brackets; the Server fields of the same names set them):
//
//   - MaxConns [4096]: connections served at once, HTTP/1 ones and the
//     HTTP/2 ones handed to a ConnServer (internal/http2) alike; one
//     more is answered 503 with Retry-After and closed. An accept that fails for
//     want of file descriptors or memory (EMFILE and the like: a
//     process limit below MaxConns) is retried after a pause of up to
//     1 s; Serve goes on.
//   - ReadHeaderTimeout [10 s]: a request's line and header fields must
//     arrive within it, counted from their first byte (for a new
//     connection, from the accept, which also covers sniffing the HTTP/2
//     preface). A client that sends a few bytes and stops (slowloris) is
//     closed after it. IdleTimeout [2 min] bounds the wait for the next
//     request's first byte and for each body.
//   - MaxHeaderBytes [64 KiB] and 256 fields: beyond them, 431.
//   - MaxBodyBytes [8 MiB]: a Content-Length above it is left unread (the
//     handler answers, the connection closes); a chunked body is answered
//     413 by the server as soon as a chunk passes it.
//   - BodyBudget [256 MiB]: request body bytes held across all
//     connections, from the first byte read until the request's handler
//     returns. Bodies are allocated as their bytes arrive (doubling from
//     16 KiB), never from the announced length. A body that would pass the
//     budget gets 503 with Retry-After and its connection is closed.
//   - MaxPipeline [128]: requests of one connection read and not yet
//     answered.
//   - MaxAnswerBytes [16 MiB]: answer bytes of one connection produced by
//     handlers and not yet written. While the unwritten answers, plus the
//     running handlers counted at the size of the connection's recent
//     answers (a sixteenth of the bound before its first answer), reach
//     it, the server starts no handler and reads no request of that
//     connection. A connection's first burst of requests can thus run
//     16 handlers whatever their answers' size.
//   - WriteTimeout [30 s]: one write of answers to the socket; a client
//     that reads nothing for that long has its connection closed and its
//     answers dropped.
//
// # Parsing
//
// The request parser (readHead, readBody) is checked against net/http's
// http.ReadRequest by FuzzParseDifferential: it never accepts what
// net/http refuses and frames every body as net/http does (same length,
// same bytes, same end). It is stricter in the cases the test lists:
// Transfer-Encoding with Content-Length, Transfer-Encoding in HTTP/1.0,
// obs-fold, a missing Host, header fields that are not tokens, header
// size limits, trailer lines not ending in CRLF, an Expect other than
// 100-continue, versions other than HTTP/1.x, CONNECT (501: no tunnels).
// Chunk lines must end in CRLF; a repeated Content-Length must repeat the
// same text; empty lines before a request are refused.
//
// Safe for concurrent use: Server.Serve/Shutdown, Conn.Do.
package http1
