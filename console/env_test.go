package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
	"github.com/suanli/suanli/agent/process"
	"github.com/suanli/suanli/auth"
	"github.com/suanli/suanli/console"
	"github.com/suanli/suanli/control"
	shttp "github.com/suanli/suanli/http"
	"github.com/suanli/suanli/internal/pgtest"
	"github.com/suanli/suanli/sqlstore"
)

// market is a control plane on a real SQLite store, served by the real API
// server with the console mounted, as cmd/suanli wires them. A renter and a
// provider account exist; the provider owns the machines.
type market struct {
	t           *testing.T
	srv         *httptest.Server
	svc         *control.Service
	console     *console.Console
	renterKey   string
	providerKey string
	renterID    int64
	providerID  int64
	machines    []int64
	clock       *fakeClock
	lockout     *auth.Lockout
}

// fakeClock is a settable clock for session expiry; zero means real time.
type fakeClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

type marketOptions struct {
	tls     bool
	control control.Config
	logger  *slog.Logger
}

func newMarket(t *testing.T, o marketOptions) *market {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, pgtest.StoreDSN(t, filepath.Join(t.TempDir(), "suanli.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	svc, err := control.New(ctx, db, o.control, logger)
	if err != nil {
		t.Fatal(err)
	}
	m := &market{t: t, svc: svc, clock: &fakeClock{}}
	api := shttp.NewServer(svc, logger)
	m.lockout = &auth.Lockout{MaxFailures: 5, Now: m.clock.now}
	m.console, err = console.New(console.Config{Service: svc, Logger: logger, Now: m.clock.now, Lockout: m.lockout})
	if err != nil {
		t.Fatal(err)
	}
	m.console.Register(api.Mux())
	if o.tls {
		m.srv = httptest.NewTLSServer(api)
	} else {
		m.srv = httptest.NewServer(api)
	}
	t.Cleanup(m.srv.Close)
	var r, p *suanli.Account
	if r, m.renterKey, err = svc.CreateAccountWithKey(ctx, "renter", suanli.RoleUser, suanli.Dollars(20)); err != nil {
		t.Fatal(err)
	}
	if p, m.providerKey, err = svc.CreateAccountWithKey(ctx, "provider", suanli.RoleUser, 0); err != nil {
		t.Fatal(err)
	}
	m.renterID, m.providerID = r.ID, p.ID
	// The renter is a new account, whose default quota (2 GPUs) the tests
	// would meet; raise it as an operator would.
	op := suanli.NewContextWithPrincipal(ctx, &suanli.Principal{Role: suanli.RoleOperator, Scopes: []string{suanli.ScopeAll}})
	if err := svc.SetQuota(op, r.ID, suanli.Quota{GPUs: 16, Instances: 16}); err != nil {
		t.Fatal(err)
	}
	return m
}

// as returns ctx acting as account id.
func as(id int64) context.Context {
	return suanli.NewContextWithPrincipal(context.Background(), &suanli.Principal{AccountID: id, Role: suanli.RoleUser, Scopes: []string{suanli.ScopeAll}})
}

// machineSpec is a simulated machine to join and list.
type machineSpec struct {
	host, gpus, region string
	price, minBid      suanli.Money
	diskEncryption     string // Hardware.DiskEncryption
}

// addMachine joins a machine with simulated GPUs for the provider and lists
// it. It returns the machine id and the agent's API key.
func (m *market) addMachine(s machineSpec) (int64, string, suanli.Hardware) {
	m.t.Helper()
	ctx := as(m.providerID)
	gpus, err := agent.ParseFakeGPUs(s.gpus)
	if err != nil {
		m.t.Fatal(err)
	}
	hw := suanli.Hardware{Hostname: s.host, OS: "linux", CPUArch: "amd64", CPUModel: "AMD EPYC 7543", CPUCores: 16 * len(gpus),
		RAMMB: int64(64<<10) * int64(len(gpus)), DiskFreeGB: 500, GPUs: gpus, DiskEncryption: s.diskEncryption}
	tok, err := m.svc.CreateJoinToken(ctx, time.Hour)
	if err != nil {
		m.t.Fatal(err)
	}
	j, err := m.svc.Join(ctx, suanli.JoinRequest{Token: tok.Token, Hardware: hw, Runtime: "process"})
	if err != nil {
		m.t.Fatal(err)
	}
	disk, inet := suanli.Money(100_000), suanli.Money(10_000)
	region := s.region
	if _, err := m.svc.ListMachine(ctx, j.MachineID, suanli.ListingUpdate{PriceGPU: &s.price, MinBid: &s.minBid, PriceDisk: &disk,
		PriceInetUp: &inet, PriceInetDown: &inet, Region: &region}); err != nil {
		m.t.Fatal(err)
	}
	m.machines = append(m.machines, j.MachineID)
	return j.MachineID, j.APIKey, hw
}

// startAgent runs the real agent with the process runtime for a machine
// until the test ends.
func (m *market) startAgent(machineID int64, key string, hw suanli.Hardware) {
	m.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ag, err := agent.New(agent.Config{Server: shttp.NewClient(m.srv.URL, key), Runtime: process.New(m.t.TempDir(), nil),
		MachineID: machineID, Hardware: hw, Version: "test", HeartbeatInterval: 2 * time.Second})
	if err != nil {
		m.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ag.Run(ctx)
	}()
	m.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// browser is a cookie-keeping HTTP client that does not follow redirects,
// so tests see each 303.
type browser struct {
	t      *testing.T
	m      *market
	client *http.Client
}

func (m *market) browser() *browser {
	jar, _ := cookiejar.New(nil)
	c := *m.srv.Client() // a copy: each browser keeps its own cookies
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: m.t, m: m, client: &c}
}

type page struct {
	status   int
	body     string
	location string
	header   http.Header
}

func (b *browser) get(path string) page {
	b.t.Helper()
	resp, err := b.client.Get(b.m.srv.URL + path)
	if err != nil {
		b.t.Fatal(err)
	}
	return read(b.t, resp)
}

func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	resp, err := b.client.PostForm(b.m.srv.URL+path, form)
	if err != nil {
		b.t.Fatal(err)
	}
	return read(b.t, resp)
}

func read(t *testing.T, resp *http.Response) page {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{status: resp.StatusCode, body: string(body), location: resp.Header.Get("Location"), header: resp.Header}
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf returns the first form token on a page.
func csrfOf(t *testing.T, p page) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no csrf token on the page (status %d):\n%s", p.status, p.body)
	}
	return m[1]
}

// signIn signs the browser in with key and returns the session's form token.
func (b *browser) signIn(key string) string {
	b.t.Helper()
	form := b.get("/signin")
	p := b.post("/signin", url.Values{"csrf": {csrfOf(b.t, form)}, "api_key": {key}, "next": {"/hosts"}})
	if p.status != http.StatusSeeOther || p.location != "/hosts" {
		b.t.Fatalf("sign in: %d %q\n%s", p.status, p.location, p.body)
	}
	return csrfOf(b.t, b.get("/hosts"))
}

func contains(t *testing.T, p page, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(p.body, w) {
			t.Errorf("page (status %d) lacks %q", p.status, w)
		}
	}
}
