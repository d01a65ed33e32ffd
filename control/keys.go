package control

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
)

// MaxRotateGrace is the longest a rotated key stays valid beside its
// successor.
const MaxRotateGrace = 30 * 24 * time.Hour

// keyCaller returns the caller for key management: a person's credential
// (not an agent's or an instance's) holding scope.
func keyCaller(ctx context.Context, scope string) (*suanli.Principal, error) {
	p, err := principal(ctx, scope)
	if err != nil {
		return nil, err
	}
	if p.MachineID != 0 || p.InstanceID != 0 {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "agent and instance credentials cannot manage keys")
	}
	return p, nil
}

// CreateAPIKey creates a key for the calling user. Its scopes can only
// narrow the calling key's; its expiry is mandatory (at most 366 days); at
// most two active keys share a name (for rotation).
func (s *Service) CreateAPIKey(ctx context.Context, c suanli.KeyCreate) (*suanli.APIKey, error) {
	p, err := keyCaller(ctx, suanli.ScopeKeyWrite)
	if err != nil {
		return nil, err
	}
	if p.Temporary {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "a temporary token cannot create API keys: use an API key")
	}
	c.Name = strings.TrimSpace(c.Name)
	if c.Name == "" {
		return nil, suanli.FieldErrorf("name", "give the key a name that says what it is for (ci, laptop, …)")
	}
	if len(c.Name) > 64 {
		return nil, suanli.FieldErrorf("name", "longer than 64 characters")
	}
	ttl := time.Duration(c.TTLSeconds) * time.Second
	if c.TTLSeconds <= 0 {
		return nil, suanli.FieldErrorf("ttl_seconds", "every key expires: give a lifetime (--ttl 90d), at most 366 days")
	}
	if ttl > auth.MaxKeyLifetime {
		return nil, suanli.FieldErrorf("ttl_seconds", "%s is longer than 366 days: create a shorter-lived key and rotate it", ttl)
	}
	scopes := auth.NormalizeScopes(c.Scopes)
	if err := auth.CheckScopes(p, scopes); err != nil {
		return nil, err
	}
	secret := auth.NewSecret(auth.PrefixKey)
	now := s.now()
	k := &suanli.APIKey{AccountID: p.Person(), Name: c.Name, Kind: suanli.KeyLive, Prefix: auth.DisplayPrefix(secret), Scopes: scopes,
		CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.Store.CreateLiveKey(ctx, k, auth.Hash(secret), auth.MaxActivePerName, now); err != nil {
		return nil, err
	}
	k.Secret = secret
	s.Logger.Info("api key created", "key_id", k.ID, "account_id", k.AccountID, "scopes", strings.Join(scopes, ","))
	return k, nil
}

// FindAPIKeys lists the calling user's keys and tokens (active ones, or all).
func (s *Service) FindAPIKeys(ctx context.Context, all bool) ([]*suanli.APIKey, error) {
	p, err := keyCaller(ctx, suanli.ScopeKeyRead)
	if err != nil {
		return nil, err
	}
	ks, err := s.Store.FindAPIKeys(ctx, p.Person())
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := []*suanli.APIKey{}
	for _, k := range ks {
		if all || k.Active(now) {
			out = append(out, k)
		}
	}
	return out, nil
}

// ownKey loads one of the calling user's keys; another user's is ENOTFOUND.
func (s *Service) ownKey(ctx context.Context, p *suanli.Principal, id int64) (*suanli.APIKey, error) {
	k, err := s.Store.FindAPIKeyByID(ctx, id)
	if suanli.ErrorCode(err) == suanli.ENOTFOUND || (err == nil && k.AccountID != p.Person()) {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "key %d not found: `suanli keys ls` lists yours", id)
	}
	return k, err
}

// RevokeAPIKey revokes one of the caller's keys and the tokens cut from it.
// Revoking twice is not an error.
func (s *Service) RevokeAPIKey(ctx context.Context, id int64) (*suanli.APIKey, error) {
	p, err := keyCaller(ctx, suanli.ScopeKeyWrite)
	if err != nil {
		return nil, err
	}
	k, err := s.ownKey(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if err := s.Store.RevokeAPIKey(ctx, id, s.now()); err != nil {
		return nil, err
	}
	s.keys.clear()
	s.Logger.Info("api key revoked", "key_id", id, "account_id", k.AccountID)
	return s.Store.FindAPIKeyByID(ctx, id)
}

// RotateAPIKey issues the key's successor (same name, scopes and lifetime)
// and lets the old one live GraceSeconds longer (at most 30 days, never
// beyond its own expiry; 0 revokes it now).
func (s *Service) RotateAPIKey(ctx context.Context, id int64, r suanli.KeyRotate) (*suanli.APIKey, error) {
	p, err := keyCaller(ctx, suanli.ScopeKeyWrite)
	if err != nil {
		return nil, err
	}
	if p.Temporary {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "a temporary token cannot rotate API keys: use an API key")
	}
	old, err := s.ownKey(ctx, p, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if old.Kind != suanli.KeyLive {
		return nil, suanli.Errorf(suanli.ECONFLICT, "key %d is a %s credential: only API keys rotate", id, old.Kind)
	}
	if !old.Active(now) {
		return nil, suanli.Errorf(suanli.ECONFLICT, "key %d is revoked or expired: create a new key instead", id)
	}
	// The successor has the old key's scopes: the caller must hold them.
	if err := auth.CheckScopes(p, old.Scopes); err != nil {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "key %d has scopes this key lacks (%s): rotate it with a key that holds them", id, strings.Join(old.Scopes, ", "))
	}
	grace := time.Duration(r.GraceSeconds) * time.Second
	if grace < 0 || grace > MaxRotateGrace {
		return nil, suanli.FieldErrorf("grace_seconds", "between 0 and 30 days")
	}
	life := min(old.ExpiresAt.Sub(old.CreatedAt), auth.MaxKeyLifetime)
	secret := auth.NewSecret(auth.PrefixKey)
	next := &suanli.APIKey{AccountID: old.AccountID, Name: old.Name, Kind: suanli.KeyLive, Prefix: auth.DisplayPrefix(secret),
		Scopes: old.Scopes, CreatedAt: now, ExpiresAt: now.Add(life)}
	if err := s.Store.RotateKey(ctx, old, next, auth.Hash(secret), now.Add(grace), auth.MaxActivePerName, now); err != nil {
		return nil, err
	}
	s.keys.clear()
	next.Secret = secret
	s.Logger.Info("api key rotated", "key_id", id, "new_key_id", next.ID, "grace", grace.String())
	return next, nil
}

// CreateToken cuts a temporary token from the calling key: 15 minutes to
// 12 hours (1 hour by default, and never past the key's own expiry), scopes
// that only narrow (the key's by default). It dies with the key.
func (s *Service) CreateToken(ctx context.Context, c suanli.TokenCreate) (*suanli.APIKey, error) {
	p := suanli.PrincipalFromContext(ctx)
	if p == nil {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "no credential: pass an API key")
	}
	if p.MachineID != 0 || p.InstanceID != 0 || p.KeyID == 0 {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "agent and instance credentials cannot create tokens")
	}
	if p.Temporary {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "a temporary token cannot create another: use an API key")
	}
	ttl := time.Duration(c.TTLSeconds) * time.Second
	if c.TTLSeconds == 0 {
		ttl = auth.DefaultTempLifetime
	}
	if ttl < auth.MinTempLifetime || ttl > auth.MaxTempLifetime {
		return nil, suanli.FieldErrorf("ttl_seconds", "%s: a temporary token lives 15m to 12h", ttl)
	}
	scopes := auth.NormalizeScopes(c.Scopes)
	if len(scopes) == 0 {
		scopes = p.Scopes
	}
	if err := auth.CheckScopes(p, scopes); err != nil {
		return nil, err
	}
	parent, err := s.Store.FindAPIKeyByID(ctx, p.KeyID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	exp := now.Add(ttl)
	if exp.After(parent.ExpiresAt) {
		exp = parent.ExpiresAt
	}
	secret := auth.NewSecret(auth.PrefixTemp)
	k := &suanli.APIKey{AccountID: p.Person(), Name: fmt.Sprintf("token from key %d", parent.ID), Kind: suanli.KeyTemp,
		Prefix: auth.DisplayPrefix(secret), Scopes: scopes, ParentID: parent.ID, CreatedAt: now, ExpiresAt: exp}
	if err := s.Store.CreateAPIKey(ctx, k, auth.Hash(secret)); err != nil {
		return nil, err
	}
	k.Secret = secret
	s.Logger.Info("temporary token created", "key_id", k.ID, "parent_id", parent.ID, "expires_at", exp.Format(time.RFC3339))
	return k, nil
}
