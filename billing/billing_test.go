package billing_test

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/billing"
)

// step is a row-per-charge settlement of one meter at one time: the old
// design, kept here as the reference the close and the sub-ledger must match.
type step struct {
	since, rem int64
}

func (s *step) settle(rate suanli.Money, period, at int64) (suanli.Money, int64, bool) {
	if at <= s.since {
		return 0, 0, false
	}
	from := s.since
	amt, rem := suanli.Accrue(rate, at-s.since, period, s.rem)
	s.since, s.rem = at, rem
	return amt, from, true
}

func randSpan(rng *rand.Rand) billing.Span {
	period := []int64{suanli.MicrosPerHour, suanli.MicrosPerMonth, 1_000_000_000, 7}[rng.IntN(4)]
	return billing.Span{MeterID: rng.Int64N(1000) + 1, AccountID: rng.Int64N(5) + 1, HostID: rng.Int64N(5) + 1,
		Rate: suanli.Money(rng.Int64N(5_000_000)), PeriodUS: period, FeeBP: rng.Int64N(10_001),
		Since: rng.Int64N(10_000_000_000), Remainder: rng.Int64N(period)}
}

func randThroughs(rng *rand.Rand, since int64, n int) []int64 {
	t := since - rng.Int64N(3)*rng.Int64N(5_000_000_000) // some closes before the span began
	var out []int64
	for range n {
		t += rng.Int64N(4_000_000_000) + 1
		out = append(out, t)
	}
	return out
}

func TestSpanLinesMatchRowPerCharge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		s := randSpan(rng)
		ts := randThroughs(rng, s.Since, rng.IntN(40))
		ref := step{since: s.Since, rem: s.Remainder}
		var want []billing.Line
		for k, at := range ts {
			amt, from, ok := ref.settle(s.Rate, s.PeriodUS, at)
			if ok && amt > 0 {
				want = append(want, billing.Line{Close: k, From: from, To: at, Amount: amt, Fee: billing.Fee(amt, s.FeeBP)})
			}
		}
		got := slices.Collect(s.Lines(ts, 0, len(ts)))
		if !slices.Equal(got, want) {
			t.Fatalf("span %+v throughs %v: lines\n%v\nwant\n%v", s, ts, got, want)
		}
		var sum suanli.Money
		for _, l := range got {
			sum += l.Amount
		}
		if len(ts) > 0 {
			if tot := s.Total(ts[len(ts)-1]); tot != sum {
				t.Fatalf("span %+v: Total %d, lines sum to %d", s, tot, sum)
			}
			since, rem := s.State(ts[len(ts)-1])
			if since != max(ref.since, s.Since) || rem != ref.rem {
				t.Fatalf("span %+v: State (%d, %d), want (%d, %d)", s, since, rem, ref.since, ref.rem)
			}
		}
		// Any window yields the same lines as the whole, cut to it.
		lo := rng.IntN(len(ts) + 1)
		hi := lo + rng.IntN(len(ts)-lo+1)
		var cut []billing.Line
		for _, l := range want {
			if l.Close >= lo && l.Close < hi {
				cut = append(cut, l)
			}
		}
		if got := slices.Collect(s.Lines(ts, lo, hi)); !slices.Equal(got, cut) {
			t.Fatalf("span %+v window [%d,%d): %v, want %v", s, lo, hi, got, cut)
		}
	}
}

func TestBookCloseMatchesRowPerCharge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var b billing.Book
	type ref struct {
		row  billing.MeterRow
		st   step
		span billing.Span
		ts   []int64 // closes since the span began
	}
	refs := map[int64]*ref{}
	nextID := int64(1)
	add := func() billing.MeterRow {
		s := randSpan(rng)
		r := billing.MeterRow{ID: nextID, AccountID: s.AccountID, HostID: s.HostID, Rate: s.Rate, PeriodUS: s.PeriodUS, FeeBP: s.FeeBP,
			Active: true, Since: s.Since, Remainder: s.Remainder}
		s.MeterID = nextID
		nextID++
		refs[r.ID] = &ref{row: r, st: step{since: r.Since, rem: r.Remainder}, span: s}
		return r
	}
	for range 5000 {
		if err := b.Append(add()); err != nil {
			t.Fatal(err)
		}
	}
	through := int64(5_000_000_000)
	for round := 0; round < 30; round++ {
		through += rng.Int64N(4_000_000_000) + 1
		c := b.Close(through, nil)
		charged := map[string]*big.Int{}
		var lines, legs, meters int
		var digest uint64
		var amount suanli.Money
		for _, r := range refs {
			amt, _, ok := r.st.settle(r.row.Rate, r.row.PeriodUS, through)
			r.ts = append(r.ts, through)
			if !ok {
				continue
			}
			meters++
			if amt == 0 {
				continue
			}
			fee := billing.Fee(amt, r.row.FeeBP)
			lines++
			legs += billing.Legs(amt, fee)
			amount += amt
			digest += billing.LineDigest(r.row.ID, r.row.AccountID, r.row.HostID, amt, fee)
			for acct, v := range map[string]suanli.Money{suanli.LedgerBalance(r.row.AccountID): -amt,
				suanli.LedgerEarnings(r.row.HostID): amt - fee, suanli.LedgerPlatformFees: fee} {
				if charged[acct] == nil {
					charged[acct] = new(big.Int)
				}
				charged[acct].Add(charged[acct], big.NewInt(int64(v)))
			}
		}
		if c.Meters != meters || c.Lines != lines || c.Legs != legs || c.Amount != amount || c.Digest != digest {
			t.Fatalf("round %d: close %+v, want meters %d lines %d legs %d amount %d digest %x", round, c, meters, lines, legs, amount, digest)
		}
		var sum suanli.Money
		for _, p := range c.LedgerPostings() {
			sum += p.Amount
			if want := charged[p.Account]; want == nil || want.Int64() != int64(p.Amount) {
				t.Fatalf("round %d: posting %s %d, want %v", round, p.Account, p.Amount, want)
			}
			delete(charged, p.Account)
		}
		for acct, v := range charged {
			if v.Sign() != 0 {
				t.Fatalf("round %d: no posting for %s (%s)", round, acct, v)
			}
		}
		if sum != 0 {
			t.Fatalf("round %d: postings sum to %d", round, sum)
		}
		if err := b.Apply(c); err != nil {
			t.Fatal(err)
		}
		if err := b.Apply(c); err == nil {
			t.Fatal("a close applied twice")
		}
		// The sub-ledger derives the same lines.
		var d uint64
		for _, r := range refs {
			for l := range r.span.Lines(r.ts, len(r.ts)-1, len(r.ts)) {
				d += r.span.Digest(l)
			}
		}
		if d != c.Digest {
			t.Fatalf("round %d: derived digest %x, close %x", round, d, c.Digest)
		}
		// Churn: stop some meters, restart others with new state, add new ones.
		var changes []billing.MeterRow
		for id := int64(1); id < nextID; id += int64(rng.IntN(400) + 1) {
			r := refs[id]
			if r == nil {
				continue
			}
			row := r.row
			row.Since, row.Remainder = r.st.since, r.st.rem
			if rng.IntN(2) == 0 {
				row.Active = false
				delete(refs, id)
			} else {
				r.span.Since, r.span.Remainder, r.ts = row.Since, row.Remainder, nil
			}
			changes = append(changes, row)
		}
		for range rng.IntN(50) {
			changes = append(changes, add())
		}
		if err := b.Merge(changes); err != nil {
			t.Fatal(err)
		}
		if b.Len() != len(refs) {
			t.Fatalf("round %d: book holds %d meters, want %d", round, b.Len(), len(refs))
		}
	}
}

func TestBookRejectsDisorder(t *testing.T) {
	var b billing.Book
	if err := b.Append(billing.MeterRow{ID: 5, Active: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(billing.MeterRow{ID: 5, Active: true}); err == nil {
		t.Error("Append accepted a duplicate id")
	}
	if err := b.Merge([]billing.MeterRow{{ID: 7, Active: true}, {ID: 6, Active: true}}); err == nil {
		t.Error("Merge accepted rows out of order")
	}
}

func TestBookMerge(t *testing.T) {
	var b billing.Book
	for _, id := range []int64{2, 4, 6, 8} {
		if err := b.Append(billing.MeterRow{ID: id, AccountID: 1, HostID: 2, Rate: 3_600_000, PeriodUS: suanli.MicrosPerHour, Active: true}); err != nil {
			t.Fatal(err)
		}
	}
	err := b.Merge([]billing.MeterRow{
		{ID: 1, AccountID: 1, HostID: 2, Rate: 3_600_000, PeriodUS: suanli.MicrosPerHour, Active: true},
		{ID: 3, AccountID: 1, HostID: 2, Rate: 3_600_000, PeriodUS: suanli.MicrosPerHour, Active: true},
		{ID: 4},
		{ID: 6, AccountID: 1, HostID: 2, Rate: 7_200_000, PeriodUS: suanli.MicrosPerHour, Active: true},
		{ID: 9, AccountID: 1, HostID: 2, Rate: 3_600_000, PeriodUS: suanli.MicrosPerHour, Active: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Meters 1, 2, 3, 6 (at twice the rate), 8, 9: one second of each.
	c := b.Close(1_000_000, nil)
	if c.Meters != 6 || c.Amount != 7_000 {
		t.Errorf("after merge: %d meters charged %d, want 6 meters charged 7000", c.Meters, c.Amount)
	}
	if b.Len() != 6 {
		t.Errorf("book holds %d meters, want 6", b.Len())
	}
}

// TestBookCloseStopsAtHeartbeats: compute meters are billed no further than
// their machine's last heartbeat, never less far than the previous close
// billed that machine, and the lines the sub-ledger derives from each
// machine's through times are the close's.
func TestBookCloseStopsAtHeartbeats(t *testing.T) {
	var b billing.Book
	const hour = suanli.MicrosPerHour
	rows := []billing.MeterRow{
		{ID: 1, AccountID: 1, HostID: 9, Rate: 3_600_000, PeriodUS: hour, Active: true, MachineID: 100}, // compute on a healthy host
		{ID: 2, AccountID: 1, HostID: 9, Rate: 3_600_000, PeriodUS: hour, Active: true, MachineID: 200}, // compute on a host that falls silent
		{ID: 3, AccountID: 1, HostID: 9, Rate: 3_600_000, PeriodUS: hour, Active: true},                 // storage: not bounded
	}
	for _, r := range rows {
		if err := b.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	machines := b.Machines()
	beat := func(m100, m200 int64) []int64 {
		out := make([]int64, len(machines))
		for i, id := range machines {
			out[i] = map[int64]int64{100: m100, 200: m200}[id]
		}
		return out
	}
	spans := map[int64]billing.Span{}
	for _, r := range rows {
		spans[r.ID] = billing.Span{MeterID: r.ID, AccountID: r.AccountID, HostID: r.HostID, Rate: r.Rate, PeriodUS: r.PeriodUS}
	}
	ts := map[int64][]int64{}
	// Close 1 at 1h: both hosts beat at 59 min 50 s.
	// Close 2 at 2h: host 200 is silent since 1h30 m; host 100 beat after the close.
	// Close 3 at 3h: host 200's clock went back: its through stays at 1h30 m.
	for k, step := range []struct {
		through, b100, b200 int64
		want                map[int64]int64 // µs billed so far per meter
	}{
		{hour, hour - 10_000_000, hour - 10_000_000, map[int64]int64{1: hour - 10_000_000, 2: hour - 10_000_000, 3: hour}},
		{2 * hour, 3 * hour, hour + hour/2, map[int64]int64{1: 2 * hour, 2: hour + hour/2, 3: 2 * hour}},
		{3 * hour, 3 * hour, hour, map[int64]int64{1: 3 * hour, 2: hour + hour/2, 3: 3 * hour}},
	} {
		c := b.Close(step.through, beat(step.b100, step.b200))
		billed := map[int64]int64{}
		for _, mb := range c.MachineBilled() {
			billed[mb.MachineID] = mb.Through
		}
		for _, r := range rows {
			tk := step.through
			if r.MachineID != 0 {
				if v, ok := billed[r.MachineID]; ok {
					tk = v
				}
			}
			ts[r.ID] = append(ts[r.ID], tk)
		}
		if err := b.Apply(c); err != nil {
			t.Fatal(err)
		}
		var d uint64
		for id, sp := range spans {
			var sum suanli.Money
			for l := range sp.Lines(ts[id], 0, len(ts[id])) {
				sum += l.Amount
				if l.Close == k {
					d += sp.Digest(l)
				}
			}
			if want := suanli.Money(step.want[id] / 1000); sum != want {
				t.Errorf("close %d: meter %d billed %d in all, want %d", k+1, id, sum, want)
			}
		}
		if d != c.Digest {
			t.Errorf("close %d: lines derived from the machines' through times digest to %x, the close to %x", k+1, d, c.Digest)
		}
	}
}
