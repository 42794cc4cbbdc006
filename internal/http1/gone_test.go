package http1

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// A handler learns that its client closed the connection (ClientGone),
// while its own request context stays alive: requests read before a
// half-close still run and answer.
func TestClientGoneWhenClientCloses(t *testing.T) {
	seen := make(chan bool, 1)
	started := make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gone := ClientGone(r.Context())
		if gone == nil {
			seen <- false
			return
		}
		close(started)
		select {
		case <-gone:
			seen <- r.Context().Err() == nil // gone, yet the request itself was not canceled
		case <-time.After(10 * time.Second):
			seen <- false
		}
	})}
	addr := start(t, s)
	c, _ := raw(t, addr, "GET /long HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	c.Close()
	if ok := <-seen; !ok {
		t.Fatal("the handler did not learn that its client went (or its context was canceled)")
	}
}

func TestClientGoneNilOutsideHTTP1(t *testing.T) {
	if ClientGone(context.Background()) != nil {
		t.Fatal("a plain context has a client-gone channel")
	}
}
