package control_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
	"github.com/suanli/suanli/internal/pgtest"
	"github.com/suanli/suanli/sqlstore"
)

// clock is a settable fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	svc      *control.Service
	clk      *clock
	renter   context.Context // the renter's principal
	host     context.Context
	agent    context.Context
	machine  int64
	renterID int64
}

func principalCtx(id int64, role string, scopes ...string) context.Context {
	return suanli.NewContextWithPrincipal(context.Background(), &suanli.Principal{AccountID: id, Role: role, Scopes: scopes})
}

// newFixture builds a control plane on a real SQLite file with a fake clock,
// a provider with one listed 2-GPU machine (not simulated), and a renter
// with credit.
func newFixture(t *testing.T, credit suanli.Money, cfg control.Config) *fixture {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, pgtest.StoreDSN(t, filepath.Join(t.TempDir(), "s.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := control.New(ctx, db, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)}
	svc.SetClock(clk.Now)
	host, _, err := svc.CreateAccountWithKey(ctx, "host", suanli.RoleUser, 0)
	if err != nil {
		t.Fatal(err)
	}
	renter, _, err := svc.CreateAccountWithKey(ctx, "renter", suanli.RoleUser, credit)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{svc: svc, clk: clk, renterID: renter.ID,
		renter: principalCtx(renter.ID, suanli.RoleUser, suanli.ScopeAll), host: principalCtx(host.ID, suanli.RoleUser, suanli.ScopeAll)}
	tok, err := svc.CreateJoinToken(f.host, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hw := suanli.Hardware{Hostname: "rig", CPUArch: "amd64", CPUCores: 8, RAMMB: 32 << 10, DiskFreeGB: 500,
		GPUs: []suanli.GPU{{Index: 0, UUID: "GPU-0", Name: "RTX 4090", MemoryMB: 24564}, {Index: 1, UUID: "GPU-1", Name: "RTX 4090", MemoryMB: 24564}}}
	j, err := svc.Join(ctx, suanli.JoinRequest{Token: tok.Token, Hardware: hw, Runtime: "process"})
	if err != nil {
		t.Fatal(err)
	}
	f.machine = j.MachineID
	f.agent = suanli.NewContextWithPrincipal(ctx, &suanli.Principal{AccountID: host.ID, Scopes: []string{suanli.ScopeAgent}, MachineID: j.MachineID})
	price, disk := suanli.Money(1_000_000), suanli.Money(730_000) // $1/GPU-h; $0.73/GB-month = $0.001/GB-h
	if _, err := svc.ListMachine(f.host, j.MachineID, suanli.ListingUpdate{PriceGPU: &price, PriceDisk: &disk}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) create(t *testing.T, c suanli.InstanceCreate) *suanli.Instance {
	t.Helper()
	c.OfferID, c.Image = f.machine, "img"
	if c.Cmd == nil {
		c.Cmd = []string{"train.sh"}
	}
	if c.GPUCount == 0 {
		c.GPUCount = 1
	}
	in, err := f.svc.CreateInstance(f.renter, c)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return in
}

// report sends the agent's view of instances.
func (f *fixture) report(t *testing.T, reps ...suanli.InstanceReport) {
	t.Helper()
	if _, err := f.svc.Sync(f.agent, &suanli.SyncRequest{Instances: reps}); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

func (f *fixture) status(t *testing.T, id int64) *suanli.Instance {
	t.Helper()
	in, err := f.svc.FindInstanceByID(f.renter, id)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestTelemetryShown: every field of the agent's latest telemetry reaches
// the instance as the API returns it, and none is left once it stops.
func TestTelemetryShown(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	in := f.create(t, suanli.InstanceCreate{})
	tm := suanli.Telemetry{CPUPercent: 150, MemoryMB: 512, DiskReadBytes: 1 << 30, DiskWriteBytes: 4 << 20,
		NetRxBytes: 7000, NetTxBytes: 3_000_000, GPUUtilPercent: 48.5, GPUMemoryMB: 71234, GPUTempC: 69, GPUPowerW: 721.05}
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning, Telemetry: &tm})
	if got := f.status(t, in.ID).Telemetry; got == nil || *got != tm {
		t.Errorf("telemetry = %+v, want %+v", got, tm)
	}
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusStopped})
	if got := f.status(t, in.ID).Telemetry; got != nil {
		t.Errorf("telemetry of a stopped instance = %+v, want none", got)
	}
}

func TestIdleAutoStop(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	busy := f.create(t, suanli.InstanceCreate{})
	idle := f.create(t, suanli.InstanceCreate{Guards: suanli.Guards{IdleStopMinutes: 30}})
	for i := 0; i < 40; i++ { // 40 minutes of reports
		f.report(t, suanli.InstanceReport{ID: busy.ID, Status: suanli.StatusRunning, Telemetry: &suanli.Telemetry{CPUPercent: 80}},
			suanli.InstanceReport{ID: idle.ID, Status: suanli.StatusRunning, Telemetry: &suanli.Telemetry{CPUPercent: 1}})
		f.clk.Add(time.Minute)
		if err := f.svc.CheckGuards(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := f.status(t, idle.ID).Status
		if i < 29 && got != suanli.StatusRunning {
			t.Fatalf("idle instance %s after %d minutes, want running until 30", got, i+1)
		}
	}
	got := f.status(t, idle.ID)
	if got.Status != suanli.StatusStopping || got.Desired != suanli.DesiredStopped || !strings.Contains(got.StatusMessage, "idle") {
		t.Errorf("idle instance: %s / %s (%q), want stopping by the idle guard", got.Status, got.Desired, got.StatusMessage)
	}
	if s := f.status(t, busy.ID).Status; s != suanli.StatusRunning {
		t.Errorf("busy instance: %s, want running", s)
	}
	if got.BurnRate != suanli.MulDiv(730_000*10, suanli.MicrosPerHour, suanli.MicrosPerMonth) {
		t.Errorf("burn after idle stop = %s, want storage only", got.BurnRate)
	}
	alerts, _ := f.svc.FindAlerts(f.renter, 10)
	if len(alerts) != 1 || alerts[0].Kind != "guard" {
		t.Errorf("alerts = %+v, want one guard alert", alerts)
	}
}

func TestMaxRuntimeAndStopWindow(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	ttl := f.create(t, suanli.InstanceCreate{Guards: suanli.Guards{MaxRuntime: suanli.Duration(2 * time.Hour), IdleStopMinutes: -1}})
	// 2026-11-10 is a Tuesday; the window opens at 14:00 UTC.
	win := f.create(t, suanli.InstanceCreate{Guards: suanli.Guards{StopWindows: []string{"Mon-Fri 14:00-16:00"}, IdleStopMinutes: -1}})
	f.report(t, suanli.InstanceReport{ID: ttl.ID, Status: suanli.StatusRunning}, suanli.InstanceReport{ID: win.ID, Status: suanli.StatusRunning})
	f.clk.Add(119 * time.Minute)
	f.svc.CheckGuards(context.Background())
	if s := f.status(t, ttl.ID).Status; s != suanli.StatusRunning {
		t.Fatalf("ttl instance at 1h59: %s", s)
	}
	if s := f.status(t, win.ID).Status; s != suanli.StatusRunning {
		t.Fatalf("window instance at 13:59: %s", s)
	}
	f.clk.Add(time.Minute)
	f.svc.CheckGuards(context.Background())
	for _, id := range []int64{ttl.ID, win.ID} {
		if got := f.status(t, id); got.Status != suanli.StatusStopping {
			t.Errorf("instance %d at 14:00: %s (%s), want stopping", id, got.Status, got.StatusMessage)
		}
	}
}

func TestBudgetAlertsWebhookAndHardStop(t *testing.T) {
	type delivery struct {
		event, sig string
		body       []byte
	}
	var mu sync.Mutex
	var got []delivery
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, delivery{r.Header.Get("X-Suanli-Event"), r.Header.Get("X-Suanli-Signature"), b})
		mu.Unlock()
	}))
	defer hook.Close()
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	ctx := context.Background()
	if _, err := f.svc.SetBudget(f.renter, suanli.Budget{Name: "ml", Scope: "project:ml", Amount: suanli.Dollars(1), Action: suanli.BudgetStop,
		WebhookURL: hook.URL, WebhookSecret: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	ml := f.create(t, suanli.InstanceCreate{Project: "ml", GPUCount: 1, Guards: suanli.Guards{IdleStopMinutes: -1}})
	other := f.create(t, suanli.InstanceCreate{Project: "web", GPUCount: 1, Guards: suanli.Guards{IdleStopMinutes: -1}})
	f.report(t, suanli.InstanceReport{ID: ml.ID, Status: suanli.StatusRunning}, suanli.InstanceReport{ID: other.ID, Status: suanli.StatusRunning})
	// $1/h: 50% after 30 minutes (plus a little storage).
	f.clk.Add(31 * time.Minute)
	f.svc.Store.Settle(ctx, f.clk.Now())
	if err := f.svc.CheckBudgets(ctx); err != nil {
		t.Fatal(err)
	}
	bs, _ := f.svc.FindBudgets(f.renter)
	if len(bs) != 1 || bs[0].Percent < 50 || bs[0].Percent >= 80 || bs[0].WebhookSecret != "" {
		t.Fatalf("budget after 31 min = %+v", bs[0])
	}
	if bs[0].Forecast <= bs[0].Spent {
		t.Errorf("forecast %s not above spend %s while burning", bs[0].Forecast, bs[0].Spent)
	}
	f.clk.Add(30 * time.Minute) // 61 minutes: over 100%
	f.svc.CheckBudgets(ctx)
	f.svc.CheckBudgets(ctx) // thresholds fire once per period
	if s := f.status(t, ml.ID); s.Status != suanli.StatusStopping || !strings.Contains(s.StatusMessage, "budget") {
		t.Errorf("ml instance after its budget ran out: %s (%s), want stopping", s.Status, s.StatusMessage)
	}
	if s := f.status(t, other.ID).Status; s != suanli.StatusRunning {
		t.Errorf("instance outside the budget's scope: %s, want running", s)
	}
	// New rentals in the scope are refused with the numbers; others are not.
	_, err := f.svc.CreateInstance(f.renter, suanli.InstanceCreate{OfferID: f.machine, Image: "x", GPUCount: 1, Project: "ml", Cmd: []string{"x"}})
	if suanli.ErrorCode(err) != suanli.EPAYMENTREQUIRED || !strings.Contains(err.Error(), `budget "ml"`) {
		t.Errorf("create in a spent budget: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var thresholds []int
	for _, d := range got {
		m := hmac.New(sha256.New, []byte("s3cret"))
		m.Write(d.body)
		if d.sig != "sha256="+hex.EncodeToString(m.Sum(nil)) {
			t.Errorf("webhook signature %q does not verify", d.sig)
		}
		var payload struct {
			Alert suanli.Alert `json:"alert"`
		}
		json.Unmarshal(d.body, &payload)
		thresholds = append(thresholds, payload.Alert.Threshold)
	}
	if len(got) != 3 || !containsAll(thresholds, 50, 80, 100) {
		t.Errorf("webhook deliveries: thresholds %v, want exactly 50, 80, 100 once each", thresholds)
	}
}

func containsAll(xs []int, want ...int) bool {
	for _, w := range want {
		found := false
		for _, x := range xs {
			found = found || x == w
		}
		if !found {
			return false
		}
	}
	return true
}

func TestZeroBalanceStopsAfterGrace(t *testing.T) {
	f := newFixture(t, suanli.Dollars(2), control.Config{ZeroBalanceGrace: 5 * time.Minute})
	in := f.create(t, suanli.InstanceCreate{GPUCount: 1, Guards: suanli.Guards{IdleStopMinutes: -1}})
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	ctx := context.Background()
	f.clk.Add(90 * time.Minute) // $1/h: $1.50 of $2 spent
	f.svc.CheckBudgets(ctx)
	alerts, _ := f.svc.FindAlerts(f.renter, 10)
	if len(alerts) == 0 || alerts[0].Kind != "low_balance" {
		t.Fatalf("alerts = %+v, want a low balance warning", alerts)
	}
	f.clk.Add(31 * time.Minute) // balance below zero now
	f.svc.CheckBudgets(ctx)
	if s := f.status(t, in.ID).Status; s != suanli.StatusRunning {
		t.Fatalf("at zero, within the grace: %s, want still running", s)
	}
	f.clk.Add(5 * time.Minute)
	f.svc.CheckBudgets(ctx)
	got := f.status(t, in.ID)
	if got.Status != suanli.StatusStopping || got.Desired != suanli.DesiredStopped || !strings.Contains(got.StatusMessage, "balance") {
		t.Errorf("after the grace: %s/%s (%s), want stopping for the balance", got.Status, got.Desired, got.StatusMessage)
	}
}

func TestQuoteItemizes(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{FeeBasisPoints: 1000})
	q, err := f.svc.Quote(f.renter, suanli.QuoteRequest{InstanceCreate: suanli.InstanceCreate{OfferID: f.machine, GPUCount: 2, DiskGB: 50},
		Hours: 10, EgressGB: 100})
	if err != nil {
		t.Fatal(err)
	}
	// compute 10 h × $2/h = $20; storage 50 GB × 10 h × $0.001 = $0.50; egress $0.
	want := map[string]suanli.Money{"compute (on-demand)": 20_000_000, "storage while running": 500_000, "storage while stopped (not in total)": 1_200_000}
	for _, l := range q.Lines {
		if w, ok := want[l.Item]; ok && l.Amount != w {
			t.Errorf("%s = %s, want %s", l.Item, l.Amount, w)
		}
	}
	if q.Total != 20_500_000 || q.FeeIncluded != 2_050_000 || q.PerHour != 2_050_000 {
		t.Errorf("total %s fee %s per hour %s", q.Total, q.FeeIncluded, q.PerHour)
	}
	if _, n, _ := f.svc.FindInstances(f.renter, suanli.InstanceFilter{}); n != 0 {
		t.Errorf("a quote created %d instances", n)
	}
}

// TestCostReportReconciles checks that every grouping of the cost report
// sums to the ledger's charges.
func TestCostReportReconciles(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	ctx := context.Background()
	a := f.create(t, suanli.InstanceCreate{Project: "a", Tags: map[string]string{"team": "x"}})
	b := f.create(t, suanli.InstanceCreate{Project: "b", Tags: map[string]string{"team": "y"}})
	f.report(t, suanli.InstanceReport{ID: a.ID, Status: suanli.StatusRunning}, suanli.InstanceReport{ID: b.ID, Status: suanli.StatusRunning})
	for i := 0; i < 5; i++ {
		f.clk.Add(17 * time.Minute)
		f.svc.Store.Settle(ctx, f.clk.Now())
	}
	f.svc.DestroyInstance(f.renter, a.ID)
	f.clk.Add(time.Hour)
	f.svc.Store.Settle(ctx, f.clk.Now())
	bal, _ := f.svc.Balance(f.renter)
	for _, by := range []string{"project", "tag:team", "day", "service", "instance"} {
		rep, err := f.svc.CostReport(f.renter, by, f.clk.Now().Add(-30*24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		var sum suanli.Money
		for _, r := range rep.Rows {
			sum += r.Amount
		}
		if sum != rep.Total || rep.Total != bal.Spent || rep.Total != suanli.Dollars(100)-bal.Balance {
			t.Errorf("by %s: rows %s, total %s, ledger spent %s, balance drop %s", by, sum, rep.Total, bal.Spent, suanli.Dollars(100)-bal.Balance)
		}
	}
	inv, err := f.svc.Invoice(f.renter, "2026-11")
	if err != nil || inv.Total != bal.Spent || inv.Credits != suanli.Dollars(100) {
		t.Errorf("invoice total %s credits %s (%v), want %s and $100", inv.Total, inv.Credits, err, bal.Spent)
	}
	e, err := f.svc.Earnings(f.host, f.clk.Now().Add(-24*time.Hour), f.clk.Now().Add(time.Second))
	if err != nil || e.Gross != bal.Spent || e.Net != bal.Spent || e.Available != bal.Spent {
		t.Errorf("earnings %+v (%v), want gross = net = available = %s", e, err, bal.Spent)
	}
	if _, err := f.svc.Payout(f.host, 0); err != nil {
		t.Fatal(err)
	}
	e, _ = f.svc.Earnings(f.host, f.clk.Now().Add(-24*time.Hour), f.clk.Now().Add(time.Second))
	if e.Available != 0 || e.PaidOut != bal.Spent {
		t.Errorf("after payout: available %s, paid out %s", e.Available, e.PaidOut)
	}
	chk, _ := f.svc.Store.CheckLedger(ctx)
	if chk.PostingSum != 0 || len(chk.Mismatched) > 0 {
		t.Errorf("ledger: %+v", chk)
	}
}

func TestQuotaForNewAccounts(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	a := f.create(t, suanli.InstanceCreate{GPUCount: 1})
	f.create(t, suanli.InstanceCreate{GPUCount: 1})
	_, err := f.svc.CreateInstance(f.renter, suanli.InstanceCreate{OfferID: f.machine, Image: "x", GPUCount: 1, Cmd: []string{"x"}})
	if suanli.ErrorCode(err) != suanli.EFORBIDDEN || !strings.Contains(err.Error(), "new accounts (first 7 days) may run 2 GPUs at once") {
		t.Fatalf("third GPU for a new account: %v", err)
	}
	// Stopped instances do not count; starting one again does.
	f.svc.StopInstance(f.renter, a.ID)
	f.report(t, suanli.InstanceReport{ID: a.ID, Status: suanli.StatusStopped})
	f.clk.Add(8 * 24 * time.Hour) // no longer new: 64 GPUs
	if _, err := f.svc.StartInstance(f.renter, a.ID); err != nil {
		t.Fatalf("start after a week: %v", err)
	}
	op := principalCtx(999, suanli.RoleOperator, suanli.ScopeAll)
	if err := f.svc.SetQuota(op, f.renterID, suanli.Quota{GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.SetQuota(f.renter, f.renterID, suanli.Quota{GPUs: 100}); suanli.ErrorCode(err) != suanli.EFORBIDDEN {
		t.Errorf("a renter raising their own quota: %v", err)
	}
	_, err = f.svc.StartInstance(f.renter, a.ID)
	if err != nil {
		t.Fatalf("already running: %v", err)
	}
}

func TestReliabilityFollowsUptime(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	ctx := context.Background()
	for i := 0; i < 24*8; i++ { // eight days of hourly lease checks, heartbeating
		f.report(t)
		f.clk.Add(time.Hour)
		f.report(t)
		if err := f.svc.CheckLeases(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := f.svc.FindMachineByID(f.host, f.machine)
	if m.Reliability < 0.95 {
		t.Errorf("a week of uptime: reliability %.3f, want ≥ 0.95", m.Reliability)
	}
	o, _ := f.svc.FindOfferByID(f.renter, f.machine)
	if d := o.Reliability - m.Reliability; d > 0.005 || d < -0.005 {
		t.Errorf("offer reliability %.3f, machine %.3f: the offer must follow within half a percent", o.Reliability, m.Reliability)
	}
}

// addMachine joins and lists another 2-GPU machine for the fixture's host,
// returning its id and its agent's context.
func (f *fixture) addMachine(t *testing.T, price suanli.Money) (int64, context.Context) {
	t.Helper()
	tok, err := f.svc.CreateJoinToken(f.host, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hw := suanli.Hardware{Hostname: "rig2", CPUArch: "amd64", CPUCores: 8, RAMMB: 32 << 10, DiskFreeGB: 500,
		GPUs: []suanli.GPU{{Index: 0, UUID: "B-0", Name: "RTX 4090", MemoryMB: 24564}, {Index: 1, UUID: "B-1", Name: "RTX 4090", MemoryMB: 24564}}}
	j, err := f.svc.Join(context.Background(), suanli.JoinRequest{Token: tok.Token, Hardware: hw, Runtime: "process"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ListMachine(f.host, j.MachineID, suanli.ListingUpdate{PriceGPU: &price}); err != nil {
		t.Fatal(err)
	}
	p := suanli.PrincipalFromContext(f.agent)
	return j.MachineID, suanli.NewContextWithPrincipal(context.Background(), &suanli.Principal{AccountID: p.AccountID, Scopes: []string{suanli.ScopeAgent}, MachineID: j.MachineID})
}

func TestRestartOnFailure(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	two := 2
	in := f.create(t, suanli.InstanceCreate{Restart: suanli.RestartPolicy{Policy: suanli.RestartOnFailure, MaxRestarts: &two}})
	one, zero := 1, 0
	for round := 1; round <= 3; round++ {
		f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
		f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusExited, ExitCode: &one})
		got := f.status(t, in.ID)
		if got.Status != suanli.StatusExited || got.Desired != suanli.DesiredStopped {
			t.Fatalf("round %d after exit: %s/%s", round, got.Status, got.Desired)
		}
		f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusStopped}) // the agent confirms the stop
		got = f.status(t, in.ID)
		if round <= 2 {
			if got.Status != suanli.StatusPending || got.Desired != suanli.DesiredRunning || got.Restarts != round {
				t.Fatalf("round %d: %s/%s restarts %d (%s), want pending/running", round, got.Status, got.Desired, got.Restarts, got.StatusMessage)
			}
		} else if got.Status != suanli.StatusExited || !strings.Contains(got.StatusMessage, "2 of 2 restarts used") {
			t.Fatalf("after max restarts: %s (%s)", got.Status, got.StatusMessage)
		}
	}
	// The agent's reason for an exit stays ahead of the restart note.
	why := f.create(t, suanli.InstanceCreate{Restart: suanli.RestartPolicy{Policy: suanli.RestartOnFailure}})
	f.report(t, suanli.InstanceReport{ID: why.ID, Status: suanli.StatusRunning})
	code143 := 143
	f.report(t, suanli.InstanceReport{ID: why.ID, Status: suanli.StatusExited, ExitCode: &code143, Message: "stopped by the host agent: disk use 1.1 GB exceeded the rented 1 GB"})
	if got := f.status(t, why.ID); !strings.HasPrefix(got.StatusMessage, "stopped by the host agent: disk use") || !strings.Contains(got.StatusMessage, "restarting (1 of 3)") {
		t.Errorf("exit with the agent's reason under on-failure: %q", got.StatusMessage)
	}
	// --max-restarts 0 means none, not the default.
	zeroMax := 0
	none := f.create(t, suanli.InstanceCreate{Restart: suanli.RestartPolicy{Policy: suanli.RestartOnFailure, MaxRestarts: &zeroMax}})
	f.report(t, suanli.InstanceReport{ID: none.ID, Status: suanli.StatusRunning})
	f.report(t, suanli.InstanceReport{ID: none.ID, Status: suanli.StatusExited, ExitCode: &one})
	if got := f.status(t, none.ID); got.Status != suanli.StatusExited || got.RestartPending || !strings.Contains(got.StatusMessage, "0 of 0 restarts used") {
		t.Errorf("max restarts 0: %s (%s), want exited and not restarted", got.Status, got.StatusMessage)
	}
	// A clean exit is not a failure.
	ok := f.create(t, suanli.InstanceCreate{Restart: suanli.RestartPolicy{Policy: suanli.RestartOnFailure}})
	f.report(t, suanli.InstanceReport{ID: ok.ID, Status: suanli.StatusRunning})
	f.report(t, suanli.InstanceReport{ID: ok.ID, Status: suanli.StatusExited, ExitCode: &zero})
	f.report(t, suanli.InstanceReport{ID: ok.ID, Status: suanli.StatusStopped})
	if got := f.status(t, ok.ID); got.Status != suanli.StatusExited || got.Restarts != 0 {
		t.Errorf("exit 0 under on-failure: %s restarts %d", got.Status, got.Restarts)
	}
}

// TestRecoverElsewhere loses a managed job's host and checks that the job
// is relaunched once on the other machine, that compute on the lost host
// was billed only up to its last heartbeat, and that the healed host is
// told to drop its copy.
func TestRecoverElsewhere(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{LostAfter: 2 * time.Minute, FailoverGrace: time.Minute})
	ctx := context.Background()
	b, bAgent := f.addMachine(t, 1_200_000)
	in := f.create(t, suanli.InstanceCreate{Restart: suanli.RestartPolicy{Recover: "elsewhere"}, Guards: suanli.Guards{IdleStopMinutes: -1}})
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	lastBeat := f.clk.Now()
	// Machine A goes silent; B keeps heartbeating.
	for i := 0; i < 6; i++ {
		f.clk.Add(30 * time.Second)
		if _, err := f.svc.Sync(bAgent, &suanli.SyncRequest{}); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.CheckLeases(ctx); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.CheckRecoveries(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := f.status(t, in.ID)
	if got.MachineID != b || got.Moves != 1 || got.Desired != suanli.DesiredRunning || got.Status != suanli.StatusPending {
		t.Fatalf("after A was lost: machine %d (want %d), moves %d, %s/%s (%s)", got.MachineID, b, got.Moves, got.Status, got.Desired, got.StatusMessage)
	}
	if got.Rates.ComputePerHour != 1_200_000 {
		t.Errorf("rate after the move %s, want B's $1.20", got.Rates.ComputePerHour)
	}
	sum, _ := f.svc.FindCharges(f.renter, suanli.ChargeFilter{InstanceID: &in.ID})
	if c := sum.ByKind[suanli.MeterCompute]; c != 0 {
		t.Errorf("compute billed %s, want 0: it ran on A from creation until A's last heartbeat, the same instant", c)
	}
	_ = lastBeat
	// B's agent is told to run it, with the attempt in its env.
	resp, err := f.svc.Sync(bAgent, &suanli.SyncRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Instances) != 1 || resp.Instances[0].ID != in.ID || resp.Instances[0].Env["SUANLI_RECOVERED"] != "1" {
		t.Fatalf("B's desired state: %+v", resp.Instances)
	}
	// A heals: its desired state no longer holds the instance, so it stops its copy.
	resp, err = f.svc.Sync(f.agent, &suanli.SyncRequest{Instances: []suanli.InstanceReport{{ID: in.ID, Status: suanli.StatusRunning}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Instances) != 0 {
		t.Errorf("healed A still asked to hold %+v", resp.Instances)
	}
	if got := f.status(t, in.ID); got.MachineID != b {
		t.Errorf("A's late report moved the instance back to machine %d", got.MachineID)
	}
	// Running on B is billed at B's rate.
	if _, err := f.svc.Sync(bAgent, &suanli.SyncRequest{Instances: []suanli.InstanceReport{{ID: in.ID, Status: suanli.StatusRunning}}}); err != nil {
		t.Fatal(err)
	}
	f.clk.Add(time.Hour)
	got = f.status(t, in.ID)
	if got.Status != suanli.StatusRunning || got.BurnRate < 1_200_000 {
		t.Errorf("on B: %s burning %s", got.Status, got.BurnRate)
	}
}

// TestSearchFromLocation: with the renter's location, offers carry an
// estimated latency that filters and orders like any field.
func TestSearchFromLocation(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	us, _ := f.addMachine(t, 1_000_000)
	de, us2 := "DE", "US"
	if _, err := f.svc.ListMachine(f.host, f.machine, suanli.ListingUpdate{Country: &de}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ListMachine(f.host, us, suanli.ListingUpdate{Country: &us2}); err != nil {
		t.Fatal(err)
	}
	res, err := f.svc.SearchOffers(f.renter, suanli.OfferQuery{Query: "latency_ms<40", From: "FR"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Offers) != 1 || res.Offers[0].ID != f.machine || res.Offers[0].LatencyMS <= 0 {
		t.Fatalf("near FR: %+v", res.Offers)
	}
	res, err = f.svc.SearchOffers(f.renter, suanli.OfferQuery{Order: "latency_ms-", From: "48.85,2.35"})
	if err != nil || len(res.Offers) != 2 || res.Offers[0].ID != us {
		t.Fatalf("ordered by latency, farthest first: %+v %v", res.Offers, err)
	}
	// A query that neither filters nor orders by latency is answered by the
	// index; its page still carries the latency, and the index keeps none.
	res, err = f.svc.SearchOffers(f.renter, suanli.OfferQuery{Order: "dph", From: "FR"})
	if err != nil || len(res.Offers) != 2 || res.Offers[0].ID != us || res.Offers[1].LatencyMS <= 0 || res.Offers[0].LatencyMS <= res.Offers[1].LatencyMS {
		t.Fatalf("ordered by price from FR: %v %v", offerSummary(res), err)
	}
	if res, err = f.svc.SearchOffers(f.renter, suanli.OfferQuery{Order: "dph"}); err != nil || res.Offers[0].LatencyMS != 0 {
		t.Fatalf("without a location, latency is unknown: %+v %v", res.Offers, err)
	}
	if _, err := f.svc.SearchOffers(f.renter, suanli.OfferQuery{From: "Atlantis"}); suanli.ErrorCode(err) != suanli.EINVALID {
		t.Errorf("unknown location: %v", err)
	}
}

func offerSummary(r *suanli.OfferResult) string {
	if r == nil {
		return "no result"
	}
	var b strings.Builder
	for _, o := range r.Offers {
		fmt.Fprintf(&b, "[id %d %s dph %s latency %.1f] ", o.ID, o.Country, o.DPHTotal, o.LatencyMS)
	}
	return b.String()
}

// TestUtilisationHint: a real-GPU instance whose GPUs averaged under 70%
// for an hour gets a hint in show; a busy one does not; none before an hour.
func TestUtilisationHint(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	lazy := f.create(t, suanli.InstanceCreate{GPUCount: 1, Guards: suanli.Guards{IdleStopMinutes: -1}})
	busy := f.create(t, suanli.InstanceCreate{GPUCount: 1, Guards: suanli.Guards{IdleStopMinutes: -1}})
	for i := 0; i <= 60; i++ {
		f.report(t, suanli.InstanceReport{ID: lazy.ID, Status: suanli.StatusRunning, Telemetry: &suanli.Telemetry{CPUPercent: 50, GPUUtilPercent: 30}},
			suanli.InstanceReport{ID: busy.ID, Status: suanli.StatusRunning, Telemetry: &suanli.Telemetry{CPUPercent: 50, GPUUtilPercent: 95}})
		if i == 30 {
			if h := f.status(t, lazy.ID).Hints; len(h) != 0 {
				t.Errorf("hint after 30 minutes: %q, want none before an hour", h)
			}
		}
		f.clk.Add(time.Minute)
	}
	if h := f.status(t, lazy.ID).Hints; len(h) != 1 || !strings.Contains(h[0], "averaged 30%") {
		t.Errorf("hints of the instance at 30%% GPU for an hour: %q", h)
	}
	if h := f.status(t, busy.ID).Hints; len(h) != 0 {
		t.Errorf("hints of the busy instance: %q, want none", h)
	}
}

// TestDestroyAfterStopped: the opt-in guard destroys an instance (and its
// disk, ending its storage charge) once it has been stopped for N days;
// without it a stopped instance stays.
func TestDestroyAfterStopped(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	optIn := f.create(t, suanli.InstanceCreate{GPUCount: 1, Guards: suanli.Guards{DestroyAfterStoppedDays: 2}})
	kept := f.create(t, suanli.InstanceCreate{GPUCount: 1})
	f.report(t, suanli.InstanceReport{ID: optIn.ID, Status: suanli.StatusRunning}, suanli.InstanceReport{ID: kept.ID, Status: suanli.StatusRunning})
	for _, id := range []int64{optIn.ID, kept.ID} {
		if _, err := f.svc.StopInstance(f.renter, id); err != nil {
			t.Fatal(err)
		}
	}
	f.report(t, suanli.InstanceReport{ID: optIn.ID, Status: suanli.StatusStopped}, suanli.InstanceReport{ID: kept.ID, Status: suanli.StatusStopped})
	check := func(after time.Duration) {
		t.Helper()
		f.clk.Add(after)
		f.report(t, suanli.InstanceReport{ID: optIn.ID, Status: suanli.StatusStopped}, suanli.InstanceReport{ID: kept.ID, Status: suanli.StatusStopped})
		if err := f.svc.CheckGuards(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	check(47 * time.Hour)
	if s := f.status(t, optIn.ID).Status; s != suanli.StatusStopped {
		t.Fatalf("after 47 hours stopped: %s, want still stopped", s)
	}
	check(2 * time.Hour)
	got := f.status(t, optIn.ID)
	if got.Status != suanli.StatusDestroyed || !strings.Contains(got.StatusMessage, "stopped for 2 days") {
		t.Errorf("after 49 hours stopped: %s (%q), want destroyed by the guard", got.Status, got.StatusMessage)
	}
	if got.BurnRate != 0 {
		t.Errorf("burn after the destroy: %s, want 0 (no more storage)", got.BurnRate)
	}
	if s := f.status(t, kept.ID).Status; s != suanli.StatusStopped {
		t.Errorf("instance without the guard: %s, want stopped", s)
	}
}

// TestOfferCO2PerHour: offers carry their estimated emissions at full load
// (advisor.OfferCO2PerHour), from the host's country, following the free
// capacity, and the query language filters on it. Both machines: 2 × RTX
// 4090 (450 W) and 8 cores (5 W each) at the plug: 940 W, in Poland (660
// g/kWh) 620.4 g/h, in the US (370) 347.8 g/h.
func TestOfferCO2PerHour(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	us, _ := f.addMachine(t, 1_000_000)
	o, err := f.svc.FindOfferByID(f.renter, f.machine)
	if err != nil || o.CarbonIntensity != 0 || o.CO2PerHour != 0 {
		t.Fatalf("no country: offer %+v (%v), want intensity and co2_g_per_hour unknown (0)", o, err)
	}
	pl, us2 := "PL", "US"
	if _, err := f.svc.ListMachine(f.host, f.machine, suanli.ListingUpdate{Country: &pl}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ListMachine(f.host, us, suanli.ListingUpdate{Country: &us2}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]float64{f.machine: 620.4, us: 347.8} {
		o, err := f.svc.FindOfferByID(f.renter, id)
		if err != nil {
			t.Fatal(err)
		}
		if o.CO2PerHour != want {
			t.Errorf("offer %d: co2_g_per_hour %v, want %v", id, o.CO2PerHour, want)
		}
	}
	res, err := f.svc.SearchOffers(f.renter, suanli.OfferQuery{Query: "co2_g_per_hour<500"})
	if err != nil || len(res.Offers) != 1 || res.Offers[0].ID != us {
		t.Fatalf("co2_g_per_hour<500: %v %v, want the US machine only", offerSummary(res), err)
	}
	res, err = f.svc.SearchOffers(f.renter, suanli.OfferQuery{Order: "co2_g_per_hour"})
	if err != nil || len(res.Offers) != 2 || res.Offers[0].ID != us {
		t.Fatalf("ordered by co2_g_per_hour: %v %v, want the US machine first", offerSummary(res), err)
	}
	// Renting one GPU of the Polish machine leaves half: (450 + 20) W × 0.66.
	f.create(t, suanli.InstanceCreate{})
	if o, err = f.svc.FindOfferByID(f.renter, f.machine); err != nil {
		t.Fatal(err)
	}
	if o.NumGPUs != 1 || o.CO2PerHour != 310.2 {
		t.Errorf("after renting 1 GPU: %d GPUs, co2_g_per_hour %v, want 1, 310.2", o.NumGPUs, o.CO2PerHour)
	}
}
