package sqlstore_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func MustAccount(tb testing.TB, db *sqlstore.DB, name string, credit suanli.Money) *suanli.Account {
	tb.Helper()
	a := &suanli.Account{Name: name, Role: suanli.RoleUser, CreatedAt: t0}
	if err := db.CreateAccount(context.Background(), a); err != nil {
		tb.Fatalf("create account: %v", err)
	}
	if credit != 0 {
		if err := db.Credit(context.Background(), a.ID, credit, "test", t0); err != nil {
			tb.Fatalf("credit: %v", err)
		}
	}
	return a
}

func MustMachine(tb testing.TB, db *sqlstore.DB, owner int64, gpus int) *suanli.Machine {
	tb.Helper()
	hw := suanli.Hardware{Hostname: "h", CPUArch: "amd64", CPUCores: 16, RAMMB: 64 << 10, DiskFreeGB: 500}
	for i := 0; i < gpus; i++ {
		hw.GPUs = append(hw.GPUs, suanli.GPU{Index: i, UUID: "GPU-" + string(rune('a'+i)), Name: "RTX 4090", MemoryMB: 24576})
	}
	m := &suanli.Machine{Hardware: hw, Status: suanli.MachineOnline, LastHeartbeat: t0, CreatedAt: t0}
	key := &suanli.APIKey{Name: "agent", Prefix: "sl_live_x", Scopes: []string{suanli.ScopeAgent}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	ctx := context.Background()
	a, err := db.FindAccountByID(ctx, owner)
	if err != nil {
		tb.Fatal(err)
	}
	tok := "tok-" + a.Name + time.Now().String()
	if err := db.CreateJoinToken(ctx, tok, owner, t0.Add(time.Hour)); err != nil {
		tb.Fatal(err)
	}
	if err := db.JoinMachine(ctx, tok, m, key, "hash-"+tok, t0); err != nil {
		tb.Fatalf("join: %v", err)
	}
	l := suanli.Listing{Listed: true, PriceGPU: 400_000, PriceDisk: 100_000, PriceInetUp: 10_000, PriceInetDown: 10_000}
	if _, err := db.UpdateListing(ctx, m.ID, l, "DE", "eu"); err != nil {
		tb.Fatal(err)
	}
	return m
}

func plan(renter *suanli.Account, m *suanli.Machine, gpus []int) sqlstore.Placement {
	return sqlstore.Placement{Instance: &suanli.Instance{AccountID: renter.ID, MachineID: m.ID, HostID: m.OwnerID, Image: "img",
		DiskGB: 10, GPUCount: len(gpus), GPUIndexes: gpus, CPUCores: 4, RentalType: suanli.RentalOnDemand,
		Rates:  suanli.Rates{ComputePerHour: 400_000 * suanli.Money(len(gpus)), StoragePerMonth: 100_000, InetUpPerGB: 10_000, InetDownPerGB: 10_000},
		Status: suanli.StatusPending, Desired: suanli.DesiredRunning}, HourlyCost: 400_000, RAMMB: 1024}
}

func setStatus(t *testing.T, db *sqlstore.DB, id int64, status string, at time.Time) *suanli.Instance {
	t.Helper()
	in, err := db.UpdateInstance(context.Background(), id, at, at, func(i *suanli.Instance) error {
		i.Status = status
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateInstance(%d, %s): %v", id, status, err)
	}
	return in
}

func TestApplyPlanRechecksCapacity(t *testing.T) { EachBackend(t, testApplyPlanRechecksCapacity) }

func testApplyPlanRechecksCapacity(t *testing.T, b Backend) {
	db := b.MustOpen(t)
	ctx := t.Context()
	host := MustAccount(t, db, "host", 0)
	renter := MustAccount(t, db, "renter", suanli.Dollars(10))
	m := MustMachine(t, db, host.ID, 2)

	in, err := db.ApplyPlan(ctx, plan(renter, m, []int{0}), t0)
	if err != nil {
		t.Fatalf("ApplyPlan: %v", err)
	}
	if in.ID == 0 || in.Status != suanli.StatusPending {
		t.Fatalf("ApplyPlan = %+v", in)
	}
	// A stale plan for the same GPU is refused with conflict and says what is free.
	_, err = db.ApplyPlan(ctx, plan(renter, m, []int{0, 1}), t0)
	if suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Fatalf("second ApplyPlan on a taken GPU: err = %v, want conflict", err)
	}
	if got := suanli.ErrorMessage(err); got != "offer 1 has 1 free GPUs, you asked for 2: rent 1 or pick another offer" {
		t.Errorf("message = %q", got)
	}
	_, total, err := db.FindInstances(ctx, suanli.InstanceFilter{}, t0)
	if err != nil || total != 1 {
		t.Fatalf("instances after refused plan = %d (%v), want 1: a refused plan must leave nothing behind", total, err)
	}
	// Destroying frees the GPU.
	setStatus(t, db, in.ID, suanli.StatusDestroyed, t0.Add(time.Minute))
	if _, err := db.ApplyPlan(ctx, plan(renter, m, []int{0, 1}), t0); err != nil {
		t.Fatalf("ApplyPlan after destroy: %v", err)
	}
}

func TestApplyPlanNeedsOneHourOfBalance(t *testing.T) {
	EachBackend(t, testApplyPlanNeedsOneHourOfBalance)
}

func testApplyPlanNeedsOneHourOfBalance(t *testing.T, b Backend) {
	db := b.MustOpen(t)
	host := MustAccount(t, db, "host", 0)
	renter := MustAccount(t, db, "poor", 300_000) // $0.30 < $0.40/h
	m := MustMachine(t, db, host.ID, 1)
	_, err := db.ApplyPlan(t.Context(), plan(renter, m, []int{0}), t0)
	if suanli.ErrorCode(err) != suanli.EPAYMENTREQUIRED {
		t.Fatalf("err = %v, want payment_required", err)
	}
	if msg := suanli.ErrorMessage(err); msg != "balance $0.30 does not cover one hour of this rental ($0.40/h): add credit first" {
		t.Errorf("message = %q", msg)
	}
}

// TestBillingExact runs an instance through running/stopped/running/destroyed
// with settlements at random points, and checks that compute was billed for
// exactly the running time, storage for exactly the lifetime, and that the
// ledger balances.
func TestBillingExact(t *testing.T) { EachBackend(t, testBillingExact) }

func testBillingExact(t *testing.T, b Backend) {
	db := b.MustOpen(t)
	ctx := t.Context()
	host := MustAccount(t, db, "host", 0)
	renter := MustAccount(t, db, "renter", suanli.Dollars(100))
	m := MustMachine(t, db, host.ID, 1)
	p := plan(renter, m, []int{0})
	p.Instance.Rates.FeeBasisPoints = 1000 // 10%
	in, err := db.ApplyPlan(ctx, p, t0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	now := t0
	var running time.Duration
	status := suanli.StatusPending
	for step := 0; step < 300; step++ {
		d := time.Duration(rng.IntN(5_000_000)) * time.Microsecond
		if status == suanli.StatusRunning {
			running += d
		}
		now = now.Add(d)
		switch rng.IntN(3) {
		case 0:
			if _, err := db.Settle(ctx, now); err != nil {
				t.Fatal(err)
			}
		case 1:
			next := suanli.StatusRunning
			if status == suanli.StatusRunning {
				next = suanli.StatusStopped
			}
			setStatus(t, db, in.ID, next, now)
			status = next
		}
	}
	setStatus(t, db, in.ID, suanli.StatusDestroyed, now)
	if _, err := db.Settle(ctx, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	sum, err := db.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &in.ID})
	if err != nil {
		t.Fatal(err)
	}
	wantCompute, _ := suanli.Accrue(400_000, running.Microseconds(), suanli.MicrosPerHour, 0)
	if got := sum.ByKind[suanli.MeterCompute]; got != wantCompute {
		t.Errorf("compute charged %d, want %d for %s running", got, wantCompute, running)
	}
	wantStorage, _ := suanli.Accrue(100_000*10, now.Sub(t0).Microseconds(), suanli.MicrosPerMonth, 0)
	if got := sum.ByKind[suanli.MeterStorage]; got != wantStorage {
		t.Errorf("storage charged %d, want %d for %s of life", got, wantStorage, now.Sub(t0))
	}
	chk, err := db.CheckLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if chk.PostingSum != 0 || chk.BalanceSum != 0 || len(chk.Mismatched) > 0 || len(chk.UnbalancedTxn) > 0 {
		t.Errorf("ledger unbalanced: %+v", chk)
	}
	fees, _ := db.LedgerBalance(ctx, suanli.LedgerPlatformFees)
	earn, _ := db.LedgerBalance(ctx, suanli.LedgerEarnings(host.ID))
	if fees+earn != wantCompute+wantStorage || fees == 0 {
		t.Errorf("fees %d + earnings %d != charges %d", fees, earn, wantCompute+wantStorage)
	}
	bal, _ := db.LedgerBalance(ctx, suanli.LedgerBalance(renter.ID))
	if bal != suanli.Dollars(100)-wantCompute-wantStorage {
		t.Errorf("renter balance %s, want %s", bal, suanli.Dollars(100)-wantCompute-wantStorage)
	}
}

func TestUsageDeduplicatedBySequence(t *testing.T) { EachBackend(t, testUsageDeduplicatedBySequence) }

func testUsageDeduplicatedBySequence(t *testing.T, b Backend) {
	db := b.MustOpen(t)
	ctx := t.Context()
	host := MustAccount(t, db, "host", 0)
	renter := MustAccount(t, db, "renter", suanli.Dollars(10))
	m := MustMachine(t, db, host.ID, 1)
	in, err := db.ApplyPlan(ctx, plan(renter, m, []int{0}), t0)
	if err != nil {
		t.Fatal(err)
	}
	gb := int64(1_000_000_000)
	reports := []suanli.UsageReport{{InstanceID: in.ID, Seq: 1, TxBytes: 2 * gb}, {InstanceID: in.ID, Seq: 1, TxBytes: 2 * gb},
		{InstanceID: in.ID, Seq: 2, TxBytes: 3 * gb, RxBytes: gb / 2}, {InstanceID: in.ID, Seq: 1, TxBytes: 9 * gb}}
	for _, r := range reports {
		if err := db.RecordUsage(ctx, m.ID, []suanli.UsageReport{r}, t0); err != nil {
			t.Fatal(err)
		}
	}
	// Another machine cannot bill this instance.
	if err := db.RecordUsage(ctx, m.ID+1, []suanli.UsageReport{{InstanceID: in.ID, Seq: 9, TxBytes: 100 * gb}}, t0); err != nil {
		t.Fatal(err)
	}
	sum, _ := db.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &in.ID})
	if got := sum.ByKind[suanli.MeterInetUp]; got != 30_000 {
		t.Errorf("egress charged %d, want 30000 (3 GB at $0.01)", got)
	}
	if got := sum.ByKind[suanli.MeterInetDown]; got != 5_000 {
		t.Errorf("ingress charged %d, want 5000 (0.5 GB at $0.01)", got)
	}
}

func TestLogAppendIdempotent(t *testing.T) { EachBackend(t, testLogAppendIdempotent) }

func testLogAppendIdempotent(t *testing.T, b Backend) {
	db := b.MustOpen(t)
	ctx := t.Context()
	if _, err := db.AppendLog(ctx, 7, 0, []byte("hello ")); err != nil {
		t.Fatal(err)
	}
	db.AppendLog(ctx, 7, 0, []byte("hello "))       // resent
	db.AppendLog(ctx, 7, 3, []byte("lo world\n"))   // overlapping
	end, _ := db.AppendLog(ctx, 7, 12, []byte("!")) // exact continuation
	c, err := db.ReadLog(ctx, 7, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Data) != "hello world\n!" || end != 13 {
		t.Fatalf("log = %q end %d, want %q end 13", c.Data, end, "hello world\n!")
	}
	c, _ = db.ReadLog(ctx, 7, 6, 5)
	if string(c.Data) != "world" || c.Next != 11 {
		t.Errorf("ReadLog(6, 5) = %q next %d", c.Data, c.Next)
	}
	// A gap (the agent lost bytes) is marked, and later offsets still line up.
	end, _ = db.AppendLog(ctx, 7, 1000, []byte("later"))
	if end != 1005 {
		t.Fatalf("end after gap = %d, want 1005", end)
	}
	c, _ = db.ReadLog(ctx, 7, 0, 0)
	if !strings.Contains(string(c.Data), "log bytes lost") || !strings.HasPrefix(string(c.Data), "hello") {
		t.Errorf("log after gap = %q", c.Data)
	}
}

func TestReopenKeepsData(t *testing.T) { EachBackend(t, testReopenKeepsData) }

func testReopenKeepsData(t *testing.T, b Backend) {
	path := b.NewDSN(t)
	ctx := t.Context()
	db, err := sqlstore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	a := &suanli.Account{Name: "x", Role: suanli.RoleUser, CreatedAt: t0}
	if err := db.CreateAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	db.Credit(ctx, a.ID, 5_000_000, "m", t0)
	db.Close()
	db, err = sqlstore.Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	if b, _ := db.LedgerBalance(ctx, suanli.LedgerBalance(a.ID)); b != 5_000_000 {
		t.Fatalf("balance after reopen = %d", b)
	}
	if b.Name != "sqlite" {
		return
	}
	var mode string
	db.SQL().QueryRow(`PRAGMA journal_mode`).Scan(&mode)
	var sync int
	db.SQL().QueryRow(`PRAGMA synchronous`).Scan(&sync)
	if mode != "wal" || sync != 2 {
		t.Errorf("journal_mode=%s synchronous=%d, want wal and 2 (FULL)", mode, sync)
	}
}
