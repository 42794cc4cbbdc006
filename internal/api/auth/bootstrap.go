package auth

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// The first admin token takes two writes: its record, then BootstrapKey.
// Either may fail, or time out after it was applied, and Bootstrap is
// retried until it succeeds. So that the retries make one token, and
// the caller gets the one the cluster holds:
//
//   - the token a failed attempt drew stays pending in memory, and the
//     retry writes the same record again instead of drawing another;
//   - the marker is written last and names the token's hash, so a retry
//     that finds the marker knows whether it is the pending token's
//     (an earlier write that timed out but was applied) and returns it.
//
// A node that stops between the two writes loses the pending token: its
// record stays, held by no one, and the next start draws a new one.

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
	a.boot.Lock()
	defer a.boot.Unlock()
	v, found, err := a.store.Get(ctx, []byte(BootstrapKey))
	if err != nil {
		return "", err
	}
	p := a.boot.pending
	if found {
		a.boot.pending = nil
		if p != nil && markerNames(v, p.hash) {
			return p.token, nil // an earlier attempt's marker was applied
		}
		return "", nil
	}
	if p == nil {
		tok, hash := NewToken()
		p = &pendingToken{token: tok, hash: hash, created: a.now().UTC()}
		a.boot.pending = p
	}
	rec, _ := json.Marshal(record{Role: RoleAdmin.String(), Hash: hex.EncodeToString(p.hash[:]), Created: p.created})
	if err := a.store.Put(ctx, tokenKey(p.hash), rec); err != nil {
		return "", fmt.Errorf("auth: store the first admin token: %w", err)
	}
	marker, _ := json.Marshal(bootMarker{Hash: hex.EncodeToString(p.hash[:]), Created: p.created})
	if err := a.store.Put(ctx, []byte(BootstrapKey), marker); err != nil {
		return "", fmt.Errorf("auth: mark the first admin token made: %w", err)
	}
	a.boot.pending = nil
	return p.token, nil
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
