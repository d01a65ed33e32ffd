package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
	"github.com/suanli/suanli/advisor/advisecli"
	"github.com/suanli/suanli/audit"
	"github.com/suanli/suanli/auth"
	"github.com/suanli/suanli/auth/sshca"
	"github.com/suanli/suanli/auth/tlsca"
	"github.com/suanli/suanli/console"
	"github.com/suanli/suanli/control"
	"github.com/suanli/suanli/heartbeat"
	shttp "github.com/suanli/suanli/http"
	"github.com/suanli/suanli/internal/gctune"
	"github.com/suanli/suanli/sqlstore"
	"github.com/suanli/suanli/vastapi"
)

// serverConfig is the control plane's configuration.
type serverConfig struct {
	Addr           string
	DB             string // SQLite path or postgres:// URL; default home/suanli.db
	Fee            string // platform fee percent, "0"
	AllowSimulated bool
	StartCredit    string
	Heartbeat      time.Duration
	SuspectAfter   time.Duration // 0: heartbeat + 10s
	LostAfter      time.Duration
	FailoverGrace  time.Duration
	Settle         time.Duration
	AuditRetention string        // "186d"
	AuditEvery     time.Duration // between audit checkpoints
	TLS            string        // "off" or "auto" (a private CA and server certificate in HOME/tls)
	TLSHosts       []string      // extra names for the server certificate
	SSHCAKey       string        // the SSH CA's key file; default HOME/ssh_ca_ed25519
	VastAPI        bool          // serve the Vast.ai API compatibility layer beside the native API
	LeaseTTL       time.Duration // the singleton lease: how soon another replica takes over the loops
	// HeartbeatAddr is the light heartbeat channel's UDP address: "" the
	// same host and port number as Addr, "off" none.
	HeartbeatAddr string
}

func (c *serverConfig) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.Addr, "addr", envOr("SUANLI_ADDR", DefaultAddr), "address to listen on (HOST:PORT; port 0 picks a free one); env SUANLI_ADDR")
	f.StringVar(&c.DB, "db", os.Getenv("SUANLI_DB"), "database: a SQLite file path or postgres://… (default HOME/suanli.db); env SUANLI_DB")
	f.StringVar(&c.Fee, "fee-percent", envOr("SUANLI_FEE_PERCENT", "0"), "platform fee taken from provider earnings, in percent (0.01 precision)")
	f.BoolVar(&c.AllowSimulated, "allow-simulated", os.Getenv("SUANLI_ALLOW_SIMULATED") == "true", "let every account rent machines with simulated GPUs (default: only their owner)")
	f.StringVar(&c.StartCredit, "operator-credit", "100", "credit given to the operator account when it is created, in dollars")
	f.DurationVar(&c.Heartbeat, "heartbeat", 10*time.Second, "agent heartbeat interval (long-poll length)")
	f.DurationVar(&c.SuspectAfter, "suspect-after", 0, "silence after which a host is suspect and its offers hidden (default heartbeat + 10s)")
	f.DurationVar(&c.LostAfter, "lost-after", 2*time.Minute, "silence after which a host's instances are lost")
	f.DurationVar(&c.FailoverGrace, "failover-grace", 5*time.Minute, "after a start of the control plane, no host is declared lost before this (at least --lost-after)")
	f.DurationVar(&c.Settle, "settle-every", time.Hour, "how often the close settles running meters into the ledger (at multiples of it: 1h closes on the hour);\n"+
		"costs shown (show, budgets, quotes, billing balance's accrued) are always settled + accrued, so this changes no amount anyone sees")
	f.StringVar(&c.AuditRetention, "audit-retention", envOr("SUANLI_AUDIT_RETENTION", "186d"), "how long audit entries are kept (six calendar months by default); env SUANLI_AUDIT_RETENTION")
	f.DurationVar(&c.AuditEvery, "audit-checkpoint-every", 30*time.Second, "how often the audit log's head is signed (at most 60s)")
	f.StringVar(&c.TLS, "tls", envOr("SUANLI_TLS", "off"), "serve HTTPS: auto creates a CA and a server certificate in HOME/tls (clients and agents pin the CA); off serves HTTP; env SUANLI_TLS")
	f.StringSliceVar(&c.TLSHosts, "tls-hosts", nil, "extra DNS names or IPs for the server certificate (localhost, 127.0.0.1, the hostname and the listen host are always in)")
	f.BoolVar(&c.VastAPI, "vast-api", envOr("SUANLI_VAST_API", "true") != "false", "serve the Vast.ai API (/api/v0, /api/v1) at the same address, so vastai CLIs and SDKs work with VAST_URL set to this server; env SUANLI_VAST_API")
	f.DurationVar(&c.LeaseTTL, "lease-ttl", envDuration("SUANLI_LEASE_TTL", 10*time.Second), "replicas on one database: when the replica running the singleton loops (hour close, host leases,\n"+
		"bookings) dies, another takes them over within this; env SUANLI_LEASE_TTL")
	f.StringVar(&c.HeartbeatAddr, "heartbeat-addr", os.Getenv("SUANLI_HEARTBEAT_ADDR"), "UDP address of the light heartbeat channel: agents send a signed datagram per heartbeat instead of an HTTP sync\n"+
		"(HOST:PORT; default: the --addr host and port number, on UDP; off: none, agents long-poll over HTTP); env SUANLI_HEARTBEAT_ADDR")
	f.StringVar(&c.SSHCAKey, "ssh-ca-key", os.Getenv("SUANLI_SSH_CA_KEY"), "the SSH certificate authority's key, created on first start (default HOME/ssh_ca_ed25519; replicas must share it); env SUANLI_SSH_CA_KEY")
}

// leaseConfig checks the host lease durations and returns them as the
// control plane takes them: heartbeat < suspect-after < lost-after ≤
// failover-grace, so that a host is suspect before it is lost and a restart
// never declares a host lost sooner than its lease would.
func (c *serverConfig) leaseConfig() (control.Config, error) {
	suspect := c.SuspectAfter
	if suspect == 0 {
		suspect = c.Heartbeat + 10*time.Second
	}
	switch {
	case c.Heartbeat < 100*time.Millisecond:
		return control.Config{}, suanli.FieldErrorf("heartbeat", "%s: give at least 100ms", c.Heartbeat)
	case suspect <= c.Heartbeat:
		return control.Config{}, suanli.FieldErrorf("suspect-after", "%s: must be longer than --heartbeat (%s), or a host that answers on time is suspect", suspect, c.Heartbeat)
	case c.LostAfter <= suspect:
		return control.Config{}, suanli.FieldErrorf("lost-after", "%s: must be longer than --suspect-after (%s)", c.LostAfter, suspect)
	case c.FailoverGrace < c.LostAfter:
		return control.Config{}, suanli.FieldErrorf("failover-grace", "%s: must be at least --lost-after (%s), so that a restart gives every host at least its lease", c.FailoverGrace, c.LostAfter)
	case c.Settle <= 0:
		return control.Config{}, suanli.FieldErrorf("settle-every", "%s: must be positive", c.Settle)
	case c.LeaseTTL < 300*time.Millisecond:
		return control.Config{}, suanli.FieldErrorf("lease-ttl", "%s: give at least 300ms (it is renewed every third of it)", c.LeaseTTL)
	}
	return control.Config{HeartbeatInterval: c.Heartbeat, SuspectAfter: suspect, LostAfter: c.LostAfter,
		FailoverGrace: c.FailoverGrace, SettleInterval: c.Settle, LeaseTTL: c.LeaseTTL}, nil
}

// envDuration reads a duration from the environment, def when unset or
// malformed (the flag's own parsing reports a malformed flag).
func envDuration(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(k)); err == nil {
		return d
	}
	return def
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// running is a started control plane.
type running struct {
	svc      *control.Service
	api      *shttp.Server
	store    *sqlstore.DB
	srv      *http.Server
	url      string
	operator *suanli.Account
	caPEM    []byte // the pinned TLS CA; nil when serving HTTP
	done     chan struct{}
}

func newLogger() *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("SUANLI_LOG") == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func parseFeeBP(s string) (int64, error) {
	m, err := suanli.ParseMoney(s) // percent with up to 6 decimals
	if err != nil || m < 0 || m > suanli.Dollars(100) {
		return 0, suanli.FieldErrorf("fee-percent", "%q: give a percentage between 0 and 100", s)
	}
	return int64(m / 10_000), nil // 1% = 100 bp = 1,000,000 micro
}

// startControlPlane opens the store, bootstraps the operator account, and
// serves the API. The returned value's done channel closes when ctx ends
// and everything has stopped.
func startControlPlane(ctx context.Context, a *app, c serverConfig, logger *slog.Logger) (*running, error) {
	// The offer index lives in memory: collect less often than Go's default
	// (GOGC in the environment overrides it; see internal/gctune).
	logger.Debug("garbage collector", "gogc", gctune.Apply(gctune.DefaultPercent))
	if err := os.MkdirAll(a.home, 0o700); err != nil {
		return nil, fmt.Errorf("create home %s: %w", a.home, err)
	}
	dsn := c.DB
	if dsn == "" {
		dsn = filepath.Join(a.home, "suanli.db")
	}
	fee, err := parseFeeBP(c.Fee)
	if err != nil {
		return nil, err
	}
	credit, err := suanli.ParseMoney(c.StartCredit)
	if err != nil {
		return nil, suanli.FieldErrorf("operator-credit", "%v", err)
	}
	cfg, err := c.leaseConfig()
	if err != nil {
		return nil, err
	}
	retention, err := parseLifetime(c.AuditRetention)
	if err != nil || retention < 24*time.Hour {
		return nil, suanli.FieldErrorf("audit-retention", "%q: give at least one day, e.g. 186d", c.AuditRetention)
	}
	if c.AuditEvery <= 0 || c.AuditEvery > time.Minute {
		return nil, suanli.FieldErrorf("audit-checkpoint-every", "%s: between 1s and 60s", c.AuditEvery)
	}
	// The server's own keys live in its home, readable by it alone:
	// secret.key seals secrets at rest and signs instance tokens; audit.key
	// signs audit checkpoints. Both are made on first start.
	secretKey, err := auth.LoadOrCreateKey(filepath.Join(a.home, "secret.key"))
	if err != nil {
		return nil, err
	}
	auditKey, err := audit.LoadOrCreateKey(filepath.Join(a.home, "audit.key"))
	if err != nil {
		return nil, err
	}
	store, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	cfg.FeeBasisPoints, cfg.AllowSimulated = fee, c.AllowSimulated
	cfg.SecretKey, cfg.AuditKey, cfg.AuditHeadFile = secretKey, auditKey, filepath.Join(a.home, "audit.head")
	cfg.AuditInterval, cfg.AuditRetention = c.AuditEvery, retention
	// The home is locked: the last server on it is dead, so its singleton
	// lease is taken back at once rather than after it expires.
	// The file lists the origins of the servers that held this home, newest
	// last: their request claims are taken over at once too.
	replicaFile := filepath.Join(a.home, "replica")
	var past []string
	if b, err := os.ReadFile(replicaFile); err == nil {
		past = strings.Fields(string(b))
	}
	if len(past) > 0 {
		cfg.ReclaimLease = past[len(past)-1]
		store.SetDead(past)
	}
	past = append(past[max(0, len(past)-19):], store.Origin())
	if err := os.WriteFile(replicaFile, []byte(strings.Join(past, "\n")+"\n"), 0o600); err != nil {
		store.Close()
		return nil, err
	}
	svc, err := control.New(ctx, store, cfg, logger)
	if err != nil {
		store.Close()
		return nil, err
	}
	caKey := c.SSHCAKey
	if caKey == "" {
		caKey = filepath.Join(a.home, "ssh_ca_ed25519")
	}
	if svc.SSHAuthority, err = sshca.LoadOrCreate(caKey); err != nil {
		store.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		store.Close()
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, suanli.Errorf(suanli.EUNAVAILABLE, "address %s is in use: pass --addr HOST:PORT (port 0 picks a free one)", c.Addr)
		}
		return nil, fmt.Errorf("listen on %s: %w", c.Addr, err)
	}
	url := "http://" + ln.Addr().String()
	var caPEM []byte
	switch c.TLS {
	case "off", "":
	case "auto":
		b, err := tlsca.LoadOrCreate(filepath.Join(a.home, "tls"), tlsHosts(c.Addr, c.TLSHosts), time.Now())
		if err != nil {
			ln.Close()
			store.Close()
			return nil, err
		}
		ln, url, caPEM = tls.NewListener(ln, b.ServerConfig()), "https://"+ln.Addr().String(), b.CAPEM
		logger.Info("serving https", "ca_fingerprint", b.Fingerprint(), "ca_file", filepath.Join(a.home, "tls", tlsca.CAFile))
	default:
		ln.Close()
		store.Close()
		return nil, suanli.FieldErrorf("tls", "%q: use auto or off", c.TLS)
	}
	op, err := bootstrapOperator(ctx, a, svc, url, credit, string(caPEM))
	if err != nil {
		ln.Close()
		store.Close()
		return nil, err
	}
	api := shttp.NewServer(svc, logger)
	web, err := console.New(console.Config{Service: svc, Logger: logger, Limiter: api.Limiter, Lockout: api.Lockout,
		Catalog: func() ([]advisor.CatalogRow, error) { return advisecli.LoadCatalog(a.home) }})
	if err != nil {
		ln.Close()
		store.Close()
		return nil, err
	}
	web.Register(api.Mux())
	var vast *vastapi.Handler
	if c.VastAPI {
		vast = vastapi.New(svc, logger, vastapi.Config{Lockout: api.Lockout, Limiter: api.Limiter})
		vast.Register(api.Mux())
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		WriteTimeout: 2*c.Heartbeat + time.Minute, IdleTimeout: 2 * time.Minute}
	// The heartbeat table knows every machine before the first beat comes:
	// after a restart agents keep beating, with no full sync each.
	if err := svc.RefreshBeats(ctx); err != nil {
		ln.Close()
		store.Close()
		return nil, err
	}
	beats, err := listenHeartbeats(c, ln.Addr().(*net.TCPAddr), svc, logger)
	if err != nil {
		ln.Close()
		store.Close()
		return nil, err
	}
	api.Registry().MustRegister(svc.Beats.Collector())
	r := &running{svc: svc, api: api, store: store, srv: srv, url: url, operator: op, caPEM: caPEM, done: make(chan struct{})}
	loopsDone, beatsDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(loopsDone)
		svc.Run(ctx)
	}()
	go func() {
		defer close(beatsDone)
		svc.RunHeartbeats(ctx) // every replica flushes its own heartbeat table
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("serve", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		if vast != nil {
			vast.Close()
		}
		if beats != nil {
			beats.Close()
		}
		<-loopsDone
		<-beatsDone
		store.Close()
		close(r.done)
	}()
	logger.Info("control plane listening", "url", url, "db", sqlstore.RedactDSN(dsn), "vast_api", c.VastAPI, "replica", store.Origin())
	return r, nil
}

// listenHeartbeats opens the light heartbeat channel (package heartbeat) on
// UDP and tells the service to advertise it: by default on the HTTP
// listener's host and port number (a free port when that one is taken and
// --addr asked for port 0). It returns nil when --heartbeat-addr is off.
func listenHeartbeats(c serverConfig, tcp *net.TCPAddr, svc *control.Service, logger *slog.Logger) (*heartbeat.Server, error) {
	addr := c.HeartbeatAddr
	switch addr {
	case "off":
		logger.Info("light heartbeat channel off: agents long-poll")
		return nil, nil
	case "":
		addr = net.JoinHostPort(hostOf(c.Addr), strconv.Itoa(tcp.Port))
	}
	hb, err := heartbeat.Listen(addr, svc.Beats, logger)
	if err != nil && c.HeartbeatAddr == "" && strings.HasSuffix(c.Addr, ":0") {
		hb, err = heartbeat.Listen(net.JoinHostPort(hostOf(c.Addr), "0"), svc.Beats, logger)
	}
	if err != nil {
		return nil, suanli.Errorf(suanli.EUNAVAILABLE, "heartbeat channel on udp %s: %v: pass --heartbeat-addr HOST:PORT, or off", addr, err)
	}
	// Agents reach it on the host they sync with, unless it listens on one
	// address only.
	ua := hb.Addr()
	adv := net.JoinHostPort("", strconv.Itoa(ua.Port))
	if !ua.IP.IsUnspecified() {
		adv = ua.String()
	}
	svc.SetHeartbeatAddr(adv)
	logger.Info("light heartbeat channel listening", "udp", ua.String(), "advertised", adv)
	return hb, nil
}

// hostOf returns the host part of HOST:PORT ("" when there is none).
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return h
}

// bootstrapOperator makes sure the operator account exists and that the
// home's client config holds a working key for it.
func bootstrapOperator(ctx context.Context, a *app, svc *control.Service, url string, credit suanli.Money, caPEM string) (*suanli.Account, error) {
	op, err := svc.Store.FindAccountByName(ctx, "operator")
	if suanli.ErrorCode(err) == suanli.ENOTFOUND {
		var secret string
		op, secret, err = svc.CreateAccountWithKey(ctx, "operator", suanli.RoleOperator, credit)
		if err != nil {
			return nil, err
		}
		return op, writeClientConfig(a.configPath(), clientConfig{Server: url, APIKey: secret, CAPEM: caPEM})
	} else if err != nil {
		return nil, err
	}
	cfg, _ := readClientConfig(a.configPath())
	if cfg.APIKey != "" {
		if p, err := svc.Authenticate(ctx, cfg.APIKey, "127.0.0.1"); err == nil && p.AccountID == op.ID {
			cfg.Server, cfg.CAPEM = url, caPEM
			return op, writeClientConfig(a.configPath(), cfg)
		}
	}
	secret, err := svc.CreateKey(ctx, op.ID, "default", []string{suanli.ScopeAll}, 365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	return op, writeClientConfig(a.configPath(), clientConfig{Server: url, APIKey: secret, CAPEM: caPEM})
}

// lockHome takes an exclusive lock on the home so two `up`s cannot share it.
func lockHome(home string) (func(), error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	unlock, holder, err := tryLock(filepath.Join(home, "up.lock"))
	if err == nil && unlock == nil {
		err = suanli.Errorf(suanli.ECONFLICT, "another suanli is already running on home %s (pid %s): stop it, or pass --home DIR for a separate marketplace", home, holder)
	}
	return unlock, err
}

// tryLock takes an exclusive lock on the file at path (made 0600) without
// waiting, and writes this process's pid in it. When another process holds
// it, unlock is nil and holder is that process's pid, as it wrote it.
func tryLock(path string) (unlock func(), holder string, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, "", err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, "", err
		}
		b, _ := os.ReadFile(path)
		return nil, strings.TrimSpace(string(b)), nil
	}
	f.Truncate(0)
	f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, "", nil
}

func newServerCmd(a *app) *cobra.Command {
	var c serverConfig
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane (API, console, settlement, host leases)",
		Long: `Run the control plane alone. Agents join it with a token from
'suanli host join-token'; clients reach it with --server or SUANLI_SERVER.

On first start it creates the operator account and writes its API key to
HOME/config.json (mode 0600), and makes the server's keys, readable by it
alone: HOME/secret.key (seals secrets at rest, signs instance tokens) and
HOME/audit.key (signs audit checkpoints; HOME/audit.head keeps the newest
checkpoint outside the database). Back them up with the database: secrets
sealed under a lost secret.key do not open again.

Accounts are created by the operator (suanli admin accounts create NAME);
there is no self-service signup.

Several servers can share one PostgreSQL database (--db postgres://…, each
with its own --home holding copies of the same keys): any of them serves any
request, and the singleton loops (hour close, host leases, bookings) run on
the one holding the lease, moving within --lease-ttl when it dies. 'suanli
cluster status' shows which; docs/deploy.md has the details.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			unlock, err := lockHome(a.home)
			if err != nil {
				return err
			}
			defer unlock()
			logger := newLogger()
			r, err := startControlPlane(cmd.Context(), a, c, logger)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Suanli control plane at %s (operator key in %s)\n", r.url, a.configPath())
			if r.caPEM != nil {
				ca, _ := tlsca.ParseCertPEM(r.caPEM)
				fmt.Fprintf(cmd.OutOrStdout(), "TLS CA %s (%s): clients and agents pin it\n", tlsca.Fingerprint(ca), filepath.Join(a.home, "tls", tlsca.CAFile))
			}
			<-r.done
			return nil
		},
	}
	c.flags(cmd)
	return cmd
}
