package control

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
	"github.com/suanli/suanli/auth/sshca"
	"github.com/suanli/suanli/market"
	"github.com/suanli/suanli/sqlstore"
)

// Config tunes the control plane. The zero value of each field means its
// default (DESIGN §4).
type Config struct {
	FeeBasisPoints    int64         // platform fee out of provider earnings; default 0
	AllowSimulated    bool          // let other accounts rent simulated machines
	HeartbeatInterval time.Duration // default 10s
	SuspectAfter      time.Duration // default interval + 10s grace
	LostAfter         time.Duration // default 2m
	FailoverGrace     time.Duration // after a restart, nothing is lost before this; default 5m
	SettleInterval    time.Duration // default 10s
	// ZeroBalanceGrace is how long instances keep running once their
	// account's balance reaches zero; then they are stopped (never
	// destroyed). Default 10 minutes.
	ZeroBalanceGrace time.Duration
	// LowBalanceHours: warn when the balance covers fewer hours than this
	// at the current burn rate. Default 24.
	LowBalanceHours int
	// MarketSampleInterval is how often listed prices and fill are recorded
	// in the price history; default 5m.
	MarketSampleInterval time.Duration
}

func (c *Config) setDefaults() {
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 10 * time.Second
	}
	if c.SuspectAfter <= 0 {
		c.SuspectAfter = c.HeartbeatInterval + 10*time.Second
	}
	if c.LostAfter <= 0 {
		c.LostAfter = 2 * time.Minute
	}
	if c.FailoverGrace <= 0 {
		c.FailoverGrace = 5 * time.Minute
	}
	if c.SettleInterval <= 0 {
		c.SettleInterval = 10 * time.Second
	}
	if c.ZeroBalanceGrace <= 0 {
		c.ZeroBalanceGrace = 10 * time.Minute
	}
	if c.LowBalanceHours <= 0 {
		c.LowBalanceHours = 24
	}
	if c.MarketSampleInterval <= 0 {
		c.MarketSampleInterval = 5 * time.Minute
	}
}

// Service implements the suanli service interfaces over one store. It is
// safe for concurrent use.
type Service struct {
	Store  *sqlstore.DB
	Index  *market.Index
	Logger *slog.Logger
	Now    func() time.Time
	// SSHAuthority signs SSH certificates (`suanli ssh`); nil: SSH is off and
	// SignSSHCertificate answers EUNAVAILABLE. Set it before serving.
	SSHAuthority *sshca.CA
	cfg          Config

	started     time.Time
	lastObserve time.Time // the last lease check, for reliability accounting
	hub         hub
	tasks       taskBoard
	usage       usageTracker
	// Client makes webhook deliveries; http.DefaultClient with a timeout by default.
	Client *http.Client
	// lowSince remembers since when an account's balance has been at or below zero.
	lowMu    sync.Mutex
	lowSince map[int64]time.Time
}

var (
	_ suanli.OfferService    = (*Service)(nil)
	_ suanli.InstanceService = (*Service)(nil)
	_ suanli.MachineService  = (*Service)(nil)
	_ suanli.BillingService  = (*Service)(nil)
	_ suanli.AgentService    = (*Service)(nil)
	_ suanli.AccountService  = (*Service)(nil)
	_ suanli.SSHService      = (*Service)(nil)
)

// New returns a service over store and rebuilds the offer index from it.
func New(ctx context.Context, store *sqlstore.DB, cfg Config, logger *slog.Logger) (*Service, error) {
	cfg.setDefaults()
	s := &Service{Store: store, Index: market.NewIndex(), Logger: logger, Now: time.Now, cfg: cfg,
		Client: &http.Client{Timeout: 10 * time.Second}, lowSince: map[int64]time.Time{}}
	s.started = s.Now()
	if err := s.rebuildIndex(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// SetClock replaces the service's clock (tests, simulations) and restarts
// the failover grace from the new clock's now.
func (s *Service) SetClock(now func() time.Time) {
	s.Now = now
	s.started = now()
}

// Config returns the effective configuration.
func (s *Service) Config() Config { return s.cfg }

func (s *Service) now() time.Time { return s.Now().UTC() }

// principal returns the caller or EUNAUTHORIZED, and EFORBIDDEN when it
// lacks scope.
func principal(ctx context.Context, scope string) (*suanli.Principal, error) {
	p := suanli.PrincipalFromContext(ctx)
	if p == nil {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "no credential: pass an API key (SUANLI_API_KEY or --api-key)")
	}
	if !p.Can(scope) {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "this key lacks the %s scope", scope)
	}
	return p, nil
}

// Authenticate turns a secret into the caller. EUNAUTHORIZED for an unknown,
// malformed, revoked or expired key, with a message that says which.
func (s *Service) Authenticate(ctx context.Context, secret, addr string) (*suanli.Principal, error) {
	if !auth.WellFormed(secret, auth.PrefixKey) {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "API key is malformed (expected sl_live_… with a valid checksum): check for a copy-paste error")
	}
	k, err := s.Store.FindAPIKeyByHash(ctx, auth.Hash(secret))
	if suanli.ErrorCode(err) == suanli.ENOTFOUND {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "API key not recognised")
	} else if err != nil {
		return nil, err
	}
	now := s.now()
	if k.RevokedAt != nil {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "API key %s was revoked at %s", k.Prefix, k.RevokedAt.Format(time.RFC3339))
	}
	if now.After(k.ExpiresAt) {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "API key %s expired at %s: create a new one", k.Prefix, k.ExpiresAt.Format(time.RFC3339))
	}
	a, err := s.Store.FindAccountByID(ctx, k.AccountID)
	if err != nil {
		return nil, err
	}
	if k.LastUsedAt == nil || now.Sub(*k.LastUsedAt) > time.Minute {
		if err := s.Store.TouchAPIKey(ctx, k.ID, now, addr); err != nil {
			s.Logger.Warn("touch api key", "key_id", k.ID, "err", err)
		}
	}
	return &suanli.Principal{AccountID: a.ID, Role: a.Role, KeyID: k.ID, Scopes: k.Scopes, MachineID: k.MachineID}, nil
}

// CreateAccountWithKey creates an account (with optional starting credit)
// and an all-scopes API key; it returns the key's secret. Used to bootstrap
// the operator and by tests.
func (s *Service) CreateAccountWithKey(ctx context.Context, name, role string, credit suanli.Money) (*suanli.Account, string, error) {
	a := &suanli.Account{Name: name, Role: role, CreatedAt: s.now()}
	if err := s.Store.CreateAccount(ctx, a); err != nil {
		return nil, "", err
	}
	if credit > 0 {
		if err := s.Store.Credit(ctx, a.ID, credit, "starting credit", s.now()); err != nil {
			return nil, "", err
		}
	}
	secret, err := s.CreateKey(ctx, a.ID, "default", []string{suanli.ScopeAll}, 365*24*time.Hour)
	return a, secret, err
}

// CreateKey creates an API key for an account and returns its secret.
func (s *Service) CreateKey(ctx context.Context, accountID int64, name string, scopes []string, ttl time.Duration) (string, error) {
	if ttl <= 0 || ttl > auth.MaxKeyLifetime {
		return "", suanli.FieldErrorf("ttl", "must be between 1s and 366 days")
	}
	secret := auth.NewSecret(auth.PrefixKey)
	now := s.now()
	k := &suanli.APIKey{AccountID: accountID, Name: name, Prefix: auth.DisplayPrefix(secret), Scopes: scopes, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	return secret, s.Store.CreateAPIKey(ctx, k, auth.Hash(secret))
}

// Me returns the caller's account.
func (s *Service) Me(ctx context.Context) (*suanli.Account, error) {
	p := suanli.PrincipalFromContext(ctx)
	if p == nil {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "no credential: pass an API key")
	}
	return s.Store.FindAccountByID(ctx, p.AccountID)
}

// hub wakes long-polling agents when their machine's desired state changes.
type hub struct {
	mu sync.Mutex
	ch map[int64]chan struct{}
}

// wait returns a channel closed at the machine's next wake.
func (h *hub) wait(machineID int64) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ch == nil {
		h.ch = map[int64]chan struct{}{}
	}
	c, ok := h.ch[machineID]
	if !ok {
		c = make(chan struct{})
		h.ch[machineID] = c
	}
	return c
}

// wake releases everyone waiting on the machine.
func (h *hub) wake(machineID int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.ch[machineID]; ok {
		close(c)
		delete(h.ch, machineID)
	}
}
