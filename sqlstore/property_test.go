package sqlstore_test

import (
	"context"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// TestLedgerAgainstOracle drives several instances through long random
// sequences of start, stop, preemption, compute rate changes (a new bid, a
// reservation starting or ending: ChangeRate), top-ups, settlements,
// traffic and store restarts, and checks the ledger against a math/big
// oracle that prices every interval at the rate in force then: zero drift,
// postings that sum to zero, every billed second billed exactly once.
// It runs with the product's hour closes and with the row-per-charge
// settlement they replaced.
func TestLedgerAgainstOracle(t *testing.T) {
	EachBackend(t, func(t *testing.T, b Backend) {
		for _, mode := range []string{"close", "rows"} {
			for seed := uint64(1); seed <= map[string]uint64{"close": 4, "rows": 2}[mode]; seed++ {
				t.Run(mode, func(t *testing.T) { ledgerOracleRun(t, b, seed, mode) })
			}
		}
	})
}

func settleBy(mode string, db *sqlstore.DB, ctx context.Context, now time.Time) error {
	var err error
	if mode == "rows" {
		_, err = db.SettleRows(ctx, now)
	} else {
		_, err = db.Settle(ctx, now)
	}
	return err
}

func ledgerOracleRun(t *testing.T, b Backend, seed uint64, mode string) {
	ctx := context.Background()
	path := b.NewDSN(t)
	db, err := sqlstore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	rng := rand.New(rand.NewPCG(seed, 99))
	host := MustAccount(t, db, "host", 0)
	renter := MustAccount(t, db, "renter", 0)
	m := MustMachine(t, db, host.ID, 8)
	now := t0
	credits := new(big.Int)
	top := func() {
		amt := suanli.Money(rng.Int64N(50_000_000) + 1_000_000)
		if err := db.Credit(ctx, renter.ID, amt, "top-up", now); err != nil {
			t.Fatal(err)
		}
		credits.Add(credits, big.NewInt(int64(amt)))
	}
	top()
	top()
	type oracle struct {
		id              int64
		rate, storeRate suanli.Money // rate: the compute rate in force now
		status          string
		billedUS        int64    // µs in running/preempting
		computeUS       *big.Int // Σ rate × µs over those intervals, each at the rate in force
		rates           int      // compute rates the instance has had
		lifeUS          int64    // µs alive
		destroyed       bool
		tx              int64 // bytes sent, billed
	}
	var ins []*oracle
	for i := 0; i < 6; i++ {
		p := plan(renter, m, []int{i})
		p.Instance.Rates.ComputePerHour = suanli.Money(rng.Int64N(3_000_000) + 1)
		p.Instance.Rates.StoragePerMonth = suanli.Money(rng.Int64N(300_000))
		p.Instance.Rates.FeeBasisPoints = int64(rng.IntN(3000))
		p.HourlyCost = 0
		in, err := db.ApplyPlan(ctx, p, now)
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, &oracle{id: in.ID, rate: p.Instance.Rates.ComputePerHour, storeRate: p.Instance.Rates.StoragePerMonth * 10,
			status: suanli.StatusPending, computeUS: new(big.Int), rates: 1})
	}
	var usageSeq int64
	for step := 0; step < 600; step++ {
		d := rng.Int64N(30_000_000) + 1 // up to 30 s, in µs
		for _, o := range ins {
			if o.destroyed {
				continue
			}
			o.lifeUS += d
			if o.status == suanli.StatusRunning || o.status == suanli.StatusPreempting {
				o.billedUS += d
				o.computeUS.Add(o.computeUS, new(big.Int).Mul(big.NewInt(int64(o.rate)), big.NewInt(d)))
			}
		}
		now = now.Add(time.Duration(d) * time.Microsecond)
		o := ins[rng.IntN(len(ins))]
		switch rng.IntN(10) {
		case 0, 1:
			if !o.destroyed {
				next := []string{suanli.StatusRunning, suanli.StatusStopped, suanli.StatusPreempting, suanli.StatusPreempted, suanli.StatusExited}[rng.IntN(5)]
				setStatus(t, db, o.id, next, now)
				o.status = next
			}
		case 2:
			if !o.destroyed && rng.IntN(4) == 0 {
				setStatus(t, db, o.id, suanli.StatusDestroyed, now)
				o.status, o.destroyed = suanli.StatusDestroyed, true
			}
		case 3, 4:
			if err := settleBy(mode, db, ctx, now); err != nil {
				t.Fatal(err)
			}
		case 5:
			top()
		case 6: // restart: everything in the store survives
			db.Close()
			if db, err = sqlstore.Open(ctx, path); err != nil {
				t.Fatal(err)
			}
		case 8: // a rate change, running or not: the old rate up to now, the new one after
			if !o.destroyed {
				rate := o.rate // sometimes unchanged: no settlement, nothing changes
				if rng.IntN(4) != 0 {
					rate = suanli.Money(rng.Int64N(3_000_000) + 1)
				}
				out, err := db.ChangeRate(ctx, o.id, now, now, func(i *suanli.Instance) error {
					i.Bid, i.Rates.ComputePerHour = rate, rate
					return nil
				})
				if err != nil {
					t.Fatalf("ChangeRate(%d, %s): %v", o.id, rate, err)
				}
				if out.Rates.ComputePerHour != rate {
					t.Fatalf("ChangeRate(%d, %s) = rate %s", o.id, rate, out.Rates.ComputePerHour)
				}
				if rate != o.rate {
					o.rate = rate
					o.rates++
				}
			}
		case 7: // traffic, with retries of the same report
			if !o.destroyed {
				usageSeq++
				o.tx += rng.Int64N(3_000_000_000)
				r := suanli.UsageReport{InstanceID: o.id, Seq: usageSeq, TxBytes: o.tx}
				for k := 0; k < 1+rng.IntN(3); k++ {
					if err := db.RecordUsage(ctx, m.ID, []suanli.UsageReport{r}, now); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	for _, o := range ins {
		if !o.destroyed {
			setStatus(t, db, o.id, suanli.StatusDestroyed, now)
			o.destroyed = true
		}
	}
	if err := settleBy(mode, db, ctx, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	floorDiv := func(rate suanli.Money, q, period int64) int64 {
		v := new(big.Int).Mul(big.NewInt(int64(rate)), big.NewInt(q))
		return v.Quo(v, big.NewInt(period)).Int64()
	}
	total := new(big.Int)
	changed := 0
	for _, o := range ins {
		if o.rates > 1 && o.billedUS > 0 {
			changed++
		}
		sum, err := db.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &o.id})
		if err != nil {
			t.Fatal(err)
		}
		// Remainders carry across a rate change: one floor over the sum.
		if got, want := int64(sum.ByKind[suanli.MeterCompute]), new(big.Int).Quo(o.computeUS, big.NewInt(suanli.MicrosPerHour)).Int64(); got != want {
			t.Errorf("seed %d instance %d: compute %d, oracle %d (%d µs billed at %d rates)", seed, o.id, got, want, o.billedUS, o.rates)
		}
		if got, want := int64(sum.ByKind[suanli.MeterStorage]), floorDiv(o.storeRate, o.lifeUS, suanli.MicrosPerMonth); got != want {
			t.Errorf("seed %d instance %d: storage %d, oracle %d", seed, o.id, got, want)
		}
		if got, want := int64(sum.ByKind[suanli.MeterInetUp]), floorDiv(10_000, o.tx, 1_000_000_000); got != want {
			t.Errorf("seed %d instance %d: egress %d, oracle %d (%d bytes)", seed, o.id, got, want, o.tx)
		}
		total.Add(total, big.NewInt(int64(sum.Total)))
	}
	if changed == 0 {
		t.Errorf("seed %d: no instance ran under more than one rate: the sequence does not test rate changes", seed)
	}
	bal, _ := db.LedgerBalance(ctx, suanli.LedgerBalance(renter.ID))
	if want := new(big.Int).Sub(credits, total); want.Int64() != int64(bal) {
		t.Errorf("renter balance %d, oracle %s", bal, want)
	}
	chk, err := db.CheckLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if chk.PostingSum != 0 || chk.BalanceSum != 0 || len(chk.Mismatched) > 0 || len(chk.UnbalancedTxn) > 0 || len(chk.SubLedger) > 0 {
		t.Errorf("ledger: %+v", chk)
	}
}
