package sqlstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// twin drives one history into two stores: "close" settles by hour closes
// (the product), "rows" by the row-per-charge settlement they replaced. All
// other writes go through the same store methods on both.
type twin struct {
	t     *testing.T
	paths [2]string
	dbs   [2]*sqlstore.DB
}

var twinNames = [2]string{"close", "rows"}

func newTwin(t *testing.T, b Backend) *twin {
	w := &twin{t: t}
	for i := range w.dbs {
		w.paths[i] = b.NewDSN(t)
		db, err := sqlstore.Open(context.Background(), w.paths[i])
		if err != nil {
			t.Fatal(err)
		}
		w.dbs[i] = db
	}
	t.Cleanup(func() {
		for _, db := range w.dbs {
			db.Close()
		}
	})
	return w
}

// do runs fn on both stores; it fails the test when only one of them fails.
func (w *twin) do(what string, fn func(db *sqlstore.DB) error) error {
	w.t.Helper()
	var errs [2]error
	for i, db := range w.dbs {
		errs[i] = fn(db)
	}
	if (errs[0] == nil) != (errs[1] == nil) {
		w.t.Fatalf("%s: close store says %v, rows store says %v", what, errs[0], errs[1])
	}
	return errs[0]
}

func (w *twin) must(what string, fn func(db *sqlstore.DB) error) {
	w.t.Helper()
	if err := w.do(what, fn); err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
}

func (w *twin) restart() {
	for i := range w.dbs {
		w.dbs[i].Close()
		db, err := sqlstore.Open(context.Background(), w.paths[i])
		if err != nil {
			w.t.Fatal(err)
		}
		w.dbs[i] = db
	}
}

// TestCloseReadsMatchRowSettlement runs long random histories (rentals with
// random rates and fees, status changes at past and present times,
// preemption, destroy, traffic, top-ups, payouts, label changes, restarts,
// settlements) into both stores and checks that every read of charges and
// costs answers the same: FindCharges (by instance, account, time, with
// pages), ChargeRows, InstanceSettled, cost so far, EarningsByMachine,
// CheckLedger, balances and ledger stats. Ledger transaction ids differ (a
// close's lines share its id) and are not compared; order is.
func TestCloseReadsMatchRowSettlement(t *testing.T) {
	EachBackend(t, func(t *testing.T, b Backend) {
		for seed := uint64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) { twinRun(t, b, seed) })
		}
	})
}

func twinRun(t *testing.T, b Backend, seed uint64) {
	ctx := context.Background()
	defer sqlstore.SetWarmSlice(3)() // several slices, with writes between warms and closes
	w := newTwin(t, b)
	rng := rand.New(rand.NewPCG(seed, 7))
	var accounts []*suanli.Account
	var hosts []*suanli.Account
	var machines []*suanli.Machine
	for i := 0; i < 3; i++ {
		var a *suanli.Account
		w.must("account", func(db *sqlstore.DB) error {
			a = MustAccount(t, db, fmt.Sprintf("renter%d", i), suanli.Dollars(1000))
			return nil
		})
		accounts = append(accounts, a)
	}
	for i := 0; i < 2; i++ {
		var h *suanli.Account
		var ms []*suanli.Machine
		w.must("host", func(db *sqlstore.DB) error {
			h = MustAccount(t, db, fmt.Sprintf("host%d", i), suanli.Dollars(1000))
			ms = []*suanli.Machine{MustMachine(t, db, h.ID, 8), MustMachine(t, db, h.ID, 8)}
			return nil
		})
		hosts, accounts = append(hosts, h), append(accounts, h) // hosts rent too
		machines = append(machines, ms...)
	}
	type inst struct {
		id        int64
		machine   *suanli.Machine
		gpu       int
		destroyed bool
	}
	var ins []*inst
	used := map[[2]int64]bool{}
	now := t0
	lastSettle := t0
	var seq int64
	var vols []int64
	beats := map[int64]time.Time{}
	traffic := map[int64][2]int64{}
	for step := 0; step < 400; step++ {
		now = now.Add(time.Duration(rng.Int64N(int64(20*time.Minute))) + time.Microsecond)
		switch r := rng.IntN(20); {
		case r < 3 || len(ins) == 0: // rent
			m := machines[rng.IntN(len(machines))]
			gpu := rng.IntN(8)
			if used[[2]int64{m.ID, int64(gpu)}] {
				continue
			}
			renter := accounts[rng.IntN(len(accounts))]
			p := plan(renter, m, []int{gpu})
			p.HourlyCost = 0
			p.Instance.Rates.ComputePerHour = suanli.Money(rng.Int64N(4_000_000) + 1)
			p.Instance.Rates.StoragePerMonth = suanli.Money(rng.Int64N(300_000))
			p.Instance.DiskGB = rng.Int64N(100) + 1
			p.Instance.Rates.FeeBasisPoints = []int64{0, 10_000, rng.Int64N(10_001), 1500}[rng.IntN(4)]
			p.Instance.Project = []string{"", "train", "eval"}[rng.IntN(3)]
			p.Instance.Tags = map[string]string{"team": []string{"a", "b"}[rng.IntN(2)]}
			var id int64
			w.must("rent", func(db *sqlstore.DB) error {
				cp := *p.Instance
				pp := p
				pp.Instance = &cp
				in, err := db.ApplyPlan(ctx, pp, now)
				if err == nil {
					id = in.ID
				}
				return err
			})
			used[[2]int64{m.ID, int64(gpu)}] = true
			ins = append(ins, &inst{id: id, machine: m, gpu: gpu})
		case r < 9: // status change, sometimes dated in the past
			o := ins[rng.IntN(len(ins))]
			if o.destroyed {
				continue
			}
			next := []string{suanli.StatusRunning, suanli.StatusRunning, suanli.StatusStopped, suanli.StatusPreempting,
				suanli.StatusPreempted, suanli.StatusExited, suanli.StatusLost}[rng.IntN(7)]
			at := now
			if rng.IntN(3) == 0 {
				at = now.Add(-time.Duration(rng.Int64N(int64(30 * time.Minute))))
			}
			w.must("status", func(db *sqlstore.DB) error {
				_, err := db.UpdateInstance(ctx, o.id, at, now, func(i *suanli.Instance) error {
					i.Status = next
					return nil
				})
				return err
			})
		case r < 10:
			o := ins[rng.IntN(len(ins))]
			if o.destroyed || rng.IntN(3) != 0 {
				continue
			}
			w.must("destroy", func(db *sqlstore.DB) error {
				_, err := db.UpdateInstance(ctx, o.id, now, now, func(i *suanli.Instance) error {
					i.Status = suanli.StatusDestroyed
					return nil
				})
				return err
			})
			o.destroyed = true
			used[[2]int64{o.machine.ID, int64(o.gpu)}] = false
		case r < 14: // settle, after heartbeats from most hosts (a silent one is billed to its last)
			if !now.After(lastSettle) {
				continue
			}
			lastSettle = now
			for _, m := range machines {
				if rng.IntN(5) == 0 {
					continue
				}
				hb := now.Add(-time.Duration(rng.Int64N(int64(20 * time.Second))))
				if hb.Before(beats[m.ID]) {
					hb = beats[m.ID] // heartbeats never go back
				}
				beats[m.ID] = hb
				w.must("heartbeat", func(db *sqlstore.DB) error {
					return db.RecordHeartbeat(ctx, m.ID, sqlstore.Heartbeat{At: hb, Status: suanli.MachineOnline})
				})
			}
			for i, db := range w.dbs {
				var err error
				if i == 0 {
					_, err = db.Settle(ctx, now)
				} else {
					_, err = db.SettleRows(ctx, now)
				}
				if err != nil {
					t.Fatalf("%s settle: %v", twinNames[i], err)
				}
			}
		case r < 15: // traffic
			o := ins[rng.IntN(len(ins))]
			c := traffic[o.id]
			c[0] += rng.Int64N(5_000_000_000)
			c[1] += rng.Int64N(5_000_000_000)
			traffic[o.id] = c
			seq++
			rep := suanli.UsageReport{InstanceID: o.id, Seq: seq, TxBytes: c[0], RxBytes: c[1]}
			w.must("usage", func(db *sqlstore.DB) error { return db.RecordUsage(ctx, o.machine.ID, []suanli.UsageReport{rep}, now) })
		case r < 16:
			a := accounts[rng.IntN(len(accounts))]
			amt := suanli.Money(rng.Int64N(50_000_000) + 1)
			w.must("credit", func(db *sqlstore.DB) error { return db.Credit(ctx, a.ID, amt, "top-up", now) })
		case r < 17:
			h := hosts[rng.IntN(len(hosts))]
			amt := suanli.Money(rng.Int64N(2_000_000) + 1)
			w.do("payout", func(db *sqlstore.DB) error { return db.Payout(ctx, h.ID, amt, "payout", now) })
		case r < 18:
			o := ins[rng.IntN(len(ins))]
			w.must("label", func(db *sqlstore.DB) error {
				_, err := db.UpdateInstance(ctx, o.id, now, now, func(i *suanli.Instance) error {
					i.Label, i.Project = fmt.Sprintf("job-%d", step), []string{"train", "eval"}[step%2]
					return nil
				})
				return err
			})
		case r < 19 && rng.IntN(3) == 0: // a managed job moves: its meters change host and rates
			o := ins[rng.IntN(len(ins))]
			m := machines[rng.IntN(len(machines))]
			gpu := rng.IntN(8)
			if o.destroyed || m.ID == o.machine.ID || used[[2]int64{m.ID, int64(gpu)}] {
				continue
			}
			mv := sqlstore.Move{InstanceID: o.id, MachineID: m.ID, HostID: m.OwnerID, GPUIndexes: []int{gpu}, CPUCores: 4, RAMMB: 1024,
				Rates: suanli.Rates{ComputePerHour: suanli.Money(rng.Int64N(4_000_000) + 1), StoragePerMonth: suanli.Money(rng.Int64N(300_000)),
					InetUpPerGB: 20_000, InetDownPerGB: 5_000, FeeBasisPoints: rng.Int64N(5000)}, Reason: "test"}
			at := now.Add(-time.Duration(rng.Int64N(int64(10 * time.Minute))))
			w.must("move", func(db *sqlstore.DB) error {
				_, err := db.MoveInstance(ctx, mv, at, now)
				return err
			})
			used[[2]int64{o.machine.ID, int64(o.gpu)}] = false
			used[[2]int64{m.ID, int64(gpu)}] = true
			o.machine, o.gpu = m, gpu
		case r < 19 && rng.IntN(2) == 0: // the compute rate changes (a reservation starts or ends)
			o := ins[rng.IntN(len(ins))]
			if o.destroyed {
				continue
			}
			rate := suanli.Money(rng.Int64N(4_000_000))
			at := now.Add(-time.Duration(rng.Int64N(int64(10 * time.Minute))))
			w.must("rate", func(db *sqlstore.DB) error {
				_, err := db.ChangeRate(ctx, o.id, at, now, func(in *suanli.Instance) error {
					in.Rates.ComputePerHour = rate
					return nil
				})
				return err
			})
		case r < 19 && rng.IntN(2) == 0: // volumes: created, later deleted
			if len(vols) > 0 && rng.IntN(2) == 0 {
				id := vols[rng.IntN(len(vols))]
				w.must("delete volume", func(db *sqlstore.DB) error {
					_, err := db.DeleteVolume(ctx, id, now)
					return err
				})
				continue
			}
			m := machines[rng.IntN(len(machines))]
			v := suanli.Volume{AccountID: accounts[rng.IntN(len(accounts))].ID, MachineID: m.ID, Name: fmt.Sprintf("vol%d", step),
				SizeGB: rng.Int64N(500) + 1, Rate: suanli.Money(rng.Int64N(200_000) + 1)}
			var id int64
			fee := rng.Int64N(3000)
			w.must("create volume", func(db *sqlstore.DB) error {
				cp := v
				err := db.CreateVolume(ctx, &cp, m.OwnerID, fee, now)
				id = cp.ID
				return err
			})
			vols = append(vols, id)
		case r < 19:
			w.restart()
			if rng.IntN(2) == 0 { // as the server does at start; the next close rebuilds otherwise
				if _, err := w.dbs[0].WarmBook(ctx); err != nil {
					t.Fatal(err)
				}
			}
		default:
			if rng.IntN(2) == 0 {
				if _, err := w.dbs[0].WarmBook(ctx); err != nil { // warming is safe at any time
					t.Fatal(err)
				}
			}
			compareTwin(t, w, rng, accounts, hosts, ins2ids(ins, func(o *inst) int64 { return o.id }), now)
		}
	}
	for _, o := range ins {
		if !o.destroyed {
			w.must("destroy", func(db *sqlstore.DB) error {
				_, err := db.UpdateInstance(ctx, o.id, now, now, func(i *suanli.Instance) error {
					i.Status = suanli.StatusDestroyed
					return nil
				})
				return err
			})
		}
	}
	compareTwin(t, w, rng, accounts, hosts, ins2ids(ins, func(o *inst) int64 { return o.id }), now)
	twinHook(w)
}

var twinHook = func(*twin) {}

func ins2ids[T any](xs []T, id func(T) int64) []int64 {
	var out []int64
	for _, x := range xs {
		out = append(out, id(x))
	}
	return out
}

// compareTwin checks that the two stores answer every billing read alike.
func compareTwin(t *testing.T, w *twin, rng *rand.Rand, accounts, hosts []*suanli.Account, instances []int64, now time.Time) {
	t.Helper()
	ctx := context.Background()
	same := func(what string, read func(db *sqlstore.DB) (any, error)) {
		t.Helper()
		var got [2]any
		for i, db := range w.dbs {
			v, err := read(db)
			if err != nil {
				t.Fatalf("%s on %s store: %v", what, twinNames[i], err)
			}
			got[i] = v
		}
		if d := cmp.Diff(got[1], got[0]); d != "" {
			t.Fatalf("%s differs (-rows +close):\n%s", what, d)
		}
	}
	noIDs := func(s *suanli.ChargeSummary, err error) (any, error) {
		if err != nil {
			return nil, err
		}
		for _, c := range s.Charges {
			c.ID = 0
		}
		return s, nil
	}
	span := now.Sub(t0)
	randTime := func() time.Time { return t0.Add(time.Duration(rng.Int64N(int64(span) + 1))) }
	for _, id := range instances {
		same(fmt.Sprintf("FindCharges(instance %d)", id), func(db *sqlstore.DB) (any, error) {
			return noIDs(db.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &id, Limit: 100000}))
		})
		same(fmt.Sprintf("InstanceSettled(%d)", id), func(db *sqlstore.DB) (any, error) { return db.InstanceSettled(ctx, id) })
	}
	for _, a := range accounts {
		id := a.ID
		same(fmt.Sprintf("FindCharges(account %d)", id), func(db *sqlstore.DB) (any, error) {
			return noIDs(db.FindCharges(ctx, suanli.ChargeFilter{AccountID: &id, Limit: 100000}))
		})
		limit, offset, since := rng.IntN(7)+1, rng.IntN(20), randTime()
		same(fmt.Sprintf("FindCharges(account %d, limit %d, offset %d, since %s)", id, limit, offset, since), func(db *sqlstore.DB) (any, error) {
			return noIDs(db.FindCharges(ctx, suanli.ChargeFilter{AccountID: &id, Since: &since, Limit: limit, Offset: offset}))
		})
		if len(instances) > 0 {
			in := instances[rng.IntN(len(instances))]
			same(fmt.Sprintf("FindCharges(account %d, instance %d)", id, in), func(db *sqlstore.DB) (any, error) {
				return noIDs(db.FindCharges(ctx, suanli.ChargeFilter{AccountID: &id, InstanceID: &in, Limit: 3}))
			})
		}
		for _, win := range [][2]time.Time{{t0, now.Add(time.Second)}, {randTime(), randTime()}, {randTime(), now.Add(time.Hour)}} {
			same(fmt.Sprintf("ChargeRows(account %d, %s, %s)", id, win[0], win[1]), func(db *sqlstore.DB) (any, error) {
				rows, err := db.ChargeRows(ctx, id, win[0], win[1])
				for i := range rows {
					rows[i].TxnID = 0
				}
				return rows, err
			})
		}
		for _, name := range []string{suanli.LedgerBalance(id), suanli.LedgerEarnings(id)} {
			same("LedgerBalance "+name, func(db *sqlstore.DB) (any, error) { return db.LedgerBalance(ctx, name) })
		}
		same(fmt.Sprintf("AccountBurn(%d)", id), func(db *sqlstore.DB) (any, error) { return db.AccountBurn(ctx, id) })
	}
	for _, h := range hosts {
		for _, win := range [][2]time.Time{{t0, now.Add(time.Second)}, {randTime(), randTime()}} {
			same(fmt.Sprintf("EarningsByMachine(%d, %s, %s)", h.ID, win[0], win[1]), func(db *sqlstore.DB) (any, error) {
				return db.EarningsByMachine(ctx, h.ID, win[0], win[1])
			})
		}
		same(fmt.Sprintf("PaidOut(%d)", h.ID), func(db *sqlstore.DB) (any, error) { return db.PaidOut(ctx, h.ID) })
	}
	same("FindCharges(all)", func(db *sqlstore.DB) (any, error) {
		return noIDs(db.FindCharges(ctx, suanli.ChargeFilter{Limit: 100000}))
	})
	for _, at := range []time.Time{now, now.Add(time.Duration(rng.Int64N(int64(3 * time.Hour))))} {
		same(fmt.Sprintf("cost so far at %s", at), func(db *sqlstore.DB) (any, error) {
			is, _, err := db.FindInstances(ctx, suanli.InstanceFilter{Limit: 100000}, at)
			var out [][3]int64
			for _, in := range is {
				out = append(out, [3]int64{in.ID, int64(in.CostSoFar), int64(in.BurnRate)})
			}
			return out, err
		})
	}
	same("CheckLedger", func(db *sqlstore.DB) (any, error) {
		c, err := db.CheckLedger(ctx)
		if err != nil {
			return nil, err
		}
		if len(c.SubLedger) > 0 {
			t.Fatalf("sub-ledger audit: %v", c.SubLedger)
		}
		sort.Strings(c.Mismatched)
		return c, nil
	})
	same("FindVolumes", func(db *sqlstore.DB) (any, error) { return db.FindVolumes(ctx, 0, 0, true, now) })
	same("SettledByInstance", func(db *sqlstore.DB) (any, error) { return db.SettledByInstance(ctx) })
	same("Stats", func(db *sqlstore.DB) (any, error) { return db.Stats(ctx) })
	var ids []int64
	for _, a := range accounts {
		ids = append(ids, a.ID)
	}
	if !slices.IsSorted(ids) {
		t.Fatal("accounts out of order")
	}
}
