package market

import (
	"cmp"
	"math/bits"
	"slices"

	"github.com/suanli/suanli"
)

// Search runs q for viewer v: the effective conditions (DefaultQuery unless
// replaced or dropped, then q.Query), ordered by q.Order (DefaultOrder when
// empty; ties by id ascending), q.Offset and q.Limit (0 → DefaultLimit, at
// most MaxLimit). dph_total and the per-dollar ratios are computed for
// q.StorageGB (0 → suanli.DefaultStorageGB) and rentable for v; the returned
// offers are copies carrying those values. Total counts all matches. With
// q.Explain set, Explain says which condition removed how many offers and
// the nearest misses. Errors are EINVALID naming the field at fault.
//
// A search returns what Scan returns over the same offers. Conditions and
// orders on the derived fields use the index at the default storage size;
// at other sizes they check the matching offers one by one.
func (x *Index) Search(q suanli.OfferQuery, v Viewer) (*suanli.OfferResult, error) {
	s, err := prepare(q, v)
	if err != nil {
		return nil, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.st.search(s), nil
}

func (st *state) search(s *search) *suanli.OfferResult {
	m, done := st.scratch()
	defer done()
	v, seeded := st.seed(s, m)
	var ex *explainer
	var prev []uint64
	if s.explain {
		ex = newExplainer(s, st.n)
		p, done := st.scratch()
		defer done()
		prev = p
	}
	for _, i := range st.plan(s, ex != nil) {
		c := &s.conds[i]
		if i == seeded {
			continue
		}
		if ex != nil {
			copy(prev[v.lo:v.hi], m[v.lo:v.hi])
		}
		st.apply(s, c, m, v)
		if ex != nil {
			andNotInto(prev[v.lo:v.hi], m[v.lo:v.hi])
			forEach(prev[v.lo:v.hi], func(slot uint32) {
				ex.steps[i].note(c, st.valAt(s, c.id, slot+uint32(v.lo*64)))
			})
		}
		v = v.shrink(m)
	}
	total := popcount(m[v.lo:v.hi])
	res := &suanli.OfferResult{Total: total, Offers: []*suanli.Offer{}}
	if s.offset < total {
		k := min(s.offset+s.limit, total)
		keys := append(slices.Clip(s.order), OrderKey{Field: "id", id: fID})
		res.Offers = st.offers(st.top(s, m, v, total, k, keys)[s.offset:], s)
	}
	if ex != nil {
		res.Explain = ex.result(total)
	}
	return res
}

// seed fills m with the slots a search starts from and returns its window
// and the index of the condition it applied (-1 for none): the slots named
// by a condition on id, or the rentable ones for "rentable=true", or the
// live ones. An explaining search starts from the live ones, to count what
// each condition removes.
func (st *state) seed(s *search, m []uint64) (win, int) {
	if s.explain {
		copy(m, st.live)
		return win{0, st.nwords}.shrink(m), -1
	}
	for i := range s.conds {
		c := &s.conds[i]
		if c.id != fID || (c.Op != OpEQ && c.Op != OpIn) {
			continue
		}
		lo, hi := st.nwords, 0
		for _, val := range c.vals {
			if slot, ok := st.ids.find(val.i); ok {
				lo, hi = min(lo, int(slot>>6)), max(hi, int(slot>>6)+1)
			}
		}
		if hi <= lo {
			return win{}, i
		}
		clear(m[lo:hi])
		for _, val := range c.vals {
			if slot, ok := st.ids.find(val.i); ok {
				bitSet(m, slot)
			}
		}
		return win{lo, hi}, i
	}
	for i := range s.conds {
		c := &s.conds[i]
		if c.id != fRentable || !c.match(bv(true)) || c.match(bv(false)) {
			continue
		}
		copy(m, st.open)
		// Add the simulated offers this viewer may rent: all of them, or
		// its own.
		rent, sim := valueBits(st.cols[fRentable], true), valueBits(st.cols[fSimulated], true)
		switch {
		case rent == nil || sim == nil:
		case s.viewer.AllowSimulated:
			for w := range m {
				m[w] |= rent[w] & sim[w] & st.live[w]
			}
		case s.viewer.AccountID != 0:
			for _, slot := range st.simBy[s.viewer.AccountID] {
				if rent[slot>>6]&(1<<(slot&63)) != 0 {
					bitSet(m, slot)
				}
			}
		}
		return win{0, st.nwords}.shrink(m), i
	}
	copy(m, st.live)
	return win{0, st.nwords}.shrink(m), -1
}

// plan returns the order to apply the conditions in: as written when
// explaining (the explanation follows the query), otherwise the cheap
// bitset ones first, so that the costlier ones see fewer words.
func (st *state) plan(s *search, explain bool) []int {
	order := make([]int, len(s.conds))
	for i := range order {
		order[i] = i
	}
	if explain {
		return order
	}
	cost := func(i int) int {
		c := &s.conds[i]
		switch {
		case c.id == fRentable:
			return 1
		case isDerived(c.id):
			return 2
		case st.cols[c.id].vbits != nil:
			return 0
		case st.cols[c.id].bsi != nil:
			return 2
		}
		return 3
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(cost(a), cost(b)) })
	return order
}

// valAt reads field id of slot as search s sees it.
func (st *state) valAt(s *search, id fieldID, slot uint32) val {
	switch {
	case id == fRentable:
		return bv(st.rentableAt(s, slot))
	case isDerived(id):
		return valOfKey(fields[id].kind, st.derivedKey(id, slot, s.storage))
	}
	return st.cols[id].value(slot)
}

// keyAt reads numeric field id of slot as search s sees it.
func (st *state) keyAt(s *search, id fieldID, slot uint32) uint64 {
	switch {
	case id == fRentable:
		return keyOf(kindBool, bv(st.rentableAt(s, slot)))
	case isDerived(id):
		return st.derivedKey(id, slot, s.storage)
	}
	return st.cols[id].key(slot)
}

func (st *state) rentableAt(s *search, slot uint32) bool {
	if st.cols[fRentable].key(slot) != intKey(1) {
		return false
	}
	if st.cols[fSimulated].key(slot) != intKey(1) || s.viewer.AllowSimulated {
		return true
	}
	return s.viewer.AccountID != 0 && keyInt(st.cols[fHostID].key(slot)) == s.viewer.AccountID
}

// apply keeps in m the slots that satisfy c, within window v.
func (st *state) apply(s *search, c *Cond, m []uint64, v win) {
	id := c.id
	k := fields[id].kind
	list := c.Op == OpIn || c.Op == OpNotIn
	switch {
	case id == fRentable:
		st.applyRentable(s, c, m, v)
	case isDerived(id):
		if s.storage == defaultStorage && !list {
			st.virt[id].filter(m, v, c.Op, keyOf(k, c.vals[0]), false, func(slot uint32) uint64 {
				return st.derivedKey(id, slot, defaultStorage)
			})
			return
		}
		filterSlots(m, v, func(slot uint32) bool { return c.match(valOfKey(k, st.derivedKey(id, slot, s.storage))) })
	default:
		col := st.cols[id]
		switch {
		case col.vbits != nil:
			applyVbits(c, col, m, v)
		case col.bsi != nil && !list:
			x := keyOf(k, c.vals[0])
			_, present := col.nlook[x]
			col.bsi.filter(m, v, c.Op, x, !col.raw && !present, col.key)
		case col.raw || !col.isStr:
			keys := make([]uint64, len(c.vals))
			for i, v := range c.vals {
				keys[i] = keyOf(k, v)
			}
			in := c.Op == OpIn
			filterSlots(m, v, func(slot uint32) bool { return slices.Contains(keys, col.key(slot)) == in })
		default:
			pass := passCodes(c, col)
			filterSlots(m, v, func(slot uint32) bool { return pass[col.code(slot)] })
		}
	}
}

// filterSlots keeps in m the slots for which keep is true.
func filterSlots(m []uint64, v win, keep func(slot uint32) bool) {
	for w := v.lo; w < v.hi; w++ {
		mw := m[w]
		out := mw
		for x := mw; x != 0; x &= x - 1 {
			t := bits.TrailingZeros64(x)
			if !keep(uint32(w<<6 | t)) {
				out &^= 1 << t
			}
		}
		m[w] = out
	}
}

// passCodes evaluates c once per dictionary value of col.
func passCodes(c *Cond, col *column) []bool {
	pass := make([]bool, len(col.refs))
	for code, r := range col.refs {
		if r == 0 {
			continue
		}
		if col.isStr {
			pass[code] = c.match(sv(col.strs[code]))
		} else {
			pass[code] = c.match(valOfKey(col.kind, col.nkeys[code]))
		}
	}
	return pass
}

// applyVbits keeps in m the slots whose value passes c, OR-ing the bitsets
// of the passing values (or AND-NOT-ing the failing ones, if fewer).
func applyVbits(c *Cond, col *column, m []uint64, v win) {
	pass := passCodes(c, col)
	var in, out [][]uint64
	for code, r := range col.refs {
		if r == 0 {
			continue
		}
		if pass[code] {
			in = append(in, col.vbits[code])
		} else {
			out = append(out, col.vbits[code])
		}
	}
	switch {
	case len(out) == 0:
	case len(in) == 0:
		clear(m[v.lo:v.hi])
	case len(in) <= len(out):
		for w := v.lo; w < v.hi; w++ {
			if mw := m[w]; mw != 0 {
				var acc uint64
				for _, b := range in {
					acc |= b[w]
				}
				m[w] = mw & acc
			}
		}
	default:
		for w := v.lo; w < v.hi; w++ {
			if mw := m[w]; mw != 0 {
				var acc uint64
				for _, b := range out {
					acc |= b[w]
				}
				m[w] = mw &^ acc
			}
		}
	}
}

// valueBits returns the bitset of the slots of bool column col holding b,
// or nil when none does.
func valueBits(col *column, b bool) []uint64 {
	code, ok := col.nlook[keyOf(kindBool, bv(b))]
	if !ok || col.vbits == nil {
		return nil
	}
	return col.vbits[code]
}

// applyRentable applies a condition on rentable, which depends on the
// viewer: rentable and (not simulated, or the viewer may see it).
func (st *state) applyRentable(s *search, c *Cond, m []uint64, v win) {
	passT, passF := c.match(bv(true)), c.match(bv(false))
	switch {
	case passT && passF:
		return
	case !passT && !passF:
		clear(m[v.lo:v.hi])
		return
	}
	rent := valueBits(st.cols[fRentable], true)
	if rent == nil {
		if passT {
			clear(m[v.lo:v.hi])
		}
		return
	}
	sim := valueBits(st.cols[fSimulated], true)
	for w := v.lo; w < v.hi; w++ {
		mw := m[w]
		if mw == 0 {
			continue
		}
		r := rent[w]
		if sim != nil && sim[w]&r != 0 && !s.viewer.AllowSimulated {
			simr := sim[w] & r
			r &^= simr
			if s.viewer.AccountID != 0 {
				for x := simr & mw; x != 0; x &= x - 1 {
					t := bits.TrailingZeros64(x)
					if host, ok := st.simOf[uint32(w<<6|t)]; ok && host == s.viewer.AccountID {
						r |= 1 << t
					}
				}
			}
		}
		if passT {
			m[w] = mw & r
		} else {
			m[w] = mw &^ r
		}
	}
}

// exactMax is how many candidates top sorts exactly rather than narrowing
// further with an index (a variable so that tests can lower it).
var exactMax = 4096

// narrowStop is how few candidates the bit-sliced narrowing aims for: each
// candidate costs a few cache misses to compare exactly.
const narrowStop = 256

// top returns the first k slots of m (which holds total slots within
// window v) in the order of keys, which ends with id so that no two slots
// tie.
func (st *state) top(s *search, m []uint64, v win, total, k int, keys []OrderKey) []uint32 {
	if k <= 0 {
		return nil
	}
	if total <= exactMax || len(keys) == 0 {
		return st.selectTop(s, appendSlots(make([]uint32, 0, total), m, v), k, keys)
	}
	key := keys[0]
	if b := st.bsiFor(s, key.id); b != nil {
		e, re := st.scratch()
		defer re()
		stop := max(narrowStop, 2*k)
		if mm, mv, ok := st.bestBins(b, m, v, total, k, key.Desc); ok {
			m, v = mm, mv
			defer st.release(mm)
		}
		g, ne, ws := b.narrow(m, e, v, k, key.Desc, stop)
		if ws != nil { // e is sparse: only its listed words may be set
			v = win{}
			if len(ws) > 0 {
				v = win{int(ws[0]), int(ws[len(ws)-1]) + 1}
			}
		}
		if len(g)+ne <= stop || !st.allEqual(s, key.id, e, v) {
			c := append(g, make([]uint32, 0, ne)...)
			return st.selectTop(s, appendSlots(c, e, v), k, keys)
		}
		// e is a tie on keys[0], after all of g.
		ng := len(g)
		out := st.selectTop(s, g, ng, keys)
		return append(out, st.top(s, e, v.shrink(e), ne, k-ng, keys[1:])...)
	}
	if col := st.cols[key.id]; col != nil && col.vbits != nil && key.id != fRentable {
		codes := sortedCodes(col, key.Desc)
		g, rg := st.scratch()
		defer rg()
		clear(g[v.lo:v.hi])
		acc := 0
		for _, code := range codes {
			vb := col.vbits[code]
			cnt := 0
			for w := v.lo; w < v.hi; w++ {
				if mw := m[w]; mw != 0 {
					cnt += bits.OnesCount64(mw & vb[w])
				}
			}
			if acc+cnt < k {
				for w := v.lo; w < v.hi; w++ {
					g[w] |= m[w] & vb[w]
				}
				acc += cnt
				continue
			}
			e, re := st.scratch()
			defer re()
			for w := v.lo; w < v.hi; w++ {
				e[w] = m[w] & vb[w]
			}
			out := st.selectTop(s, appendSlots(make([]uint32, 0, acc), g, v), acc, keys)
			return append(out, st.top(s, e, v.shrink(e), cnt, k-acc, keys[1:])...)
		}
		return st.selectTop(s, appendSlots(make([]uint32, 0, acc), g, v), acc, keys)
	}
	return st.selectTop(s, appendSlots(make([]uint32, 0, total), m, v), k, keys)
}

// bestBins is a shortcut for a dense m: the index's edge bitset (the
// lowest or highest bins) usually holds the first k of m. It returns m
// limited to the edge (a fresh scratch bitset and its window) when that
// holds at least k slots. Every slot left out is in a worse bin than every
// slot kept.
func (st *state) bestBins(b *bsi, m []uint64, v win, total, k int, desc bool) ([]uint64, win, bool) {
	span := (v.hi - v.lo) * 64
	if total < span/32 || total < 4*narrowStop {
		return nil, v, false
	}
	edge := b.low
	if desc {
		edge = b.high
	}
	out, _ := st.scratch()
	n := 0
	for w := v.lo; w < v.hi; w++ {
		x := m[w] & edge[w]
		out[w] = x
		n += bits.OnesCount64(x)
	}
	if n < k {
		st.release(out)
		return nil, v, false
	}
	return out, v.shrink(out), true
}

// release returns a scratch bitset from bestBins to the pool.
func (st *state) release(b []uint64) {
	if len(b) == st.nwords {
		st.pool.Put(&b)
	}
}

// bsiFor returns the bit-sliced index that orders field id for s, or nil.
func (st *state) bsiFor(s *search, id fieldID) *bsi {
	switch {
	case id == fRentable:
		return nil
	case isDerived(id):
		if s.storage == defaultStorage {
			return st.virt[id]
		}
		return nil
	}
	return st.cols[id].bsi
}

// allEqual reports whether every slot of e has the same value of field id.
func (st *state) allEqual(s *search, id fieldID, e []uint64, v win) bool {
	first, set, same := uint64(0), false, true
	for w := v.lo; w < v.hi && same; w++ {
		for x := e[w]; x != 0 && same; x &= x - 1 {
			k := st.keyAt(s, id, uint32(w<<6|bits.TrailingZeros64(x)))
			if !set {
				first, set = k, true
			}
			same = k == first
		}
	}
	return same
}

// sortedCodes returns the live codes of col in value order.
func sortedCodes(col *column, desc bool) []uint32 {
	var codes []uint32
	for code, r := range col.refs {
		if r > 0 {
			codes = append(codes, uint32(code))
		}
	}
	slices.SortFunc(codes, func(a, b uint32) int {
		var r int
		if col.isStr {
			r = naturalCompare(col.strs[a], col.strs[b])
		} else {
			r = cmp.Compare(col.nkeys[a], col.nkeys[b])
		}
		if desc {
			r = -r
		}
		return r
	})
	return codes
}

// compareSlots orders two slots by keys, then by id.
func (st *state) compareSlots(s *search, a, b uint32, keys []OrderKey) int {
	for _, key := range keys {
		var r int
		if fields[key.id].kind == kindString {
			col := st.cols[key.id]
			r = naturalCompare(col.strs[col.code(a)], col.strs[col.code(b)])
		} else {
			r = cmp.Compare(st.keyAt(s, key.id, a), st.keyAt(s, key.id, b))
		}
		if key.Desc {
			r = -r
		}
		if r != 0 {
			return r
		}
	}
	return cmp.Compare(keyInt(st.cols[fID].key(a)), keyInt(st.cols[fID].key(b)))
}

// cand is a candidate slot with its first sort key, direction applied.
type cand struct {
	k0   uint64
	slot uint32
}

// selectTop returns the first k of slots in the order of keys.
func (st *state) selectTop(s *search, slots []uint32, k int, keys []OrderKey) []uint32 {
	k = min(k, len(slots))
	full := func(a, b uint32) int { return st.compareSlots(s, a, b, keys) }
	if len(keys) == 0 || fields[keys[0].id].kind == kindString || len(slots) <= 64 {
		if len(slots) > 4*k+64 {
			return heapTop(slots, k, full)
		}
		slices.SortFunc(slots, full)
		return slots[:k]
	}
	// Select on the first key's numeric value, then sort the few that
	// reach the threshold with the full order.
	key0 := keys[0]
	cs := make([]cand, len(slots))
	for i, slot := range slots {
		k0 := st.keyAt(s, key0.id, slot)
		if key0.Desc {
			k0 = ^k0
		}
		cs[i] = cand{k0, slot}
	}
	if len(cs) > k {
		t := kthSmallest(cs, k-1)
		j := 0
		for _, c := range cs {
			if c.k0 <= t {
				cs[j] = c
				j++
			}
		}
		cs = cs[:j]
	}
	rest := keys[1:]
	slices.SortFunc(cs, func(a, b cand) int {
		if a.k0 != b.k0 {
			return cmp.Compare(a.k0, b.k0)
		}
		return st.compareSlots(s, a.slot, b.slot, rest)
	})
	out := slots[:0]
	for _, c := range cs[:k] {
		out = append(out, c.slot)
	}
	return out
}

// kthSmallest returns the k0 that is i-th smallest (0-based) in cs,
// reordering cs (Hoare's quickselect).
func kthSmallest(cs []cand, i int) uint64 {
	lo, hi := 0, len(cs)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		// median of three as the pivot
		a, b, c := cs[lo].k0, cs[mid].k0, cs[hi].k0
		p := max(min(a, b), min(max(a, b), c))
		l, r := lo, hi
		for l <= r {
			for cs[l].k0 < p {
				l++
			}
			for cs[r].k0 > p {
				r--
			}
			if l <= r {
				cs[l], cs[r] = cs[r], cs[l]
				l++
				r--
			}
		}
		switch {
		case i <= r:
			hi = r
		case i >= l:
			lo = l
		default:
			return cs[i].k0
		}
	}
	return cs[i].k0
}

// heapTop returns the first k slots under compare, sorted, using a bounded
// max-heap.
func heapTop(slots []uint32, k int, compare func(a, b uint32) int) []uint32 {
	h := make([]uint32, 0, k)
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			if r := l + 1; r < len(h) && compare(h[r], h[l]) > 0 {
				l = r
			}
			if compare(h[l], h[i]) <= 0 {
				return
			}
			h[i], h[l] = h[l], h[i]
			i = l
		}
	}
	for _, s := range slots {
		if len(h) < k {
			h = append(h, s)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if compare(h[i], h[p]) <= 0 {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
		} else if k > 0 && compare(s, h[0]) < 0 {
			h[0] = s
			down(0)
		}
	}
	slices.SortFunc(h, compare)
	return h
}
