package billing

import (
	"runtime"
	"sort"
	"sync"

	"github.com/suanli/suanli"
)

// MeterRow is a time-based meter as the store holds it: what a Book needs
// to close it. Since and Remainder are its state as of the latest close the
// Book is synced to (the store catches a row up before handing it over).
type MeterRow struct {
	ID        int64
	AccountID int64 // the renter, who pays
	HostID    int64 // the provider, who earns
	Rate      suanli.Money
	PeriodUS  int64
	FeeBP     int64
	Active    bool
	Since     int64 // settled up to here (µs)
	Remainder int64
	// MachineID, for compute meters, is the machine whose heartbeats bound
	// how far a close bills them (0: not bounded).
	MachineID int64
}

// meterState is one meter in a Book: 64 bytes, so a million running
// instances (two active meters each) take about 128 MB.
type meterState struct {
	id     int64
	rate   int64
	period int64
	since  int64
	rem    int64
	feeBP  int64
	renter int32 // index in Book.accounts
	host   int32
	mach   int32 // index in Book.machines; -1: not bounded by heartbeats
}

// Book is the in-memory set of active time-based meters, sorted by meter id,
// with a dense table of the accounts they name. It is what the store keeps
// between hour closes (DESIGN §6: hot paths in memory, rebuilt exactly from
// the store). The zero value is an empty Book. A Book is not safe for
// concurrent use: its owner serialises closes.
type Book struct {
	meters   []meterState
	accounts []int64
	index    map[int64]int32
	machines []int64 // the machines compute meters run on, by index
	mindex   map[int64]int32
	billed   []int64 // by machine index: how far the last close billed compute there (0: unknown)
	gen      int64   // bumped by every change, so a stale Close cannot be applied
}

// Len returns how many meters the Book holds.
func (b *Book) Len() int { return len(b.meters) }

// Accounts returns how many distinct accounts the Book's meters name.
func (b *Book) Accounts() int { return len(b.accounts) }

// Reset empties the Book.
func (b *Book) Reset() {
	b.meters, b.accounts, b.index = b.meters[:0], b.accounts[:0], nil
	b.machines, b.mindex, b.billed = b.machines[:0], nil, b.billed[:0]
	b.gen++
}

// Machines returns the machines the Book's compute meters run on, by
// index: Close takes their last heartbeats in the same order.
func (b *Book) Machines() []int64 { return b.machines }

// SetMachineBilled records how far the latest close billed compute on a
// machine (a rebuild reads it from the store), so that no later close bills
// it less far: the through times of a machine's closes never go back, which
// is what lets the store catch a meter up from the last close alone.
func (b *Book) SetMachineBilled(machineID, through int64) {
	i := b.machine(machineID)
	b.billed[i] = max(b.billed[i], through)
}

func (b *Book) machine(id int64) int32 {
	if i, ok := b.mindex[id]; ok {
		return i
	}
	if b.mindex == nil {
		b.mindex = map[int64]int32{}
	}
	i := int32(len(b.machines))
	b.machines = append(b.machines, id)
	b.billed = append(b.billed, 0)
	b.mindex[id] = i
	return i
}

func (b *Book) account(id int64) int32 {
	if i, ok := b.index[id]; ok {
		return i
	}
	if b.index == nil {
		b.index = map[int64]int32{}
	}
	i := int32(len(b.accounts))
	b.accounts = append(b.accounts, id)
	b.index[id] = i
	return i
}

func (b *Book) state(r MeterRow) meterState {
	m := meterState{id: r.ID, rate: int64(r.Rate), period: r.PeriodUS, since: r.Since, rem: r.Remainder,
		renter: b.account(r.AccountID), host: b.account(r.HostID), feeBP: r.FeeBP, mach: -1}
	if r.MachineID != 0 {
		m.mach = b.machine(r.MachineID)
	}
	return m
}

// Append adds an active meter whose id is above every id in the Book (a
// rebuild reads meters in id order). Inactive rows are skipped.
func (b *Book) Append(r MeterRow) error {
	if !r.Active {
		return nil
	}
	if n := len(b.meters); n > 0 && b.meters[n-1].id >= r.ID {
		return suanli.Errorf(suanli.EINTERNAL, "billing: meter %d appended after meter %d", r.ID, b.meters[n-1].id)
	}
	b.meters = append(b.meters, b.state(r))
	b.gen++
	return nil
}

// Merge applies changed meters (sorted by id, each id once): an active row
// replaces or adds its meter, an inactive one removes it.
func (b *Book) Merge(rows []MeterRow) error {
	if len(rows) == 0 {
		return nil
	}
	for i, r := range rows {
		if i > 0 && rows[i-1].ID >= r.ID {
			return suanli.Errorf(suanli.EINTERNAL, "billing: merge rows out of order at meter %d", r.ID)
		}
	}
	// In place, without a second copy of the slice: replace and remove in a
	// forward pass, then merge the new meters in from the back.
	ms := b.meters
	w, i := 0, 0
	var adds []meterState
	for _, r := range rows {
		j := i + sort.Search(len(ms)-i, func(k int) bool { return ms[i+k].id >= r.ID })
		w += copy(ms[w:], ms[i:j])
		i = j
		found := i < len(ms) && ms[i].id == r.ID
		if found {
			i++
		}
		switch {
		case r.Active && found:
			ms[w] = b.state(r)
			w++
		case r.Active:
			adds = append(adds, b.state(r))
		}
	}
	w += copy(ms[w:], ms[i:])
	ms = ms[:w]
	if len(adds) > 0 {
		n := len(ms)
		ms = append(ms, adds...) // grow; the tail is overwritten below
		for k, j := len(ms)-1, len(adds)-1; j >= 0; k-- {
			if n > 0 && ms[n-1].id > adds[j].id {
				ms[k] = ms[n-1]
				n--
			} else {
				ms[k] = adds[j]
				j--
			}
		}
	}
	b.meters = ms
	b.gen++
	return nil
}

// Close is what closing a Book at a time settles. It is computed without
// changing the Book; Apply moves the Book's meters to it once the store has
// committed it.
type Close struct {
	Through int64 // µs: every meter is settled up to here (compute: see MachineBilled)
	Meters  int   // meters the close advanced
	Lines   int   // meters it charged (a positive amount): the sub-ledger's lines
	Legs    int   // postings a row-per-charge ledger would have written for those lines
	Amount  suanli.Money
	Fees    suanli.Money
	// Digest is the sum of LineDigest over the close's lines: an audit that
	// re-derives them from spans must reach the same value.
	Digest uint64

	book     *Book
	gen      int64
	rem      []int64        // each meter's remainder after the close (by Book index)
	billed   []int64        // by machine index: how far compute is billed there
	used     []bool         // by machine index: a compute meter runs there
	charged  []suanli.Money // by account index: what renters pay
	earned   []suanli.Money // by account index: what providers earn
	accounts []int64
}

// MachineBilled is how far a close billed compute on one machine, when
// that is short of the close's time.
type MachineBilled struct {
	MachineID int64
	Through   int64 // µs
}

// Close settles every meter in the Book up to through, in parallel over the
// machine's cores. Compute meters are settled no further than their
// machine's last heartbeat — beats, by Machines() index (a machine missing
// from beats is not bounded) — and never less far than the previous close
// billed that machine: a host that falls silent is billed to its last
// heartbeat, not beyond (DESIGN §4). Meters already settled up to their
// time are left as they are.
func (b *Book) Close(through int64, beats []int64) *Close {
	c := &Close{Through: through, book: b, gen: b.gen, rem: make([]int64, len(b.meters)), accounts: b.accounts,
		billed: make([]int64, len(b.machines)), used: make([]bool, len(b.machines))}
	for i := range c.billed {
		t := through
		if i < len(beats) && beats[i] < t {
			t = beats[i]
		}
		c.billed[i] = max(t, min(b.billed[i], through))
	}
	workers := min(runtime.GOMAXPROCS(0), len(b.meters)/(1<<14)+1)
	parts := make([]closePart, workers)
	var wg sync.WaitGroup
	for w := range parts {
		lo, hi := len(b.meters)*w/workers, len(b.meters)*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[w].run(b, b.meters[lo:hi], c.rem[lo:hi], through, c.billed)
		}()
	}
	wg.Wait()
	c.charged, c.earned = make([]suanli.Money, len(b.accounts)), make([]suanli.Money, len(b.accounts))
	for _, p := range parts {
		c.Meters += p.meters
		c.Lines += p.lines
		c.Legs += p.legs
		c.Amount += p.amount
		c.Fees += p.fees
		c.Digest += p.digest
		for i, v := range p.charged {
			c.charged[i] += v
		}
		for i, v := range p.earned {
			c.earned[i] += v
		}
		for i, u := range p.used {
			c.used[i] = c.used[i] || u
		}
	}
	return c
}

// MachineBilled lists the machines whose compute the close billed short of
// its time (their last heartbeat was earlier): the store keeps them, for
// the sub-ledger to derive the same lines.
func (c *Close) MachineBilled() []MachineBilled {
	var out []MachineBilled
	for i, t := range c.billed {
		if c.used[i] && t < c.Through {
			out = append(out, MachineBilled{MachineID: c.book.machines[i], Through: t})
		}
	}
	return out
}

type closePart struct {
	meters, lines, legs int
	amount, fees        suanli.Money
	digest              uint64
	charged, earned     []suanli.Money
	used                []bool
}

func (p *closePart) run(b *Book, ms []meterState, rems []int64, through int64, billed []int64) {
	p.charged, p.earned = make([]suanli.Money, len(b.accounts)), make([]suanli.Money, len(b.accounts))
	p.used = make([]bool, len(billed))
	for i := range ms {
		m := &ms[i]
		t := through
		if m.mach >= 0 {
			t = billed[m.mach]
			p.used[m.mach] = true
		}
		if t <= m.since {
			rems[i] = m.rem
			continue
		}
		amt, rem := suanli.Accrue(suanli.Money(m.rate), t-m.since, m.period, m.rem)
		rems[i] = rem
		p.meters++
		if amt <= 0 {
			continue
		}
		fee := Fee(amt, m.feeBP)
		p.charged[m.renter] += amt
		p.earned[m.host] += amt - fee
		p.amount += amt
		p.fees += fee
		p.lines++
		p.legs += Legs(amt, fee)
		p.digest += LineDigest(m.id, b.accounts[m.renter], b.accounts[m.host], amt, fee)
	}
}

// LedgerPostings returns the close as balanced double-entry postings, one
// per ledger account: each renter's balance pays what its meters charged,
// each provider's earnings gain what theirs earned after the fee, and the
// platform fee account gains the fees. Zero postings are left out; the
// postings sum to zero.
func (c *Close) LedgerPostings() []suanli.Posting {
	var out []suanli.Posting
	for i, v := range c.charged {
		if v != 0 {
			out = append(out, suanli.Posting{Account: suanli.LedgerBalance(c.accounts[i]), Amount: -v})
		}
	}
	for i, v := range c.earned {
		if v != 0 {
			out = append(out, suanli.Posting{Account: suanli.LedgerEarnings(c.accounts[i]), Amount: v})
		}
	}
	if c.Fees != 0 {
		out = append(out, suanli.Posting{Account: suanli.LedgerPlatformFees, Amount: c.Fees})
	}
	return out
}

// Apply moves the Book's meters to the close: each advanced meter is settled
// up to its time with its new remainder, and each machine's compute is
// billed up to where the close left it. It fails when the Book changed
// since the close was computed.
func (b *Book) Apply(c *Close) error {
	if c.book != b || c.gen != b.gen {
		return suanli.Errorf(suanli.EINTERNAL, "billing: close at %d is stale: the book changed after it was computed", c.Through)
	}
	for i := range b.meters {
		m := &b.meters[i]
		t := c.Through
		if m.mach >= 0 {
			t = c.billed[m.mach]
		}
		if t > m.since {
			m.since, m.rem = t, c.rem[i]
		}
	}
	for i, u := range c.used {
		if u {
			b.billed[i] = c.billed[i]
		}
	}
	b.gen++
	return nil
}

// Fee is the platform's cut of a charge of amount at feeBP basis points,
// rounded toward zero; the provider earns the rest.
func Fee(amount suanli.Money, feeBP int64) suanli.Money {
	return suanli.MulDiv(amount, feeBP, 10_000)
}

// Legs is how many postings one charge makes in a row-per-charge ledger:
// the renter's, the provider's unless the fee takes it all, and the fee's
// unless it is zero.
func Legs(amount, fee suanli.Money) int {
	n := 1
	if amount-fee != 0 {
		n++
	}
	if fee != 0 {
		n++
	}
	return n
}

// LineDigest hashes one charge line (meter, renter, provider, amount, fee).
// Digests of a close's lines are summed, so the order lines are derived in
// does not matter.
func LineDigest(meterID, renter, host int64, amount, fee suanli.Money) uint64 {
	h := mix(uint64(meterID) ^ 0x9e3779b97f4a7c15)
	h = mix(h ^ uint64(renter))
	h = mix(h ^ uint64(host))
	h = mix(h ^ uint64(amount))
	return mix(h ^ uint64(fee))
}

// mix is the SplitMix64 finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
