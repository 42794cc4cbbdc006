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
// server. Connections that open with the HTTP/2 preface are handed to an
// http.Server that speaks HTTP/2 without TLS (prior knowledge), so one port
// serves both.
//
// Conn is the matching client: one TCP connection on which many goroutines
// issue requests at once; they are written back to back and their answers
// matched in order.
//
// Safe for concurrent use: Server.Serve/Shutdown, Conn.Do.
package http1
