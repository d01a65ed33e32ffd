package sqlstore_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/internal/pgtest"
	"github.com/suanli/suanli/sqlstore"
)

// TestWritersOnTwoHandles opens one database twice, as two server replicas
// would, and races writers through both: every credit lands exactly once in
// the balance (no lost update of the read-then-written balance row), and of
// many rentals racing for one GPU exactly one wins, the others get conflict.
func TestWritersOnTwoHandles(t *testing.T) { EachBackend(t, testWritersOnTwoHandles) }

func testWritersOnTwoHandles(t *testing.T, b Backend) {
	dsn := b.NewDSN(t)
	dbs := []*sqlstore.DB{MustOpenDSN(t, dsn), MustOpenDSN(t, dsn)}
	ctx := t.Context()
	host := MustAccount(t, dbs[0], "host", 0)
	renter := MustAccount(t, dbs[0], "renter", suanli.Dollars(10))

	const writers, credits, rounds = 8, 10, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*(credits+rounds))
	for w := 0; w < writers; w++ {
		db := dbs[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < credits; i++ {
				if err := db.Credit(ctx, renter.ID, 1, fmt.Sprintf("writer %d credit %d", w, i), t0); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	// Each round lists a new one-GPU machine and releases every writer at
	// once to rent it.
	for r := 0; r < rounds; r++ {
		m := MustMachine(t, dbs[0], host.ID, 1)
		start := make(chan struct{})
		won := make(chan int64, writers)
		for w := 0; w < writers; w++ {
			db := dbs[w%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				in, err := db.ApplyPlan(ctx, plan(renter, m, []int{0}), t0)
				switch {
				case err == nil:
					won <- in.ID
				case suanli.ErrorCode(err) != suanli.ECONFLICT:
					errs <- fmt.Errorf("ApplyPlan: %v, want nil or conflict", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if n := len(won); n != 1 {
			t.Errorf("round %d: %d rentals won the one GPU, want exactly 1", r, n)
		}
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := suanli.Dollars(10) + writers*credits
	for i, db := range dbs {
		if bal, err := db.LedgerBalance(ctx, suanli.LedgerBalance(renter.ID)); err != nil || bal != want {
			t.Errorf("handle %d: balance %d (%v), want %d: a credit was lost or doubled", i, bal, err, want)
		}
	}
	chk, err := dbs[1].CheckLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if chk.PostingSum != 0 || len(chk.Mismatched) > 0 || len(chk.UnbalancedTxn) > 0 {
		t.Errorf("ledger after racing writers: %+v", chk)
	}
}

// TestOpenNamesAMissingSchema: a DSN whose search_path names no schema is
// refused with a message that says what to fix, not a failed CREATE TABLE.
func TestOpenNamesAMissingSchema(t *testing.T) {
	dsn, err := pgtest.WithSchema(pgtest.DSN(t), "suanli_no_such_schema")
	if err != nil {
		t.Fatal(err)
	}
	_, err = sqlstore.Open(t.Context(), dsn)
	if suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(suanli.ErrorMessage(err), "search_path") {
		t.Errorf("Open with a missing schema: %v, want invalid naming the search_path", err)
	}
}
