package client

import "net/http"

// WithToken returns a RoundTripper that sends token as a bearer token
// (Authorization: Bearer …) on every request through next, for nodes
// started with --auth.
func WithToken(next http.RoundTripper, token string) http.RoundTripper {
	return bearer{next: next, token: token}
}

type bearer struct {
	next  http.RoundTripper
	token string
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}
