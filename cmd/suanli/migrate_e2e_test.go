package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/internal/pgtest"
	"github.com/suanli/suanli/sqlstore"
)

// migrateOut is `suanli migrate --json`'s summary, as a script reads it.
type migrateOut struct {
	Verified bool `json:"verified"`
	Tables   []struct {
		Table  string `json:"table"`
		Rows   int64  `json:"rows"`
		Source int64  `json:"source_rows"`
	} `json:"tables"`
	Rows   int64 `json:"rows"`
	Ledger struct {
		Postings   int64        `json:"postings"`
		PostingSum suanli.Money `json:"posting_sum"`
		Credit     suanli.Money `json:"credit"`
		Renters    suanli.Money `json:"renter_balances"`
		Earnings   suanli.Money `json:"host_earnings"`
	} `json:"ledger"`
	Problems []string `json:"problems"`
	Error    string   `json:"error"`
}

func runMigrate(t *testing.T, args ...string) (migrateOut, string, int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"migrate", "--json"}, args...)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Run()
	var m migrateOut
	if err := json.Unmarshal([]byte(out.String()), &m); err != nil {
		t.Fatalf("migrate --json printed %q (%v); stderr %s", out.String(), err, errb.String())
	}
	return m, errb.String(), cmd.ProcessState.ExitCode()
}

// TestMigrateSQLiteToPostgres runs a marketplace on SQLite (`suanli up`),
// stops it with an instance running, moves it with `suanli migrate` to a
// fresh PostgreSQL schema, and starts it again on PostgreSQL from the same
// home: the running instance is still there and running, the bill of the
// destroyed one is the same, the operator's key still works, a new rental
// gets a new id, and the ledger balances. A second migrate into the now full
// schema is refused; a source whose ledger was tampered with is refused
// with the account named, and nothing is written.
func TestMigrateSQLiteToPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	home := t.TempDir()
	m, _ := startUp(t, home)
	var res suanli.OfferResult
	m.mustJSON(&res, "search")
	if len(res.Offers) != 1 {
		t.Fatalf("search = %+v, want the local machine", res.Offers)
	}
	offer := fmt.Sprint(res.Offers[0].ID)
	var gone, kept suanli.Instance
	m.mustJSON(&gone, "create", offer, "--image", "x", "--gpus", "1", "--", "sh", "-c", "while true; do sleep 0.1; done")
	waitStatus(t, m, fmt.Sprint(gone.ID), suanli.StatusRunning, 20*time.Second)
	m.mustJSON(&kept, "create", offer, "--image", "x", "--gpus", "1", "--", "sh", "-c", "while true; do sleep 0.1; done")
	waitStatus(t, m, fmt.Sprint(kept.ID), suanli.StatusRunning, 20*time.Second)
	time.Sleep(1500 * time.Millisecond)
	m.mustJSON(&gone, "destroy", fmt.Sprint(gone.ID))
	var before suanli.ChargeSummary
	m.mustJSON(&before, "billing", "charges", "--instance", fmt.Sprint(gone.ID))
	m.stop()

	source := filepath.Join(home, "suanli.db")
	sum, progress, code := runMigrate(t, "--from", "sqlite:"+source, "--to", dsn)
	if code != 0 || !sum.Verified || len(sum.Problems) > 0 {
		t.Fatalf("migrate: exit %d, %+v\n%s", code, sum, progress)
	}
	src, err := sqlstore.Open(context.Background(), source)
	if err != nil {
		t.Fatal(err)
	}
	copied := map[string]int64{}
	for _, tc := range sum.Tables {
		var n int64
		if err := src.SQL().QueryRow(`SELECT COUNT(*) FROM ` + tc.Table).Scan(&n); err != nil || n != tc.Rows || n != tc.Source {
			t.Errorf("table %s: migrate copied %d of %d rows, the source has %d (%v)", tc.Table, tc.Rows, tc.Source, n, err)
		}
		copied[tc.Table] = tc.Rows
		if !strings.Contains(progress, "copied "+tc.Table+" ") {
			t.Errorf("no progress line for %s in:\n%s", tc.Table, progress)
		}
	}
	chk, err := src.CheckLedger(context.Background())
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	if copied["instances"] != 2 || copied["accounts"] == 0 || copied["audit_events"] == 0 || copied["postings"] == 0 {
		t.Errorf("copied %v: want both instances, accounts, audit events, postings", copied)
	}
	if sum.Ledger.Postings != copied["postings"] || sum.Ledger.PostingSum != 0 || sum.Ledger.Credit == 0 || sum.Ledger.Earnings == 0 ||
		chk.ChargeTotal == 0 {
		t.Errorf("ledger totals %+v (source: %+v)", sum.Ledger, chk)
	}

	// The same home, now on PostgreSQL.
	m2, _ := startUp(t, home, "--db", dsn)
	got := waitStatus(t, m2, fmt.Sprint(kept.ID), suanli.StatusRunning, 20*time.Second)
	if got.CreatedAt.IsZero() || !got.CreatedAt.Equal(kept.CreatedAt) {
		t.Errorf("instance %d after the move: created %s, want %s", kept.ID, got.CreatedAt, kept.CreatedAt)
	}
	var after suanli.ChargeSummary
	m2.mustJSON(&after, "billing", "charges", "--instance", fmt.Sprint(gone.ID))
	if after.Total != before.Total || before.Total == 0 {
		t.Errorf("charges of destroyed instance %d: %s before the move, %s after", gone.ID, before.Total, after.Total)
	}
	var fresh suanli.Instance
	m2.mustJSON(&fresh, "create", offer, "--image", "x", "--gpus", "1", "--", "sleep", "60")
	if fresh.ID != kept.ID+1 {
		t.Errorf("new instance id %d, want %d (after the moved ones)", fresh.ID, kept.ID+1)
	}
	for _, id := range []int64{kept.ID, fresh.ID} {
		var in suanli.Instance
		m2.mustJSON(&in, "destroy", fmt.Sprint(id))
	}
	m2.stop()
	pg, err := sqlstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	pchk, err := pg.CheckLedger(context.Background())
	pg.Close()
	if err != nil {
		t.Fatal(err)
	}
	if pchk.PostingSum != 0 || pchk.BalanceSum != 0 || len(pchk.Mismatched) > 0 || len(pchk.UnbalancedTxn) > 0 || len(pchk.SubLedger) > 0 {
		t.Errorf("ledger on PostgreSQL after the move: %+v", pchk)
	}

	// A target that holds a marketplace is refused.
	sum, _, code = runMigrate(t, "--from", "sqlite:"+source, "--to", dsn)
	if code != 2 || sum.Verified || !strings.Contains(sum.Error, "not empty") {
		t.Errorf("migrate into a full target: exit %d, %+v; want exit 2 and 'not empty'", code, sum)
	}

	// A source whose balance was edited outside the ledger is refused, the
	// account named, and the new target stays empty.
	src, err = sqlstore.Open(context.Background(), source)
	if err != nil {
		t.Fatal(err)
	}
	acct := suanli.LedgerBalance(kept.AccountID)
	if _, err := src.SQL().Exec(`UPDATE ledger_balances SET balance = balance + 5000000 WHERE account = ?`, acct); err != nil {
		t.Fatal(err)
	}
	src.Close()
	dsn2 := pgtest.DSN(t)
	sum, progress, code = runMigrate(t, "--from", "sqlite:"+source, "--to", dsn2)
	if code == 0 || sum.Verified || len(sum.Problems) == 0 || !strings.Contains(strings.Join(sum.Problems, "\n"), acct) ||
		!strings.Contains(progress, "problem: ") {
		t.Errorf("migrate of a tampered source: exit %d, %+v; want a failure naming %s\n%s", code, sum, acct, progress)
	}
	pg2, err := sqlstore.Open(context.Background(), dsn2)
	if err != nil {
		t.Fatal(err)
	}
	defer pg2.Close()
	var n int
	if err := pg2.SQL().QueryRow(`SELECT COUNT(*) FROM accounts`).Scan(&n); err != nil || n != 0 {
		t.Errorf("target after a failed verification holds %d accounts (%v), want none", n, err)
	}
}
