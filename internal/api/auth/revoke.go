package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// A token is revoked by its id, the hex SHA-256 the cluster stores it
// under (TokenID): the id names a token without being one, so it can sit
// in a URL, a log or a ticket. Revoking rewrites the token's record with
// the time (the record stays, so the id keeps meaning that token), and
// the token is refused from then on, on every node within CacheTTL
// (a node may hold it as found that long; the node that revoked it
// drops it from its cache at once).

// ErrNoSuchToken: no token has that id.
var ErrNoSuchToken = errors.New("auth: no token has that id")

// ErrBadTokenID: an id that is not 64 hex digits.
var ErrBadTokenID = errors.New("auth: a token id is 64 hex digits (the token's SHA-256)")

// TokenID is the id of token: the hex SHA-256 it is stored under.
func TokenID(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// parseTokenID returns the hash an id names.
func parseTokenID(id string) ([32]byte, error) {
	var hash [32]byte
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != len(hash) {
		return hash, ErrBadTokenID
	}
	copy(hash[:], b)
	return hash, nil
}

// Revoke revokes the token of id. Revoking a revoked token does nothing
// and succeeds. Errors: ErrBadTokenID, ErrNoSuchToken, the store's.
func (a *Authenticator) Revoke(ctx context.Context, id string) error {
	hash, err := parseTokenID(id)
	if err != nil {
		return err
	}
	v, found, err := a.store.Get(ctx, tokenKey(hash))
	if err != nil {
		return fmt.Errorf("auth: look the token up: %w", err)
	}
	var rec record
	if !found || json.Unmarshal(v, &rec) != nil {
		return ErrNoSuchToken
	}
	if rec.Revoked == nil {
		now := a.now().UTC()
		rec.Revoked = &now
		b, _ := json.Marshal(rec)
		if err := a.store.Put(ctx, tokenKey(hash), b); err != nil {
			return fmt.Errorf("auth: store the revocation: %w", err)
		}
	}
	a.mu.Lock()
	a.revocations++
	delete(a.cache, hash)
	a.mu.Unlock()
	return nil
}
