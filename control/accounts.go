package control

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
)

// Accounts are created by an operator (`suanli admin accounts create`);
// there is no self-service signup. A marketplace that wants one puts it in
// front of this API. Teams, by contrast, are self-service.

// DefaultAccountKeyTTL is the lifetime of the first key of an account an
// operator creates, when none is asked for.
const DefaultAccountKeyTTL = 90 * 24 * time.Hour

// accountName: 2-64 letters, digits, '.', '_' or '-', starting with a letter
// or digit, and not all digits (so that a name never reads as an id).
var accountName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{1,63}$`)

func validName(field, name string) error {
	if !accountName.MatchString(name) || strings.Trim(name, "0123456789") == "" {
		return suanli.FieldErrorf(field, "%q: use 2-64 letters, digits, '.', '_' or '-' (not only digits)", name)
	}
	return nil
}

var (
	countryCode = regexp.MustCompile(`^[A-Z]{2}$`)
	regionName  = regexp.MustCompile(`^[a-z][a-z0-9-]{2,31}$`)
)

// normalizeResidency validates a list of countries (ISO 3166 alpha-2,
// upper-cased) and regions (lower-case names such as eu-west).
func normalizeResidency(field string, in []string) ([]string, error) {
	var out []string
	for _, v := range in {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if len(v) == 2 {
			v = strings.ToUpper(v)
		}
		if !countryCode.MatchString(v) && !regionName.MatchString(v) {
			return nil, suanli.FieldErrorf(field, "%q is neither a country code (DE, FR) nor a region name (eu-west)", v)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) > 50 {
		return nil, suanli.FieldErrorf(field, "at most 50 countries or regions")
	}
	return out, nil
}

// Me returns the caller's account (the selected team when one is).
func (s *Service) Me(ctx context.Context) (*suanli.Account, error) {
	p := suanli.PrincipalFromContext(ctx)
	if p == nil {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "no credential: pass an API key")
	}
	return s.Store.FindAccountByID(ctx, p.AccountID)
}

// SetResidency restricts where the acting account's instances may run
// (owners only, for a team).
func (s *Service) SetResidency(ctx context.Context, u suanli.ResidencyUpdate) (*suanli.Account, error) {
	p, err := principal(ctx, suanli.ScopeAccountWrite)
	if err != nil {
		return nil, err
	}
	allowed, err := normalizeResidency("allowed_countries", u.AllowedCountries)
	if err != nil {
		return nil, err
	}
	if err := s.Store.SetAllowedCountries(ctx, p.AccountID, allowed); err != nil {
		return nil, err
	}
	s.Logger.Info("residency set", "account_id", p.AccountID, "allowed", strings.Join(allowed, ","))
	return s.Store.FindAccountByID(ctx, p.AccountID)
}

// CreateAccount creates a user account and its first key. Operators only.
func (s *Service) CreateAccount(ctx context.Context, c suanli.AccountCreate) (*suanli.AccountWithKey, error) {
	if _, err := operator(ctx, "create accounts"); err != nil {
		return nil, err
	}
	if err := validName("name", c.Name); err != nil {
		return nil, err
	}
	switch c.Role {
	case "":
		c.Role = suanli.RoleUser
	case suanli.RoleUser, suanli.RoleOperator:
	default:
		return nil, suanli.FieldErrorf("role", "%q: use user or operator", c.Role)
	}
	if c.Credit < 0 {
		return nil, suanli.FieldErrorf("credit", "must not be negative")
	}
	ttl := time.Duration(c.TTLSeconds) * time.Second
	if c.TTLSeconds == 0 {
		ttl = DefaultAccountKeyTTL
	}
	if ttl <= 0 || ttl > auth.MaxKeyLifetime {
		return nil, suanli.FieldErrorf("ttl_seconds", "the first key's lifetime must be between 1s and 366 days")
	}
	a := &suanli.Account{Name: c.Name, Email: strings.TrimSpace(c.Email), Role: c.Role, Kind: suanli.KindUser, CreatedAt: s.now()}
	if err := s.Store.CreateAccount(ctx, a); err != nil {
		return nil, err
	}
	if c.Credit > 0 {
		if err := s.Store.Credit(ctx, a.ID, c.Credit, "starting credit", s.now()); err != nil {
			return nil, err
		}
	}
	k, err := s.issueKey(ctx, a.ID, "default", []string{suanli.ScopeAll}, ttl)
	if err != nil {
		return nil, err
	}
	s.Logger.Info("account created", "account_id", a.ID, "role", a.Role)
	return &suanli.AccountWithKey{Account: a, Key: k}, nil
}

// FindAccounts lists every account. Operators only.
func (s *Service) FindAccounts(ctx context.Context) ([]*suanli.Account, error) {
	if _, err := operator(ctx, "list accounts"); err != nil {
		return nil, err
	}
	return s.Store.FindAccounts(ctx)
}

// issueKey creates a live key without the checks a person's request gets
// (bootstrap, account creation).
func (s *Service) issueKey(ctx context.Context, accountID int64, name string, scopes []string, ttl time.Duration) (*suanli.APIKey, error) {
	secret := auth.NewSecret(auth.PrefixKey)
	now := s.now()
	k := &suanli.APIKey{AccountID: accountID, Name: name, Kind: suanli.KeyLive, Prefix: auth.DisplayPrefix(secret), Scopes: scopes,
		CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.Store.CreateAPIKey(ctx, k, auth.Hash(secret)); err != nil {
		return nil, err
	}
	k.Secret = secret
	return k, nil
}
