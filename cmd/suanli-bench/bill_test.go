package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// TestBillSmall runs the benchmark end to end on a small marketplace: both
// sides must agree, and the last line has the promised form.
func TestBillSmall(t *testing.T) {
	var out, errs bytes.Buffer
	args := []string{"-instances", "300", "-accounts", "20", "-hosts", "5", "-hours", "2", "-churn", "40", "-sample", "50", "-dir", t.TempDir()}
	if err := runBill(context.Background(), args, &out, &errs); err != nil {
		t.Fatalf("bill: %v\n%s%s", err, out.String(), errs.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	if !regexp.MustCompile(`^bill: \d+ postings/s, ratio vs sqlite \d+\.\dx$`).MatchString(last) {
		t.Errorf("last line %q", last)
	}
	if !strings.Contains(out.String(), "verified identical: ") {
		t.Errorf("no verification in the output:\n%s", out.String())
	}
}

// TestBillVerifyCatchesDifferences gives one store a charge the other
// lacks: the benchmark must refuse to report.
func TestBillVerifyCatchesDifferences(t *testing.T) {
	ctx := context.Background()
	cfg := billConfig{Instances: 50, Accounts: 5, Hosts: 2, Hours: 1, Sample: 10, Seed: 3}
	dir := t.TempDir()
	fixture := filepath.Join(dir, "f.db")
	if err := writeBillFixture(ctx, fixture, cfg, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var dbs []*sqlstore.DB
	for _, name := range []string{"a.db", "b.db"} {
		p := filepath.Join(dir, name)
		if err := copyFile(fixture, p); err != nil {
			t.Fatal(err)
		}
		db, err := sqlstore.Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Settle(ctx, billT0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, db)
	}
	if _, err := verifyBill(ctx, cfg, dbs[0], dbs[1]); err != nil {
		t.Fatalf("identical stores: %v", err)
	}
	if err := dbs[1].Credit(ctx, 1, suanli.Micro, "one more dollar", billT0); err != nil {
		t.Fatal(err)
	}
	if _, err := verifyBill(ctx, cfg, dbs[0], dbs[1]); err == nil || !strings.Contains(err.Error(), "ledger balances") {
		t.Errorf("verify of differing stores: %v, want a ledger balance difference", err)
	}
}
