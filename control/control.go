package control

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/audit"
	"github.com/suanli/suanli/auth"
	"github.com/suanli/suanli/auth/sshca"
	"github.com/suanli/suanli/heartbeat"
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
	// SettleInterval is how often the hour close settles every running
	// meter into the ledger; default 1h. Costs shown are always settled +
	// accrued, so it changes no amount a person sees; status changes settle
	// the meters they affect at once.
	SettleInterval time.Duration

	// SecretKey (32 bytes, from HOME/secret.key) seals secrets at rest and
	// signs instance tokens. Nil means a random key for this process only:
	// secrets stored with it do not open after a restart (tests).
	SecretKey []byte
	// AuditKey signs audit checkpoints (HOME/audit.key). Nil means a random
	// key for this process only (tests).
	AuditKey ed25519.PrivateKey
	// AuditHeadFile receives a copy of each audit checkpoint, outside the
	// database; "" for none.
	AuditHeadFile string
	// AuditInterval is the time between audit checkpoints; default 30s.
	AuditInterval time.Duration
	// AuditRetention is how long audit entries are kept; default 186 days.
	AuditRetention time.Duration
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
	// BeatFlushInterval is how often the heartbeat table writes the beats it
	// heard to the store, in one batch (RunHeartbeats); default 1s. A crash
	// loses at most this much of the hosts' last heartbeats, and the lease
	// checker (perhaps on another replica) sees a beat this much later.
	BeatFlushInterval time.Duration
	// BeatRefreshInterval is how often the heartbeat table reads every
	// machine's status and desired-state version from the store, to learn
	// changes made through other replicas; default 30s.
	BeatRefreshInterval time.Duration
	// LeaseRescanInterval is how often the lease checker reads every machine
	// (and writes reliability time); between, it reads only silent ones.
	// Default 1m.
	LeaseRescanInterval time.Duration

	// LeaseTTL bounds how long the singleton loops (the hour close, host
	// leases, bookings…) go without a runner when the replica running them
	// dies: another replica takes them over within it. Default 10s.
	LeaseTTL time.Duration
	// ReclaimLease names a previous holder of the singleton lease known to
	// be dead (the last server process on the same home): its lease is
	// taken at once instead of after it expires. "" for none.
	ReclaimLease string
	// FeedInterval is how often the change feed is read (other replicas'
	// changes reach this replica's offer index within about this); default
	// 200ms.
	FeedInterval time.Duration
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
		c.SettleInterval = time.Hour
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
	if c.BeatFlushInterval <= 0 {
		c.BeatFlushInterval = time.Second
	}
	if c.BeatRefreshInterval <= 0 {
		c.BeatRefreshInterval = 30 * time.Second
	}
	if c.LeaseRescanInterval <= 0 {
		c.LeaseRescanInterval = time.Minute
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.FeedInterval <= 0 {
		c.FeedInterval = 200 * time.Millisecond
	}
}

// Service implements the suanli service interfaces over one store. It is
// safe for concurrent use.
type Service struct {
	Store  *sqlstore.DB
	Index  *market.Index
	Logger *slog.Logger
	Now    func() time.Time
	// Audit is the audit log; the HTTP layer records every mutation in it,
	// the service its own (lease losses, purges).
	Audit *audit.Log
	// SSHAuthority signs SSH certificates (`suanli ssh`); nil: SSH is off and
	// SignSSHCertificate answers EUNAVAILABLE. Set it before serving.
	SSHAuthority *sshca.CA
	cfg          Config

	sealer   *auth.Sealer
	tokenKey []byte // signs instance tokens

	started     time.Time
	lastObserve time.Time // the last lease check, for reliability accounting
	hub         hub
	tasks       taskBoard
	auditStatus auditStatusCache // AuditStatus's last verification
	usage       usageTracker
	// Beats is the in-memory heartbeat table (package heartbeat): syncs
	// that change nothing and the light channel's beats land in it, and
	// RunHeartbeats writes them to the store in batches. A heartbeat.Server
	// serves it on UDP when SetHeartbeatAddr advertises one.
	Beats     *heartbeat.Table
	beatAddr  atomic.Pointer[string]
	flushMu   sync.Mutex   // one flush at a time (RunHeartbeats, the lease check, the close)
	flushedAt time.Time    // when the last flush started; guarded by flushMu
	flusher   atomic.Int32 // RunHeartbeats running
	leases    leaseView
	// Client makes webhook deliveries; http.DefaultClient with a timeout by default.
	Client *http.Client
	// lowSince remembers since when an account's balance has been at or below zero.
	lowMu    sync.Mutex
	lowSince map[int64]time.Time
	keys     keyCache // recently verified API keys (keycache.go)

	cluster   clusterState  // the singleton lease and the change feed, as this replica sees them
	feed      feed          // the change feed reader's position
	leaseWake chan struct{} // the feed tells the lease loop that the lease moved
}

var (
	_ suanli.OfferService    = (*Service)(nil)
	_ suanli.InstanceService = (*Service)(nil)
	_ suanli.MachineService  = (*Service)(nil)
	_ suanli.BillingService  = (*Service)(nil)
	_ suanli.AgentService    = (*Service)(nil)
	_ suanli.AccountService  = (*Service)(nil)
	_ suanli.KeyService      = (*Service)(nil)
	_ suanli.TeamService     = (*Service)(nil)
	_ suanli.AuditService    = (*Service)(nil)
	_ suanli.SSHService      = (*Service)(nil)
)

// New returns a service over store and rebuilds the offer index from it.
func New(ctx context.Context, store *sqlstore.DB, cfg Config, logger *slog.Logger) (*Service, error) {
	cfg.setDefaults()
	s := &Service{Store: store, Index: market.NewIndex(), Logger: logger, Now: time.Now, cfg: cfg,
		Client: &http.Client{Timeout: 10 * time.Second}, lowSince: map[int64]time.Time{}, leaseWake: make(chan struct{}, 1)}
	s.started = s.Now()
	s.tasks.relay = s.relayResult
	master := cfg.SecretKey
	if master == nil {
		master = make([]byte, 32)
		rand.Read(master)
	}
	var err error
	if s.sealer, err = auth.NewSealer(master); err != nil {
		return nil, err
	}
	s.tokenKey = auth.DeriveKey(master, "instance token")
	keys, err := heartbeat.NewKeys(auth.DeriveKey(master, "heartbeat key"), 0)
	if err != nil {
		return nil, err
	}
	s.Beats = heartbeat.NewTable(keys)
	s.Beats.Now = func() time.Time { return s.now() }
	s.hub.onWake = s.Beats.Wake
	// Every close bills compute up to each machine's last heartbeat: the
	// ones this replica heard go to the store first.
	store.SetBeforeClose(func(ctx context.Context) {
		if _, err := s.FlushBeats(ctx); err != nil {
			s.Logger.Error("flush heartbeats before the close", "err", err)
		}
	})
	key := cfg.AuditKey
	if key == nil {
		_, key, _ = ed25519.GenerateKey(rand.Reader)
	}
	s.Audit = &audit.Log{Store: store, Key: key, Now: func() time.Time { return s.Now() }, Logger: logger,
		HeadFile: cfg.AuditHeadFile, Interval: cfg.AuditInterval, Retention: cfg.AuditRetention}
	if err := s.startFeed(ctx); err != nil { // first: what changes while the index loads is read again
		return nil, err
	}
	if err := s.rebuildIndex(ctx); err != nil {
		return nil, err
	}
	// The lease grace runs from here: rebuilding the index takes a while
	// with many machines, and no agent could reach us meanwhile.
	s.started = s.Now()
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

// Authenticate turns a secret into the caller: an API key (sl_live_), a
// temporary token (sl_tmp_, void once its parent key is revoked or
// expired) or an instance's token (sl_inst_, void once the instance is
// destroyed). EUNAUTHORIZED for anything unknown, malformed, revoked or
// expired, with a message that says which.
func (s *Service) Authenticate(ctx context.Context, secret, addr string) (*suanli.Principal, error) {
	if strings.HasPrefix(secret, auth.PrefixInstance) {
		return s.authInstance(ctx, secret)
	}
	prefix, what := auth.PrefixKey, "API key"
	if strings.HasPrefix(secret, auth.PrefixTemp) {
		prefix, what = auth.PrefixTemp, "temporary token"
	}
	if !auth.WellFormed(secret, prefix) {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "%s is malformed (expected %s… with a valid checksum): check for a copy-paste error", what, prefix)
	}
	hash := auth.Hash(secret)
	now := s.now()
	e, ok := s.keys.get(hash, now)
	if !ok {
		k, err := s.Store.FindAPIKeyByHash(ctx, hash)
		if suanli.ErrorCode(err) == suanli.ENOTFOUND {
			return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "%s not recognised", what)
		} else if err != nil {
			return nil, err
		}
		e = cachedKey{key: *k, read: now}
		if k.ParentID != 0 {
			if e.parent, err = s.Store.FindAPIKeyByID(ctx, k.ParentID); err != nil {
				return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "temporary token %s: its parent key is gone", k.Prefix)
			}
		}
		a, err := s.Store.FindAccountByID(ctx, k.AccountID)
		if err != nil {
			return nil, err
		}
		e.role = a.Role
		s.keys.put(hash, e)
	}
	k := &e.key
	if err := keyUsable(k, what, now); err != nil {
		return nil, err
	}
	if e.parent != nil {
		if err := keyUsable(e.parent, "the parent key of temporary token "+k.Prefix+",", now); err != nil {
			return nil, err
		}
	}
	if k.LastUsedAt == nil || now.Sub(*k.LastUsedAt) > time.Minute || k.LastUsedAddr != addr {
		if err := s.Store.TouchAPIKey(ctx, k.ID, now, addr); err != nil {
			s.Logger.Warn("touch api key", "key_id", k.ID, "err", err)
		}
		s.keys.touched(hash, now, addr)
	}
	return &suanli.Principal{AccountID: k.AccountID, UserID: k.AccountID, Role: e.role, KeyID: k.ID, Scopes: k.Scopes, MachineID: k.MachineID,
		Temporary: k.Kind == suanli.KeyTemp}, nil
}

func keyUsable(k *suanli.APIKey, what string, now time.Time) error {
	if k.RevokedAt != nil {
		return suanli.Errorf(suanli.EUNAUTHORIZED, "%s %s was revoked at %s", what, k.Prefix, k.RevokedAt.Format(time.RFC3339))
	}
	if !now.Before(k.ExpiresAt) {
		return suanli.Errorf(suanli.EUNAUTHORIZED, "%s %s expired at %s: create a new one", what, k.Prefix, k.ExpiresAt.Format(time.RFC3339))
	}
	return nil
}

// authInstance checks an instance's own token.
func (s *Service) authInstance(ctx context.Context, tok string) (*suanli.Principal, error) {
	id, exp, ok := auth.ParseInstanceToken(s.tokenKey, tok)
	if !ok {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "instance token is not valid: read the current one from the file SUANLI_TOKEN_FILE names")
	}
	if !s.now().Before(exp) {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "instance token expired at %s: read the current one from the file SUANLI_TOKEN_FILE names (the agent refreshes it)", exp.Format(time.RFC3339))
	}
	in, err := s.Store.FindInstanceByID(ctx, id, s.now())
	if suanli.ErrorCode(err) == suanli.ENOTFOUND || (err == nil && in.Status == suanli.StatusDestroyed) {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "instance token: instance %d is destroyed", id)
	} else if err != nil {
		return nil, err
	}
	return &suanli.Principal{AccountID: in.AccountID, Role: suanli.RoleUser, Scopes: []string{suanli.ScopeInstanceSelf}, InstanceID: in.ID}, nil
}

// SelectTeam returns the principal for p acting on a team (by id or name)
// it is a member of: the team's account, with p's scopes narrowed to what
// its role there allows. A team p is not in is ENOTFOUND, like any other
// tenant's object.
func (s *Service) SelectTeam(ctx context.Context, p *suanli.Principal, team string) (*suanli.Principal, error) {
	if p.InstanceID != 0 || p.MachineID != 0 {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "instance and agent credentials cannot select a team")
	}
	var a *suanli.Account
	var err error
	if id, perr := strconv.ParseInt(team, 10, 64); perr == nil {
		a, err = s.Store.FindAccountByID(ctx, id)
	} else {
		a, err = s.Store.FindAccountByName(ctx, team)
	}
	notFound := suanli.Errorf(suanli.ENOTFOUND, "team %q not found: `suanli teams ls` lists yours", team)
	if suanli.ErrorCode(err) == suanli.ENOTFOUND || (err == nil && !a.IsTeam()) {
		return nil, notFound
	} else if err != nil {
		return nil, err
	}
	role, err := s.Store.TeamRole(ctx, a.ID, p.Person())
	if suanli.ErrorCode(err) == suanli.ENOTFOUND {
		return nil, notFound
	} else if err != nil {
		return nil, err
	}
	return &suanli.Principal{AccountID: a.ID, UserID: p.Person(), Role: a.Role, TeamRole: role, KeyID: p.KeyID,
		Scopes: auth.Intersect(p.Scopes, auth.RoleScopes(role)), Temporary: p.Temporary}, nil
}

// operator returns the caller when it is a marketplace operator holding the
// admin scope, EFORBIDDEN otherwise.
func operator(ctx context.Context, what string) (*suanli.Principal, error) {
	p, err := principal(ctx, suanli.ScopeAdmin)
	if err != nil {
		return nil, err
	}
	if p.Role != suanli.RoleOperator {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "only a marketplace operator can %s", what)
	}
	return p, nil
}

// CreateAccountWithKey creates an account (with optional starting credit)
// and an all-scopes API key; it returns the key's secret. Used to bootstrap
// the operator and by tests.
func (s *Service) CreateAccountWithKey(ctx context.Context, name, role string, credit suanli.Money) (*suanli.Account, string, error) {
	a := &suanli.Account{Name: name, Role: role, Kind: suanli.KindUser, CreatedAt: s.now()}
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

// CreateTeamAccount creates a team with owner as its first owner and optional
// starting credit (bootstrap and tests; people use CreateTeam).
func (s *Service) CreateTeamAccount(ctx context.Context, name string, owner int64, credit suanli.Money) (*suanli.Account, error) {
	t := &suanli.Account{Name: name, Role: suanli.RoleUser, CreatedAt: s.now()}
	if err := s.Store.CreateTeam(ctx, t, owner, s.now()); err != nil {
		return nil, err
	}
	if credit > 0 {
		if err := s.Store.Credit(ctx, t.ID, credit, "starting credit", s.now()); err != nil {
			return nil, err
		}
	}
	return t, nil
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

// hub wakes long-polling agents when their machine's desired state changes.
type hub struct {
	mu sync.Mutex
	ch map[int64]chan struct{}
	// onWake is also told of every wake: the heartbeat table, which asks
	// an agent that only beats to sync (and pokes it).
	onWake func(machineID int64)
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
	if c, ok := h.ch[machineID]; ok {
		close(c)
		delete(h.ch, machineID)
	}
	h.mu.Unlock()
	if h.onWake != nil {
		h.onWake(machineID)
	}
}
