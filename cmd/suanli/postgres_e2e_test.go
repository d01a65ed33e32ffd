package main_test

import (
	"context"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/suanli/suanli"
	shttp "github.com/suanli/suanli/http"
	"github.com/suanli/suanli/internal/pgtest"
	"github.com/suanli/suanli/sqlstore"
)

// TestServerOnPostgres runs `suanli server --db postgres://…` (a fresh
// schema) with a separate `suanli agent`, and goes through a marketplace's
// life over the API: list a machine, search, rent as a renter with credit,
// run, destroy, read the bill; then restarts the server on the same
// database and finds everything still there, and checks the ledger.
func TestServerOnPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	serverHome := filepath.Join(dir, "server")
	serverArgs := []string{"server", "--home", serverHome, "--addr", addr, "--db", dsn, "--allow-simulated",
		"--heartbeat", "1s", "--settle-every", "200ms"}
	serverReady := regexp.MustCompile(`control plane at (\S+)`)
	srv := startProc(t, filepath.Join(dir, "server.log"), serverReady, serverArgs...)
	defer func() {
		if t.Failed() {
			for _, f := range []string{"server.log", "agent.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				t.Logf("%s:\n%s", f, b)
			}
		}
	}()
	url := "http://" + addr
	cfg, err := readConfig(serverHome)
	if err != nil {
		t.Fatal(err)
	}
	op := shttp.NewClient(url, cfg.APIKey)
	ctx := t.Context()

	// A provider's agent joins and lists its GPU.
	agentHome := filepath.Join(dir, "agent")
	joinAgent(t, op, url, agentHome, filepath.Join(dir, "agent.log"))
	ms, _, err := op.FindMachines(ctx, suanli.MachineFilter{})
	if err != nil || len(ms) != 1 {
		t.Fatalf("machines after join = %d (%v), want 1", len(ms), err)
	}
	price := suanli.Money(36_000_000) // $36/h: a cent a second
	if _, err := op.ListMachine(ctx, ms[0].ID, suanli.ListingUpdate{PriceGPU: &price}); err != nil {
		t.Fatal(err)
	}

	// A renter with credit finds it and rents it.
	acct, err := op.CreateAccount(ctx, suanli.AccountCreate{Name: "renter", Credit: suanli.Dollars(100)})
	if err != nil {
		t.Fatal(err)
	}
	renter := shttp.NewClient(url, acct.Key.Secret)
	res, err := renter.SearchOffers(ctx, suanli.OfferQuery{Query: "gpu_name=RTX_4090"})
	if err != nil || len(res.Offers) != 1 || res.Offers[0].ID != ms[0].ID {
		t.Fatalf("search = %+v (%v), want machine %d", res, err, ms[0].ID)
	}
	in, err := renter.CreateInstance(ctx, suanli.InstanceCreate{OfferID: ms[0].ID, Image: "x", GPUCount: 1,
		Cmd: []string{"sleep", "600"}, Guards: suanli.Guards{IdleStopMinutes: -1}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "instance running", func() bool {
		got, err := renter.FindInstanceByID(ctx, in.ID)
		return err == nil && got.Status == suanli.StatusRunning
	})
	time.Sleep(2 * time.Second) // compute accrues
	if _, err := renter.DestroyInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	charges, err := renter.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &in.ID})
	if err != nil {
		t.Fatal(err)
	}
	compute := charges.ByKind[suanli.MeterCompute]
	if compute < 10_000 || compute > 60_000 { // 1 to 6 s at a cent a second
		t.Errorf("compute charged %s for about 2 s at $36/h, want $0.01-$0.06", compute)
	}
	bal, err := renter.Balance(ctx)
	if err != nil || bal.Balance != suanli.Dollars(100)-charges.Total {
		t.Errorf("renter balance %+v (%v), want $100 - %s", bal, err, charges.Total)
	}

	// A restart on the same database keeps everything.
	srv.stop(syscall.SIGINT)
	srv.start(serverReady)
	got, err := renter.FindInstanceByID(ctx, in.ID)
	if err != nil || got.Status != suanli.StatusDestroyed {
		t.Fatalf("instance after restart = %+v (%v), want destroyed", got, err)
	}
	again, err := renter.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &in.ID})
	if err != nil || again.Total != charges.Total {
		t.Errorf("charges after restart = %+v (%v), want %s", again, err, charges.Total)
	}
	srv.stop(syscall.SIGINT)

	// It all lived in PostgreSQL: no SQLite file in the server's home, and
	// the ledger there balances.
	if _, err := os.Stat(filepath.Join(serverHome, "suanli.db")); !os.IsNotExist(err) {
		t.Errorf("server made a SQLite file although --db is PostgreSQL (stat: %v)", err)
	}
	if u, err := neturl.Parse(dsn); err == nil {
		if pw, ok := u.User.Password(); ok && pw != "xxxxx" {
			if b, _ := os.ReadFile(filepath.Join(dir, "server.log")); strings.Contains(string(b), ":"+pw+"@") {
				t.Errorf("server log shows the database password")
			}
		}
	}
	db, err := sqlstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Dialect().Name != "postgres" {
		t.Fatalf("dialect %s, want postgres", db.Dialect().Name)
	}
	chk, err := db.CheckLedger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if chk.PostingSum != 0 || chk.BalanceSum != 0 || len(chk.Mismatched) > 0 || len(chk.UnbalancedTxn) > 0 || chk.Postings == 0 || len(chk.SubLedger) > 0 {
		t.Errorf("ledger on PostgreSQL: %+v", chk)
	}
}
