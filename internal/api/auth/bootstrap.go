package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The first admin token takes two writes: its record, then BootstrapKey.
// Either may fail, or time out after it was applied, and Bootstrap is
// retried until it succeeds. So that the retries make one token, and
// the caller gets the one the cluster holds:
//
//   - the token a failed attempt drew stays pending in memory, and the
//     retry writes the same record instead of drawing another;
//   - both writes only create: a record or marker already there is left
//     as it is, so a late write of an attempt that timed out cannot undo
//     a revocation, nor replace another node's marker;
//   - the marker is written last and names the token's hash, so a retry
//     (or a node racing another, each sure it is the one to bootstrap)
//     that finds a marker knows whether it names the pending token (an
//     earlier write that timed out but was applied) and returns it; a
//     marker naming another token means the pending one is held by no
//     one, and its record, if written, is revoked.
//
// A node that stops before a call succeeds loses the pending token,
// unless it kept it and passes it to BootstrapWith at its next start
// (internal/server keeps it in a file): then a marker written just
// before the stop names it, and it is returned.

// pendingToken is a first admin token drawn and not yet handed out.
type pendingToken struct {
	token   string
	hash    [32]byte
	created time.Time
}

// bootMarker is BootstrapKey's value.
type bootMarker struct {
	Hash    string    `json:"hash"` // hex SHA-256 of the first admin token
	Created time.Time `json:"created"`
}

// Bootstrap makes the first admin token unless the cluster has one: it
// returns the token, or "" when an earlier bootstrap made it. An error:
// call it again (with the same Authenticator) until it succeeds.
func (a *Authenticator) Bootstrap(ctx context.Context) (string, error) {
	return a.BootstrapWith(ctx, "")
}

// BootstrapWith is Bootstrap with candidate (made by NewToken, kept
// where it survives a crash) as the token to make, unless a failed
// attempt already drew one; "" draws one. A caller that keeps its
// candidate until a call succeeds, across restarts, never loses the
// first admin token: a restart that finds the marker naming the
// candidate (the node stopped after the marker was written, before it
// kept the answer) gets it back.
func (a *Authenticator) BootstrapWith(ctx context.Context, candidate string) (string, error) {
	if candidate != "" && (!strings.HasPrefix(candidate, tokenText) || len(candidate) > 128) {
		return "", errors.New("auth: the first admin token's candidate is not a token")
	}
	a.boot.Lock()
	defer a.boot.Unlock()
	if a.boot.pending == nil && candidate != "" {
		a.boot.pending = &pendingToken{token: candidate, hash: sha256.Sum256([]byte(candidate)), created: a.now().UTC()}
	}
	v, found, err := a.store.Get(ctx, []byte(BootstrapKey))
	if err != nil {
		return "", err
	}
	p := a.boot.pending
	if found {
		return a.settle(ctx, p, v)
	}
	if p == nil {
		tok, hash := NewToken()
		p = &pendingToken{token: tok, hash: hash, created: a.now().UTC()}
		a.boot.pending = p
	}
	rec, _ := json.Marshal(record{Role: RoleAdmin.String(), Hash: hex.EncodeToString(p.hash[:]), Created: p.created})
	if _, err := a.store.PutIfAbsent(ctx, tokenKey(p.hash), rec); err != nil {
		return "", fmt.Errorf("auth: store the first admin token: %w", err)
	}
	marker, _ := json.Marshal(bootMarker{Hash: hex.EncodeToString(p.hash[:]), Created: p.created})
	written, err := a.store.PutIfAbsent(ctx, []byte(BootstrapKey), marker)
	if err != nil {
		return "", fmt.Errorf("auth: mark the first admin token made: %w", err)
	}
	if !written {
		v, found, err := a.store.Get(ctx, []byte(BootstrapKey))
		if err != nil {
			return "", err
		}
		if !found {
			return "", fmt.Errorf("auth: the first admin token's marker was there and is gone")
		}
		return a.settle(ctx, p, v)
	}
	a.boot.pending = nil
	return p.token, nil
}

// settle ends a bootstrap that found marker v: it returns the pending
// token p if v names it; otherwise another attempt made the first admin
// token, and p's record, if any, is revoked, since no one holds p.
func (a *Authenticator) settle(ctx context.Context, p *pendingToken, v []byte) (string, error) {
	if p == nil {
		return "", nil
	}
	if markerNames(v, p.hash) {
		a.boot.pending = nil
		return p.token, nil
	}
	if err := a.Revoke(ctx, hex.EncodeToString(p.hash[:])); err != nil && !errors.Is(err, ErrNoSuchToken) {
		return "", fmt.Errorf("auth: revoke an unused first admin token: %w", err)
	}
	a.boot.pending = nil
	return "", nil
}

// markerNames reports whether v, a BootstrapKey value, names hash (a
// marker of an older format, a bare time, names none).
func markerNames(v []byte, hash [32]byte) bool {
	var m bootMarker
	if json.Unmarshal(v, &m) != nil {
		return false
	}
	want := hex.EncodeToString(hash[:])
	return subtle.ConstantTimeCompare([]byte(m.Hash), []byte(want)) == 1
}
