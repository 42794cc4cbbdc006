// Package http2 is a lean HTTP/2 server (RFC 9113) for Cairn's API, built
// on golang.org/x/net/http2's Framer and hpack.
//
// net/http's HTTP/2 server runs a goroutine per stream, passes every
// frame through its serve loop, and flushes each answer to the socket in
// a write of its own. Cairn's API answers most requests with one small
// buffered answer, and thousands at once when a Raft round commits: this
// server reads a connection's frames in one goroutine, runs each request
// whose body has fully arrived on a reused handler goroutine with its
// body in memory (as internal/http1 does), and writes the answers that
// are ready together, several per write, from the connection's writer.
//
// What it serves: prior-knowledge HTTP/2 ("h2c", handed over by
// internal/http1 after it sniffed the preface) and h2 over TLS (ALPN,
// handed over as a *tls.Conn). No server push, no priorities (PRIORITY
// frames are read and ignored), no Upgrade from HTTP/1.1.
//
// # Limits
//
//   - MaxConcurrentStreams [1000]: streams open at once per connection
//     (announced; one more is refused with REFUSED_STREAM).
//   - MaxBodyBytes [8 MiB]: a request body beyond it is answered 413 and
//     the rest of its stream ignored.
//   - BodyBudget [256 MiB]: request body bytes held across all
//     connections until their handlers return; a body that would pass it
//     is answered 503 with Retry-After.
//   - MaxHeaderBytes [64 KiB]: the decoded header list of a request
//     (announced as SETTINGS_MAX_HEADER_LIST_SIZE; beyond it, 431).
//   - Flow control: a request's body may use a window of 1 MiB per
//     stream; the connection's window is given back as data arrives, so
//     what a connection holds is bounded by its open streams' bodies and
//     the budget. Answers are sent within the client's windows; an answer
//     the client does not read stalls only its stream, and a write to the
//     socket that does not finish within WriteTimeout [30 s] closes the
//     connection. An answer that waits WriteTimeout in all for the client's
//     windows while less than 16 KiB of it goes out is abandoned: its
//     stream is reset (RST_STREAM CANCEL, the handler's writes fail); a
//     connection whose window gets no WINDOW_UPDATE for WriteTimeout
//     while answers wait for it ends (GOAWAY FLOW_CONTROL_ERROR).
//   - IdleTimeout [2 min]: a connection that gets no frame for that
//     long while no handler runs and no answer waits to be written is
//     closed (after a GOAWAY); the requests it left half sent (a body
//     begun and never finished) are reset first. The wait counts from
//     the last frame or the last answer written, whichever is later.
//   - Drain: after a GOAWAY (Shutdown's, the client's, or an idle
//     connection's) the streams opened before it are served to the end,
//     the rest of their bodies read as it arrives, and the connection is
//     closed once they are answered; but for IdleTimeout from the GOAWAY
//     at most: the requests still half sent then are reset (RST_STREAM
//     CANCEL) and reading ends (the answers under way are still written,
//     within the bounds above). Streams opened after the GOAWAY are
//     ignored (their DATA counted against the connection's window).
//
// A request whose content-length field does not announce the bytes of
// its DATA frames (RFC 9113 §8.1.1: malformed) is answered 400 and its
// handler never runs. The answers the server gives itself (400, 413,
// 431, 503, a handler's panic) are written by Server.Reject when set.
//
// An answer its handler writes past 64 KiB, or flushes (http.Flusher),
// goes out in parts, the handler waiting for each to be written: a long
// stream (a backup) is carried with bounded memory.
package http2
