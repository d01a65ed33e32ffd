package suanli

import (
	"context"
	"time"
)

// Account roles. An operator runs the marketplace (credits, fees, every
// machine); a user rents and provides.
const (
	RoleOperator = "operator"
	RoleUser     = "user"
)

// Account kinds. A user is a person with credentials; a team is an account
// that owns instances, machines and a balance but holds no credentials of
// its own: its members act on it (DESIGN §7).
const (
	KindUser = "user"
	KindTeam = "team"
)

// Account is a tenant: it owns instances, machines, keys and a balance.
// Balance is read from the ledger; it is never written directly.
//
// AllowedCountries, when not empty, restricts where the account's instances
// may be placed (data residency): each entry is an ISO 3166 alpha-2 country
// code ("DE") or a marketplace region ("eu-west").
type Account struct {
	ID               int64     `json:"id"`
	Name             string    `json:"name"`
	Email            string    `json:"email,omitempty"`
	Role             string    `json:"role"`
	Kind             string    `json:"kind"`
	AllowedCountries []string  `json:"allowed_countries,omitempty"`
	CreatedAt        time.Time `json:"created_at"`
}

// IsTeam reports whether a is a team account.
func (a *Account) IsTeam() bool { return a.Kind == KindTeam }

// API key kinds: a long-lived key a person created, a temporary token cut
// from one, or an agent's machine credential.
const (
	KeyLive  = "live"
	KeyTemp  = "temp"
	KeyAgent = "agent"
)

// APIKey is a credential. Only a hash of the secret is stored; Secret is set
// once, in the reply that created it. A temporary token has ParentID set and
// dies with its parent.
type APIKey struct {
	ID           int64      `json:"id"`
	AccountID    int64      `json:"account_id"`
	Name         string     `json:"name"`
	Kind         string     `json:"kind"`
	Prefix       string     `json:"prefix"` // the first characters, to recognise a key in a list
	Scopes       []string   `json:"scopes"`
	MachineID    int64      `json:"machine_id,omitempty"` // set for an agent's credential: it may sync only that machine
	ParentID     int64      `json:"parent_id,omitempty"`  // temporary tokens: the key they were cut from
	CreatedAt    time.Time  `json:"created_at"`
	ExpiresAt    time.Time  `json:"expires_at"`
	RevokedAt    *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt   *time.Time `json:"last_used_at,omitempty"`
	LastUsedAddr string     `json:"last_used_addr,omitempty"`
	Secret       string     `json:"secret,omitempty"`
}

// Active reports whether k can authenticate at now (not revoked, not expired).
func (k *APIKey) Active(now time.Time) bool {
	return k.RevokedAt == nil && now.Before(k.ExpiresAt)
}

// Scopes a credential can carry. ScopeAll is every scope of the account's
// role except ScopeAgent and ScopeInstanceSelf, which are only ever given
// alone to machine and instance credentials.
const (
	ScopeAll           = "*"
	ScopeInstanceRead  = "instance:read"
	ScopeInstanceWrite = "instance:write"
	ScopeBillingRead   = "billing:read"
	ScopeHostRead      = "host:read"
	ScopeHostWrite     = "host:write"
	ScopeKeyRead       = "key:read"
	ScopeKeyWrite      = "key:write"
	ScopeTeamRead      = "team:read"
	ScopeTeamWrite     = "team:write"
	ScopeAccountWrite  = "account:write" // the account's own settings (data residency)
	ScopeAuditRead     = "audit:read"
	ScopeAgent         = "agent"         // an agent's own credential: sync and nothing else
	ScopeInstanceSelf  = "instance:self" // an instance's own token: read, stop and report progress of that one instance
	ScopeAdmin         = "admin"
)

// Scopes lists every scope a person can put on a key, in display order.
var Scopes = []string{ScopeInstanceRead, ScopeInstanceWrite, ScopeBillingRead, ScopeHostRead, ScopeHostWrite,
	ScopeKeyRead, ScopeKeyWrite, ScopeTeamRead, ScopeTeamWrite, ScopeAccountWrite, ScopeAuditRead, ScopeAdmin}

// Principal is who is calling: the account acted on, the person behind the
// credential, through which credential, with which scopes. The HTTP layer
// puts it into the request context.
//
// AccountID is the account whose objects the call reads and changes: the
// user's own, or a team the user selected (then TeamRole is set and Scopes
// are narrowed to what the role allows). UserID is the person; it equals
// AccountID when no team is selected, and is 0 for an instance's token.
type Principal struct {
	AccountID  int64
	UserID     int64
	Role       string // the acting account's role (operator or user)
	TeamRole   string // the user's role in the selected team; "" when acting as oneself
	KeyID      int64
	Scopes     []string
	MachineID  int64 // agents only
	InstanceID int64 // instance tokens only: the one instance it may touch
	Temporary  bool  // a temporary token: it cannot create keys or other tokens
}

// Can reports whether p holds scope (ScopeAll holds every scope but agent
// and instance:self, and admin only for operators).
func (p *Principal) Can(scope string) bool {
	if p == nil {
		return false
	}
	for _, s := range p.Scopes {
		if s == scope {
			return scope != ScopeAdmin || p.Role == RoleOperator
		}
		if s == ScopeAll && scope != ScopeAgent && scope != ScopeInstanceSelf && (scope != ScopeAdmin || p.Role == RoleOperator) {
			return true
		}
	}
	return false
}

// Person returns the user behind the credential (UserID, or AccountID for
// principals built without one).
func (p *Principal) Person() int64 {
	if p.UserID != 0 {
		return p.UserID
	}
	return p.AccountID
}

type principalKey struct{}

// NewContextWithPrincipal returns ctx carrying p.
func NewContextWithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

type requestKeyKey struct{}

// NewContextWithRequestKey returns ctx carrying the caller's idempotency
// key for the request being served (the HTTP API's Idempotency-Key). A
// create stores it with what it creates, so that a retry after a crash
// between the create and its recorded reply finds it instead of renting
// again.
func NewContextWithRequestKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, requestKeyKey{}, key)
}

// RequestKeyFromContext returns the request's idempotency key, or "".
func RequestKeyFromContext(ctx context.Context) string {
	k, _ := ctx.Value(requestKeyKey{}).(string)
	return k
}

// PrincipalFromContext returns the caller, or nil when the context has none.
func PrincipalFromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// JoinToken lets one agent register one machine for the account that created
// it. Secret is shown once.
type JoinToken struct {
	Token     string    `json:"token"`
	AccountID int64     `json:"account_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// KeyCreate asks for a new API key for the caller. TTL is mandatory (at most
// 366 days); Scopes may only narrow the calling key's.
type KeyCreate struct {
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	TTLSeconds int64    `json:"ttl_seconds"`
}

// KeyRotate replaces a key: a new key with the same name, scopes and
// lifetime; the old one expires after GraceSeconds (0: revoked at once).
type KeyRotate struct {
	GraceSeconds int64 `json:"grace_seconds"`
}

// TokenCreate asks for a temporary token cut from the calling key.
// TTLSeconds 0 means one hour; 15 minutes to 12 hours.
type TokenCreate struct {
	Scopes     []string `json:"scopes,omitempty"` // default: the calling key's
	TTLSeconds int64    `json:"ttl_seconds,omitempty"`
}

// AccountCreate is an operator's request for a new user account, which
// comes with its first API key.
type AccountCreate struct {
	Name       string `json:"name"`
	Email      string `json:"email,omitempty"`
	Credit     Money  `json:"credit,omitempty"`
	TTLSeconds int64  `json:"ttl_seconds,omitempty"` // of the first key; default 90 days
	Role       string `json:"role,omitempty"`        // user (default) or operator
}

// AccountWithKey is a new account and its first key (Secret set once).
type AccountWithKey struct {
	Account *Account `json:"account"`
	Key     *APIKey  `json:"key"`
}

// ResidencyUpdate sets an account's allowed countries and regions (empty:
// anywhere).
type ResidencyUpdate struct {
	AllowedCountries []string `json:"allowed_countries"`
}
