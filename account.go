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

// Account is a tenant: it owns instances, machines, keys and a balance.
// Balance is read from the ledger; it is never written directly.
type Account struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	Email     string    `json:"email,omitempty"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

// APIKey is a credential. Only a hash of the secret is stored; Secret is set
// once, in the reply that created it.
type APIKey struct {
	ID         int64      `json:"id"`
	AccountID  int64      `json:"account_id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"` // the first characters, to recognise a key in a list
	Scopes     []string   `json:"scopes"`
	MachineID  int64      `json:"machine_id,omitempty"` // set for an agent's credential: it may sync only that machine
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	Secret     string     `json:"secret,omitempty"`
}

// Scopes a credential can carry. ScopeAll is every scope of the account's role.
const (
	ScopeAll           = "*"
	ScopeInstanceRead  = "instance:read"
	ScopeInstanceWrite = "instance:write"
	ScopeBillingRead   = "billing:read"
	ScopeHostRead      = "host:read"
	ScopeHostWrite     = "host:write"
	ScopeAgent         = "agent" // an agent's own credential: sync and nothing else
	ScopeAdmin         = "admin"
)

// Principal is who is calling: the account, through which credential, with
// which scopes. The HTTP layer puts it into the request context.
type Principal struct {
	AccountID int64
	Role      string
	KeyID     int64
	Scopes    []string
	MachineID int64 // agents only
}

// Can reports whether p holds scope (ScopeAll holds every scope but agent).
func (p *Principal) Can(scope string) bool {
	if p == nil {
		return false
	}
	for _, s := range p.Scopes {
		if s == scope || (s == ScopeAll && scope != ScopeAgent && (scope != ScopeAdmin || p.Role == RoleOperator)) {
			return true
		}
	}
	return false
}

type principalKey struct{}

// NewContextWithPrincipal returns ctx carrying p.
func NewContextWithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
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
