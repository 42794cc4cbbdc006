// Package security builds Cairn's TLS configurations and creates the
// certificates of a local cluster.
//
// Certificates (certs.go): InitCA writes a certificate authority (an ECDSA
// P-256 key and a self-signed certificate valid CAValidity, 10 years) to a
// directory; IssueNode and IssueClient sign, with that CA, a node's
// certificate (server and client usage, valid NodeValidity, 1 year, with
// the host names and IP addresses it is reached by) and a client's
// (client usage only). Keys are written with mode 0600. `cairn cert`
// drives them.
//
// TLS configurations (config.go): ServerTLS for a node's client port (its
// certificate, optionally verifying client certificates against a CA as
// ClientAuth asks), ClientTLS for tools and clients (trust a CA file,
// optionally present a certificate), and PeerTLS for the peer port:
// mutual TLS in which both sides present a node certificate signed by the
// cluster CA. A node certificate is one that allows both server and
// client authentication; a client certificate (client usage only) is
// refused on the peer port, so a user's certificate cannot speak Raft.
// Every configuration asks for TLS 1.2 at least.
//
// Everything here is a pure function of its files and arguments; it is
// safe for concurrent use.
package security
