package market

import (
	"cmp"
	"math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/suanli/suanli"
)

// Index is the in-memory offer index the control plane searches, kept fresh
// by Put and Delete on every listing, rental, release and heartbeat change
// and rebuilt exactly with Replace from the store.
//
// It stores offers column by column in slots (dictionary-encoded, a few
// bytes a field), with a bitset per value for fields with few values and a
// bit-sliced index for the others, so that a search combines bitsets instead
// of visiting offers, and orders only a few candidates. It holds its own
// copy of everything: callers may reuse what they Put, and what Get and
// Search return are fresh copies.
//
// All methods are safe for concurrent use: searches run in parallel with
// each other and exclude only writers. The zero value is not usable; call
// NewIndex.
type Index struct {
	mu sync.RWMutex
	st *state
}

// state is everything the index holds; Replace swaps it whole.
type state struct {
	nwords int      // capacity in 64-slot words
	nslot  uint32   // slots ever used
	live   []uint64 // slots holding an offer
	open   []uint64 // slots rentable by anyone: rentable and not simulated
	// simOf maps the slots of simulated offers (few: providers' tests) to
	// their host, and simBy lists them by host, so that a search finds the
	// viewer's own simulated offers without reading every one's host.
	simOf map[uint32]int64
	simBy map[int64][]uint32
	n     int      // live slots
	free  []uint32 // dead slots, reused first
	ids   idTable
	cols  []*column  // by fieldID; nil for derived fields
	rows  *rowStore  // the columns' codes
	virt  []*bsi     // by fieldID; the derived numeric fields at the default storage size
	vkeys [][]uint64 // by fieldID; their keys at the default storage size
	pool  sync.Pool  // *[]uint64 scratch bitsets of nwords words
	bulk  bool       // loading: bit-sliced indexes are rebuilt at the end
}

// derived fields have no column: their values are computed per search.
func isDerived(id fieldID) bool {
	return id == fDPHTotal || id == fDLPerfPD || id == fFlopsPD || id == fScore
}

// Field IDs the derivations read.
var (
	fDPHBase     = mustField("dph_base")
	fStorageCost = mustField("storage_cost")
	fDLPerf      = mustField("dlperf")
	fReliability = mustField("reliability")
	fTotalFlops  = mustField("total_flops")
	fSimulated   = mustField("simulated")
	fHostID      = mustField("host_id")
	fMachineID   = mustField("machine_id")
)

// defaultStorage is suanli.DefaultStorageGB in milli-GB: the derived fields'
// bit-sliced indexes hold their values at this size.
const defaultStorage = suanli.DefaultStorageGB * 1000

// NewIndex returns an empty index.
func NewIndex() *Index { return &Index{st: newState()} }

func newState() *state {
	st := &state{cols: make([]*column, len(fields)), virt: make([]*bsi, len(fields)), vkeys: make([][]uint64, len(fields)),
		simOf: map[uint32]int64{}, simBy: map[int64][]uint32{}}
	st.rows = newRowStore(len(fields))
	st.ids.idOf = func(s uint32) int64 { return keyInt(st.rows.get(fID, s)) }
	for i := range fields {
		id := fieldID(i)
		switch {
		case isDerived(id):
			st.virt[id] = &bsi{}
		default:
			st.cols[id] = newColumn(id, id == fID || id == fMachineID, st.rows)
		}
	}
	st.grow(1)
	return st
}

func (st *state) grow(nwords int) {
	st.nwords = nwords
	st.live = grow(st.live, nwords)
	st.open = grow(st.open, nwords)
	st.rows.grow(nwords * 64)
	for _, c := range st.cols {
		if c != nil {
			c.grow(nwords)
		}
	}
	for i, b := range st.virt {
		if b != nil {
			b.grow(nwords)
			st.vkeys[i] = append(st.vkeys[i], make([]uint64, nwords*64-len(st.vkeys[i]))...)
		}
	}
}

// Put inserts o, or replaces the offer with the same ID. o.Rentable means
// "rentable ignoring simulation" (see Viewer). The derived fields of o
// (DPHTotal, DLPerfPerDPH, FlopsPerDPH) are ignored: searches compute them.
// NaN numbers are stored as 0 and EndDate to the second, in UTC.
func (x *Index) Put(o *suanli.Offer) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.st.put(o)
}

func (st *state) put(o *suanli.Offer) {
	slot, exists := st.ids.find(o.ID)
	n := st.n
	if !exists {
		slot = st.allocSlot()
		n++
	}
	var rebuild []fieldID
	for i, c := range st.cols {
		if c == nil {
			continue
		}
		v := fields[i].get(o)
		if exists {
			if c.same(slot, v) {
				continue
			}
			c.release(slot)
		}
		if c.assign(slot, v, n, st.bulk) {
			rebuild = append(rebuild, fieldID(i))
		}
	}
	for i, b := range st.virt {
		if b == nil {
			continue
		}
		if exists && !st.bulk {
			b.remove(slot)
		}
		k := st.computeDerived(fieldID(i), slot, defaultStorage)
		st.vkeys[i][slot] = k
		if !st.bulk && b.add(slot, k, n) {
			rebuild = append(rebuild, fieldID(i))
		}
	}
	if o.Rentable && !o.Simulated {
		bitSet(st.open, slot)
	} else {
		bitClear(st.open, slot)
	}
	st.forgetSimulated(slot)
	if o.Simulated {
		st.simOf[slot] = o.HostID
		st.simBy[o.HostID] = append(st.simBy[o.HostID], slot)
	}
	if !exists {
		st.ids.insert(o.ID, slot)
		bitSet(st.live, slot)
		st.n = n
	}
	for _, id := range rebuild {
		st.rebuildBSI(id)
	}
}

// forgetSimulated removes slot from simOf and simBy.
func (st *state) forgetSimulated(slot uint32) {
	host, ok := st.simOf[slot]
	if !ok {
		return
	}
	delete(st.simOf, slot)
	l := st.simBy[host]
	if i := slices.Index(l, slot); i >= 0 {
		l[i] = l[len(l)-1]
		l = l[:len(l)-1]
	}
	if len(l) == 0 {
		delete(st.simBy, host)
	} else {
		st.simBy[host] = l
	}
}

func (st *state) allocSlot() uint32 {
	if k := len(st.free); k > 0 {
		s := st.free[k-1]
		st.free = st.free[:k-1]
		return s
	}
	if int(st.nslot) == st.nwords*64 {
		st.grow(st.nwords * 2)
	}
	st.nslot++
	return st.nslot - 1
}

// rebuildBSI chooses new bins for field id from the live slots.
func (st *state) rebuildBSI(id fieldID) {
	if b := st.virt[id]; b != nil {
		b.rebuild(st.live, st.n, fields[id].kind, func(s uint32) uint64 { return st.derivedKey(id, s, defaultStorage) })
		return
	}
	c := st.cols[id]
	c.bsi.rebuild(st.live, st.n, c.kind, c.key)
}

// Apply puts and then deletes a batch of offers under one lock: searches
// see all of the batch or none of it, and a busy writer (a change feed)
// waits for the readers once a batch rather than once an offer.
func (x *Index) Apply(put []*suanli.Offer, del []int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, o := range put {
		x.st.put(o)
	}
	for _, id := range del {
		x.st.delete(id)
	}
}

// Delete removes the offer with that ID; removing a missing one is a no-op.
func (x *Index) Delete(id int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.st.delete(id)
}

func (st *state) delete(id int64) {
	slot, ok := st.ids.find(id)
	if !ok {
		return
	}
	st.ids.remove(id)
	for _, c := range st.cols {
		if c != nil {
			c.release(slot)
		}
	}
	for _, b := range st.virt {
		if b != nil {
			b.remove(slot)
		}
	}
	bitClear(st.live, slot)
	bitClear(st.open, slot)
	st.forgetSimulated(slot)
	st.free = append(st.free, slot)
	st.n--
}

// Replace makes the index hold exactly offers (a rebuild from the store),
// with every internal structure built afresh for their values. Searches see
// either the old or the new content, never a mix. Offers with the same ID:
// the last wins.
//
// Offers are laid out by GPU model and country, so that searches naming a
// model (most do) touch only that model's part of every bitset.
func (x *Index) Replace(offers []*suanli.Offer) {
	st := newState()
	words := 1
	for words*64 < len(offers) {
		words *= 2
	}
	st.grow(words)
	sorted := slices.Clone(offers)
	slices.SortStableFunc(sorted, func(a, b *suanli.Offer) int {
		if c := strings.Compare(a.GPUName, b.GPUName); c != 0 {
			return c
		}
		if c := strings.Compare(a.Country, b.Country); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	st.bulk = true
	for _, o := range sorted {
		st.put(o)
	}
	st.bulk = false
	for i := range fields {
		if id := fieldID(i); st.virt[id] != nil || (st.cols[id] != nil && st.cols[id].bsi != nil) {
			st.rebuildBSI(id)
		}
	}
	x.mu.Lock()
	x.st = st
	x.mu.Unlock()
}

// Get returns a copy of the offer with that ID. Its derived fields are
// computed for suanli.DefaultStorageGB, and Rentable is as Put (ignoring
// simulation).
func (x *Index) Get(id int64) (*suanli.Offer, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	slot, ok := x.st.ids.find(id)
	if !ok {
		return nil, false
	}
	s := &search{storage: defaultStorage, viewer: Viewer{AllowSimulated: true}}
	return x.st.offer(slot, s), true
}

// Len returns the number of offers in the index.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.st.n
}

// MemBytes estimates the heap the index's structures take, for the
// benchmark and for operators sizing a marketplace.
func (x *Index) MemBytes() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	st := x.st
	b := 8*len(st.live) + 8*len(st.open) + 4*len(st.free) + 4*len(st.ids.tab)
	for _, c := range st.cols {
		if c != nil {
			b += c.memBytes()
		}
	}
	for i, v := range st.virt {
		if v != nil {
			b += v.memBytes() + 8*len(st.vkeys[i])
		}
	}
	return b
}

// offer rebuilds the offer in slot as search s sees it.
func (st *state) offer(slot uint32, s *search) *suanli.Offer {
	o := &suanli.Offer{}
	for i, c := range st.cols {
		if c != nil {
			fields[i].set(o, c.value(slot))
		}
	}
	o.DPHTotal = dphTotal(o.DPHBase, o.StorageCost, s.storage)
	o.DLPerfPerDPH = perDollar(o.DLPerf, o.DPHTotal)
	o.FlopsPerDPH = perDollar(o.TotalFlops, o.DPHTotal)
	o.Score = score(o.DLPerf, o.Reliability, o.DPHTotal)
	o.Rentable = s.viewer.rentable(o)
	return o
}

// derivedKey returns derived field id of slot at storage milli-GB.
func (st *state) derivedKey(id fieldID, slot uint32, storage int64) uint64 {
	if storage == defaultStorage {
		return st.vkeys[id][slot]
	}
	return st.computeDerived(id, slot, storage)
}

// computeDerived computes derived field id of slot at storage milli-GB
// from the stored fields.
func (st *state) computeDerived(id fieldID, slot uint32, storage int64) uint64 {
	base := suanli.Money(keyInt(st.cols[fDPHBase].key(slot)))
	sc := suanli.Money(keyInt(st.cols[fStorageCost].key(slot)))
	dph := dphTotal(base, sc, storage)
	switch id {
	case fDPHTotal:
		return intKey(int64(dph))
	case fDLPerfPD:
		return floatKey(fv(perDollar(keyFloat(st.cols[fDLPerf].key(slot)), dph)).f)
	case fScore:
		return floatKey(fv(perDollar(keyFloat(st.cols[fDLPerf].key(slot))*keyFloat(st.cols[fReliability].key(slot)), dph)).f)
	default:
		return floatKey(fv(perDollar(keyFloat(st.cols[fTotalFlops].key(slot)), dph)).f)
	}
}

// scratch returns a bitset of nwords words (contents undefined) and its
// release function.
func (st *state) scratch() ([]uint64, func()) {
	if p, ok := st.pool.Get().(*[]uint64); ok && len(*p) == st.nwords {
		return *p, func() { st.pool.Put(p) }
	}
	b := make([]uint64, st.nwords)
	return b, func() { st.pool.Put(&b) }
}

// offers rebuilds the offers in slots as search s sees them, reading column
// by column so that the loads of one column overlap.
func (st *state) offers(slots []uint32, s *search) []*suanli.Offer {
	all := make([]suanli.Offer, len(slots))
	out := make([]*suanli.Offer, len(slots))
	for i, c := range st.cols {
		if c == nil {
			continue
		}
		f := &fields[i]
		for j, slot := range slots {
			f.set(&all[j], c.value(slot))
		}
	}
	for j := range all {
		o := &all[j]
		o.DPHTotal = dphTotal(o.DPHBase, o.StorageCost, s.storage)
		o.DLPerfPerDPH = perDollar(o.DLPerf, o.DPHTotal)
		o.FlopsPerDPH = perDollar(o.TotalFlops, o.DPHTotal)
		o.Score = score(o.DLPerf, o.Reliability, o.DPHTotal)
		o.Score = score(o.DLPerf, o.Reliability, o.DPHTotal)
		o.Rentable = s.viewer.rentable(o)
		out[j] = o
	}
	return out
}

// All returns copies of every offer in the index, as Get returns them. It
// is for searches the index cannot answer from its columns (a latency that
// depends on the renter's location), which then Scan the copies.
func (x *Index) All() []*suanli.Offer {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := &search{storage: defaultStorage, viewer: Viewer{AllowSimulated: true}}
	out := make([]*suanli.Offer, 0, x.st.n)
	for w, word := range x.st.live {
		for word != 0 {
			b := uint32(bits.TrailingZeros64(word))
			word &= word - 1
			out = append(out, x.st.offer(uint32(w)*64+b, s))
		}
	}
	return out
}
