package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// TokensPath creates tokens: POST ?role=read|write|admin[&ttl=D] (admin only);
// DELETE TokensPath/ID revokes the token of id ID (TokenID).
const TokensPath = "/v1/admin/tokens"

// Counters of refused requests.
type Counters struct {
	// Unauthenticated: 401 (no token, an unknown or malformed one);
	// Forbidden: 403 (a token of too low a role).
	Unauthenticated, Forbidden atomic.Uint64
}

// Middleware returns next behind token checks: each request needs the
// role Required names. It serves TokensPath itself.
func (a *Authenticator) Middleware(next http.Handler, c *Counters, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reservedKey(r) {
			// The token records live there: no client may read or write
			// them through the data routes, whatever its role.
			c.Forbidden.Add(1)
			a.failures.Add(1)
			writeError(w, http.StatusForbidden, "reserved_key", "keys starting with byte 0 are reserved for the system")
			return
		}
		need := Required(r.Method, r.URL.Path)
		if need == RoleNone {
			next.ServeHTTP(w, r)
			return
		}
		tok, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			c.Unauthenticated.Add(1)
			a.failures.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer realm="cairn"`)
			writeError(w, http.StatusUnauthorized, "unauthenticated", "this request needs a token (Authorization: Bearer …) of role "+need.String())
			return
		}
		role, err := a.Authenticate(r.Context(), tok)
		switch {
		case IsBadToken(err):
			c.Unauthenticated.Add(1)
			a.failures.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer realm="cairn", error="invalid_token"`)
			msg := "unknown token"
			if errors.Is(err, ErrTokenExpired) {
				msg = "the token expired"
			}
			writeError(w, http.StatusUnauthorized, "unauthenticated", msg)
			return
		case err != nil:
			if !errors.Is(err, ErrBusy) {
				log.Warn("auth: token lookup failed", "err", err)
			}
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "unavailable", "the token could not be checked now; retry")
			return
		case role < need:
			c.Forbidden.Add(1)
			a.failures.Add(1)
			writeError(w, http.StatusForbidden, "forbidden", "this request needs role "+need.String()+"; the token has "+role.String())
			return
		}
		if r.URL.Path == TokensPath {
			a.serveCreate(w, r)
			return
		}
		if id, ok := strings.CutPrefix(r.URL.Path, TokensPath+"/"); ok {
			a.serveRevoke(w, r, id, tok)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// reservedKey reports whether a data request names a system key (its
// first byte is 0).
func reservedKey(r *http.Request) bool {
	if k, ok := strings.CutPrefix(r.URL.Path, "/v1/kv/"); ok {
		return strings.HasPrefix(k, "\x00")
	}
	if r.URL.Path == "/v0/entity" {
		return strings.HasPrefix(r.URL.Query().Get("id"), "\x00")
	}
	return false
}

// bearer extracts the token of an Authorization header.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// serveCreate answers POST TokensPath?role=R with a new token.
func (a *Authenticator) serveCreate(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST "+TokensPath+"?role=read|write|admin")
		return
	}
	role, err := ParseRole(r.URL.Query().Get("role"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_role", "role must be read, write or admin")
		return
	}
	var ttl time.Duration
	if v := r.URL.Query().Get("ttl"); v != "" {
		ttl, err = time.ParseDuration(v)
		if err != nil || ttl < time.Second || ttl > MaxTokenTTL {
			writeError(w, http.StatusBadRequest, "bad_ttl", "ttl is a duration from 1s to 87600h (e.g. 24h, 90m)")
			return
		}
	}
	tok, expires, err := a.CreateExpiring(r.Context(), role, ttl)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the token could not be stored now; retry")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	out := map[string]string{"token": tok, "role": role.String(), "id": TokenID(tok)}
	if !expires.IsZero() {
		out["expires"] = expires.Format(time.RFC3339)
	}
	_ = json.NewEncoder(w).Encode(out)
}

// serveRevoke answers DELETE TokensPath/ID: it revokes the token of id
// ID, but not caller, the token the request is made with (an admin
// revoking its own token could lock itself out: it makes another admin
// token first, and revokes the old one with it).
func (a *Authenticator) serveRevoke(w http.ResponseWriter, r *http.Request, id, caller string) {
	if r.Method != http.MethodDelete {
		w.Header().Set("Allow", http.MethodDelete)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use DELETE "+TokensPath+"/ID to revoke the token of id ID")
		return
	}
	// Compared as hashes, not as text: hex is case-insensitive, and the
	// caller's id in upper case names the caller's token too.
	hash, err := parseTokenID(id)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_token_id", err.Error())
		return
	}
	if hash == sha256.Sum256([]byte(caller)) {
		writeError(w, http.StatusBadRequest, "own_token", "a request cannot revoke the token it is made with; revoke it with another admin token")
		return
	}
	id = hex.EncodeToString(hash[:])
	switch err := a.Revoke(r.Context(), id); {
	case errors.Is(err, ErrNoSuchToken):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case err != nil:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the revocation could not be stored now; retry")
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "revoked": true})
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "message": msg})
}
