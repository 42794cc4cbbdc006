package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Role is what a token allows.
type Role int

// Roles, ordered: each allows what the ones before it allow.
const (
	// RoleNone: no token needed (open routes).
	RoleNone Role = iota
	RoleRead
	RoleWrite
	RoleAdmin
)

var roleNames = []string{"none", "read", "write", "admin"}

func (r Role) String() string {
	if r < 0 || int(r) >= len(roleNames) {
		return fmt.Sprintf("role(%d)", int(r))
	}
	return roleNames[r]
}

// ParseRole parses read, write or admin.
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames[1:] {
		if s == n {
			return Role(i + 1), nil
		}
	}
	return RoleNone, fmt.Errorf("auth: role %q: want read, write or admin", s)
}

// Store reads and writes the system keys that hold token hashes, through
// the replicated kv path.
type Store interface {
	// Get returns key's value; found false if it is absent.
	Get(ctx context.Context, key []byte) (value []byte, found bool, err error)
	// Put writes key=value.
	Put(ctx context.Context, key, value []byte) error
	// PutIfAbsent writes key=value only if key is absent when the write
	// is applied; written false (and no error) when it was present.
	PutIfAbsent(ctx context.Context, key, value []byte) (written bool, err error)
}

// Reserved system keys (keys starting with byte 0 are the system's).
const (
	// TokenPrefix + hex(SHA-256(token)) holds a token's record.
	TokenPrefix = "\x00sys/auth/token/"
	// BootstrapKey is set once the first admin token was made.
	BootstrapKey = "\x00sys/auth/bootstrap"
	tokenText    = "cairn_"
)

// record is a stored token.
type record struct {
	Role    string    `json:"role"`
	Hash    string    `json:"hash"` // hex SHA-256, compared in constant time
	Created time.Time `json:"created"`
	// Revoked: when the token was revoked (revoke.go); it is refused
	// from then on.
	Revoked *time.Time `json:"revoked,omitempty"`
	// Expires: when the token stops working (none: never).
	Expires *time.Time `json:"expires,omitempty"`
}

// Errors.
var (
	ErrNoToken  = errors.New("auth: no bearer token")
	ErrBadToken = errors.New("auth: unknown or malformed token")
	// ErrTokenExpired is an ErrBadToken: the token's time is up.
	ErrTokenExpired = fmt.Errorf("%w: the token expired", ErrBadToken)
	// ErrBusy: MaxLookups token checks are reading the store already.
	ErrBusy = errors.New("auth: too many token checks in flight")
)

// IsBadToken reports whether err, from Authenticate, refuses the token
// itself (none, unknown, malformed, revoked or expired), as opposed to a
// check that could not be made now (ErrBusy, the store's errors).
func IsBadToken(err error) bool { return errors.Is(err, ErrBadToken) || errors.Is(err, ErrNoToken) }

// Authenticator checks tokens against a Store.
type Authenticator struct {
	store Store
	ttl   time.Duration
	now   func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]cached
	// revocations counts the Revokes this Authenticator made (under mu):
	// a check whose store read began before one does not cache what it
	// read (it may be the record from before the revocation).
	revocations uint64

	failures atomic.Uint64
	// boot is the first admin token a failed Bootstrap drew (bootstrap.go).
	boot struct {
		sync.Mutex
		pending *pendingToken
	}
	// lookups holds a token per check reading the store (MaxLookups).
	lookups chan struct{}
}

type cached struct {
	role    Role
	expires time.Time
}

// CacheTTL is how long a found token is trusted without a new read.
const CacheTTL = 5 * time.Second

// MaxLookups bounds the token checks that read the store at once on a
// node (tokens not in the cache); one more fails at once with ErrBusy.
// Requests are checked before the API's in-flight bound, and a made-up
// token costs a client nothing: without this bound, requests waiting on
// a slow store read (a shard electing a leader) would pile up unbounded.
// It is the default of the API's own in-flight bound (--max-inflight):
// more requests at once would mostly be refused there anyway.
const MaxLookups = 4096

// New returns an Authenticator over store.
func New(store Store) *Authenticator {
	return &Authenticator{store: store, ttl: CacheTTL, now: time.Now, cache: map[[32]byte]cached{},
		lookups: make(chan struct{}, MaxLookups)}
}

// Failures counts requests refused 401 or 403.
func (a *Authenticator) Failures() uint64 { return a.failures.Load() }

// NewToken returns a fresh token and the hash it is stored under.
func NewToken() (token string, hash [32]byte) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("auth: no randomness: " + err.Error())
	}
	token = tokenText + base64.RawURLEncoding.EncodeToString(b[:])
	return token, sha256.Sum256([]byte(token))
}

func tokenKey(hash [32]byte) []byte { return []byte(TokenPrefix + hex.EncodeToString(hash[:])) }

// Create makes a token of role, stores its hash and returns it: the
// only time the token exists in clear. It does not expire.
func (a *Authenticator) Create(ctx context.Context, role Role) (string, error) {
	tok, _, err := a.CreateExpiring(ctx, role, 0)
	return tok, err
}

// MaxTokenTTL bounds a token's time to live.
const MaxTokenTTL = 10 * 365 * 24 * time.Hour

// CreateExpiring is Create for a token that works for ttl from now (0:
// for ever); it also returns when it expires (zero: never). A node
// refuses the token once its own clock passes that time.
func (a *Authenticator) CreateExpiring(ctx context.Context, role Role, ttl time.Duration) (string, time.Time, error) {
	if role < RoleRead || role > RoleAdmin {
		return "", time.Time{}, fmt.Errorf("auth: cannot create a token of role %s", role)
	}
	if ttl < 0 || ttl > MaxTokenTTL {
		return "", time.Time{}, fmt.Errorf("auth: a token's time to live is from 1s to %v, or 0 for none", MaxTokenTTL)
	}
	tok, hash := NewToken()
	now := a.now().UTC()
	r := record{Role: role.String(), Hash: hex.EncodeToString(hash[:]), Created: now}
	var expires time.Time
	if ttl > 0 {
		expires = now.Add(ttl)
		r.Expires = &expires
	}
	rec, _ := json.Marshal(r)
	if err := a.store.Put(ctx, tokenKey(hash), rec); err != nil {
		return "", time.Time{}, fmt.Errorf("auth: store the token: %w", err)
	}
	return tok, expires, nil
}

// Authenticate returns the role of token.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (Role, error) {
	if token == "" {
		return RoleNone, ErrNoToken
	}
	if !strings.HasPrefix(token, tokenText) || len(token) > 128 {
		return RoleNone, ErrBadToken
	}
	hash := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	c, ok := a.cache[hash]
	gen := a.revocations
	a.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.role, nil
	}
	select {
	case a.lookups <- struct{}{}:
	default:
		return RoleNone, ErrBusy
	}
	v, found, err := a.store.Get(ctx, tokenKey(hash))
	<-a.lookups
	if err != nil {
		return RoleNone, fmt.Errorf("auth: look the token up: %w", err)
	}
	if !found {
		return RoleNone, ErrBadToken
	}
	var rec record
	if err := json.Unmarshal(v, &rec); err != nil {
		return RoleNone, ErrBadToken
	}
	want := hex.EncodeToString(hash[:])
	if subtle.ConstantTimeCompare([]byte(rec.Hash), []byte(want)) != 1 {
		return RoleNone, ErrBadToken
	}
	role, err := ParseRole(rec.Role)
	if err != nil || rec.Revoked != nil {
		return RoleNone, ErrBadToken
	}
	trust := now.Add(a.ttl)
	if rec.Expires != nil {
		if !now.Before(*rec.Expires) {
			return RoleNone, ErrTokenExpired
		}
		if rec.Expires.Before(trust) {
			trust = *rec.Expires // the cache does not outlive the token
		}
	}
	a.mu.Lock()
	if a.revocations == gen {
		if len(a.cache) > 10000 {
			clear(a.cache)
		}
		a.cache[hash] = cached{role: role, expires: trust}
	}
	a.mu.Unlock()
	return role, nil
}
