package sqlstore_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// populate makes a small marketplace in db through the store's API:
// renters with credit, a host with two machines, instances run, stopped,
// preempted and destroyed, traffic, logs (bytes), an hour close and a
// row settlement, a team, and audit events. It returns the instances.
func populate(t *testing.T, db *sqlstore.DB) []*suanli.Instance {
	t.Helper()
	ctx := t.Context()
	host := MustAccount(t, db, "host", suanli.Dollars(5))
	r1 := MustAccount(t, db, "renter1", suanli.Dollars(100))
	r2 := MustAccount(t, db, "renter2", suanli.Dollars(50))
	m1, m2 := MustMachine(t, db, host.ID, 4), MustMachine(t, db, host.ID, 2)
	var ins []*suanli.Instance
	for i, p := range []sqlstore.Placement{plan(r1, m1, []int{0, 1}), plan(r2, m1, []int{2}), plan(r1, m2, []int{0}), plan(r2, m2, []int{1})} {
		p.Instance.Rates.FeeBasisPoints = 1500
		in, err := db.ApplyPlan(ctx, p, t0.Add(time.Duration(i)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, in)
	}
	now := t0.Add(10 * time.Minute)
	for _, in := range ins {
		setStatus(t, db, in.ID, suanli.StatusRunning, now)
	}
	if err := db.RecordUsage(ctx, m1.ID, []suanli.UsageReport{{InstanceID: ins[0].ID, Seq: 1, TxBytes: 3e9, RxBytes: 1e9}}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AppendLog(ctx, ins[0].ID, 0, []byte("hello\x00\xff bytes\n")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(47 * time.Minute)
	if _, err := db.Settle(ctx, now); err != nil {
		t.Fatal(err)
	}
	setStatus(t, db, ins[1].ID, suanli.StatusStopped, now.Add(time.Minute))
	setStatus(t, db, ins[2].ID, suanli.StatusDestroyed, now.Add(2*time.Minute))
	if _, err := db.SettleRows(ctx, now.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Settle(ctx, now.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := db.Credit(ctx, r2.ID, suanli.Dollars(7), "top-up", now); err != nil {
		t.Fatal(err)
	}
	team := &suanli.Account{Name: "lab", Role: suanli.RoleUser, CreatedAt: t0}
	if err := db.CreateTeam(ctx, team, r1.ID, t0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := db.AppendAuditEvent(ctx, func(seq int64, hash string) *suanli.AuditEvent {
			return &suanli.AuditEvent{Seq: seq + 1, At: now, Action: "test.event", PrevHash: hash, Hash: hash + "x"}
		}); err != nil {
			t.Fatal(err)
		}
	}
	return ins
}

// TestCopyMovesAMarketplace copies a populated SQLite store into an empty
// store on each backend and checks that the copy is whole: every table's
// rows, the ledger's totals, charges per instance, balances; that new rows
// get new ids (PostgreSQL's sequences moved past the copied ids); that a
// second copy into the now full target is refused; and that a verification
// that finds a difference (a posting lost in the copy, a tampered source)
// is reported and leaves the target empty.
func TestCopyMovesAMarketplace(t *testing.T) { EachBackend(t, testCopyMovesAMarketplace) }

func testCopyMovesAMarketplace(t *testing.T, b Backend) {
	ctx := t.Context()
	src := MustOpenDSN(t, filepath.Join(t.TempDir(), "src.db"))
	ins := populate(t, src)
	dst := b.MustOpen(t)

	var seen []string
	rep, err := sqlstore.Copy(ctx, src, dst, func(tc sqlstore.TableCopy) {
		if tc.Done {
			seen = append(seen, tc.Table)
		}
	})
	if err != nil {
		t.Fatalf("Copy: %v (problems %v)", err, rep.Problems)
	}
	if len(seen) != len(rep.Tables) || len(rep.Tables) < 20 {
		t.Errorf("progress for %d tables, report has %d, want the same and all of them (≥ 20)", len(seen), len(rep.Tables))
	}
	pos := map[string]int{}
	for i, tc := range rep.Tables {
		pos[tc.Table] = i
		if tc.Rows != tc.Source {
			t.Errorf("table %s: copied %d of %d rows", tc.Table, tc.Rows, tc.Source)
		}
	}
	for _, dep := range [][2]string{{"accounts", "machines"}, {"machines", "instances"}, {"ledger_txns", "postings"}, {"meters", "meter_spans"}, {"ledger_txns", "bill_closes"}} {
		if pos[dep[0]] > pos[dep[1]] {
			t.Errorf("%s copied after %s, which references it", dep[0], dep[1])
		}
	}
	if rep.Ledger == nil || rep.Ledger.Postings == 0 || rep.Ledger.Renters == 0 || rep.Ledger.Earnings == 0 || rep.Ledger.Fees == 0 ||
		rep.Ledger.Credit != suanli.Dollars(5+100+50+7) || rep.Ledger.Renters+rep.Ledger.Earnings+rep.Ledger.Fees != rep.Ledger.Credit {
		t.Errorf("ledger totals %+v: want postings, renter balances, earnings and fees that add up to the $162 credited", rep.Ledger)
	}

	// The target reads as the source does.
	for _, in := range ins {
		a, err := src.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &in.ID})
		if err != nil {
			t.Fatal(err)
		}
		c, err := dst.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &in.ID})
		if err != nil {
			t.Fatal(err)
		}
		if a.Total != c.Total || a.Total == 0 {
			t.Errorf("instance %d: charges %s in the source, %s in the target", in.ID, a.Total, c.Total)
		}
		got, err := dst.FindInstanceByID(ctx, in.ID, t0)
		if err != nil || got.Status == "" || got.MachineID != in.MachineID {
			t.Errorf("instance %d in the target = %+v (%v)", in.ID, got, err)
		}
	}
	chk, err := dst.CheckLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if chk.PostingSum != 0 || chk.BalanceSum != 0 || len(chk.Mismatched) > 0 || len(chk.UnbalancedTxn) > 0 || len(chk.SubLedger) > 0 {
		t.Errorf("target ledger: %+v", chk)
	}
	log, err := dst.ReadLog(ctx, ins[0].ID, 0, 0)
	if err != nil || string(log.Data) != "hello\x00\xff bytes\n" {
		t.Errorf("log in the target = %q (%v): bytes must survive", log.Data, err)
	}
	// New rows get new ids, after the copied ones.
	var maxID int64
	if err := dst.SQL().QueryRowContext(ctx, `SELECT MAX(id) FROM accounts`).Scan(&maxID); err != nil || maxID < 4 {
		t.Fatalf("max account id in the target = %d (%v)", maxID, err)
	}
	a := MustAccount(t, dst, "newcomer", suanli.Dollars(1))
	if a.ID != maxID+1 {
		t.Errorf("new account id %d, want %d (after the copied ones)", a.ID, maxID+1)
	}
	if _, err := dst.ApplyPlan(ctx, plan(a, mustMachineByID(t, dst, ins[3].MachineID), []int{0}), t0.Add(3*time.Hour)); err != nil {
		t.Errorf("rent on the target after the copy: %v", err)
	}

	// A target that holds data is refused.
	if _, err := sqlstore.Copy(ctx, src, dst, nil); suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(suanli.ErrorMessage(err), "not empty") {
		t.Errorf("Copy into a full target: %v, want invalid: not empty", err)
	}

	// A posting lost on the way fails verification, and nothing is written.
	dst2 := b.MustOpen(t)
	restore := sqlstore.SetCopyTamper(func(ctx context.Context, exec func(string, ...any) error) error {
		return exec(`DELETE FROM postings WHERE id = (SELECT MAX(id) FROM postings)`)
	})
	rep, err = sqlstore.Copy(ctx, src, dst2, nil)
	restore()
	if suanli.ErrorCode(err) != suanli.EINTERNAL || len(rep.Problems) == 0 || !strings.Contains(err.Error(), "postings") {
		t.Errorf("Copy with a lost posting: %v, problems %v; want verification to fail and name the postings", err, rep.Problems)
	}
	mustBeEmpty(t, dst2)

	// A source whose cached balance was edited behind the ledger's back is
	// found out: the copy would carry a ledger that does not balance.
	if _, err := src.SQL().ExecContext(ctx, `UPDATE ledger_balances SET balance = balance + 1000000 WHERE account = ?`, suanli.LedgerBalance(ins[0].AccountID)); err != nil {
		t.Fatal(err)
	}
	rep, err = sqlstore.Copy(ctx, src, dst2, nil)
	if err == nil || !strings.Contains(err.Error(), suanli.LedgerBalance(ins[0].AccountID)+": balance") ||
		!strings.Contains(err.Error(), "in the source already") {
		t.Errorf("Copy of a tampered source: %v, problems %v; want verification to name %s", err, rep.Problems, suanli.LedgerBalance(ins[0].AccountID))
	}
	mustBeEmpty(t, dst2)
}

func mustMachineByID(t *testing.T, db *sqlstore.DB, id int64) *suanli.Machine {
	t.Helper()
	m, err := db.FindMachineByID(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustBeEmpty(t *testing.T, db *sqlstore.DB) {
	t.Helper()
	for _, table := range []string{"accounts", "ledger_txns", "postings", "instances"} {
		var n int
		if err := db.SQL().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil || n != 0 {
			t.Errorf("target table %s has %d rows (%v) after a failed copy, want none", table, n, err)
		}
	}
}
