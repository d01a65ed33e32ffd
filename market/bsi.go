package market

import (
	"math"
	"math/bits"
	"slices"
	"strconv"
)

// A bsi (bit-sliced index) files each slot of a numeric field into one of
// 256 bins by its key, and stores the bin numbers as 8 bit slices. Bins
// follow the key order (bin boundaries are quantiles of the values seen at
// the last rebuild), so a comparison "key < x" is all slots in lower bins
// plus an exact check of the one bin that holds x; and the first k slots in
// key order are found by descending the slices, as in O'Neil's BSI top-k.
// It costs one byte a slot, and eight bit writes an update.
type bsi struct {
	bounds     []uint64          // strictly increasing; bin(k) = number of bounds ≤ k
	sl         [bsiBits][]uint64 // sl[i] holds bit i of every slot's bin
	counts     [bsiBins]int32
	builtN     int   // live slots at the last rebuild
	maxAtBuild int32 // largest bin at the last rebuild

	// The edges: the slots in the lowest bins (below loBin) and in the
	// highest (from hiBin), about 1/64 of the slots each at the last
	// rebuild. The first k of a dense set in either order are usually
	// there, which one pass over the edge bitset finds.
	loBin, hiBin uint32
	low, high    []uint64
}

const (
	bsiBits = 8
	bsiBins = 1 << bsiBits
)

func (b *bsi) bin(k uint64) uint32 {
	lo, hi := 0, len(b.bounds)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if b.bounds[m] <= k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return uint32(lo)
}

func (b *bsi) getBin(slot uint32) uint32 {
	w, sh := slot>>6, slot&63
	var bin uint32
	for i := range b.sl {
		bin |= uint32(b.sl[i][w]>>sh&1) << i
	}
	return bin
}

func (b *bsi) setBin(slot, bin uint32) {
	w, m := slot>>6, uint64(1)<<(slot&63)
	for i := range b.sl {
		if bin>>i&1 != 0 {
			b.sl[i][w] |= m
		} else {
			b.sl[i][w] &^= m
		}
	}
	if bin < b.loBin {
		b.low[w] |= m
	} else {
		b.low[w] &^= m
	}
	if bin >= b.hiBin {
		b.high[w] |= m
	} else {
		b.high[w] &^= m
	}
}

// grow makes room for nwords words of slots.
func (b *bsi) grow(nwords int) {
	for i := range b.sl {
		b.sl[i] = grow(b.sl[i], nwords)
	}
	b.low, b.high = grow(b.low, nwords), grow(b.high, nwords)
	if b.hiBin == 0 {
		b.hiBin = bsiBins // no edges until the first rebuild
	}
}

// memBytes is the size of the slices.
func (b *bsi) memBytes() int { return 8 * len(b.sl[0]) * (bsiBits + 2) }

// add files slot under key and reports whether the bins have grown so
// lopsided that a rebuild would pay.
func (b *bsi) add(slot uint32, key uint64, n int) bool {
	bin := b.bin(key)
	b.setBin(slot, bin)
	b.counts[bin]++
	return int(b.counts[bin]) > 2*int(b.maxAtBuild)+n/64+64 || n > 2*b.builtN+1024
}

// remove unfiles slot (its bits stay until the slot is reused).
func (b *bsi) remove(slot uint32) { b.counts[b.getBin(slot)]-- }

// rebuild chooses bin boundaries from the keys of the live slots (of kind
// k) and files every live slot again.
func (b *bsi) rebuild(live []uint64, n int, k kind, keyAt func(slot uint32) uint64) {
	step := max(1, n/65536)
	sample := make([]uint64, 0, min(n, 65536)+1)
	i := 0
	forEach(live, func(s uint32) {
		if i%step == 0 {
			sample = append(sample, keyAt(s))
		}
		i++
	})
	slices.Sort(sample)
	b.bounds = chooseBounds(sample, k)
	b.counts = [bsiBins]int32{}
	b.loBin, b.hiBin = 0, bsiBins
	forEach(live, func(s uint32) {
		bin := b.bin(keyAt(s))
		b.setBin(s, bin)
		b.counts[bin]++
	})
	b.builtN = n
	b.maxAtBuild = slices.Max(b.counts[:])
	// The edges: the fewest end bins that hold 1/64 of the slots (a bin
	// never splits, so a heavy end bin makes a bigger edge).
	edge := int32(max(1, n/64))
	var sum int32
	for b.loBin = 0; b.loBin < bsiBins && sum < edge; b.loBin++ {
		sum += b.counts[b.loBin]
	}
	sum = 0
	for b.hiBin = bsiBins; b.hiBin > b.loBin && sum < edge; {
		b.hiBin--
		sum += b.counts[b.hiBin]
	}
	clear(b.low)
	clear(b.high)
	forEach(live, func(s uint32) {
		if bin := b.getBin(s); bin < b.loBin {
			bitSet(b.low, s)
		} else if bin >= b.hiBin {
			bitSet(b.high, s)
		}
	})
}

// chooseBounds picks at most bsiBins-1 strictly increasing bounds from a
// sorted sample. A value heavier than a bin gets a bin of its own, [v, v+1),
// so that ties on it are known to be exact. The others sit near the
// quantiles, each at the roundest value of its neighbourhood, so that the
// thresholds people type (dph<1, reliability>0.95, inet_down>=1000) fall on
// a bin edge and need no slot-by-slot check.
func chooseBounds(sample []uint64, k kind) []uint64 {
	if len(sample) == 0 {
		return nil
	}
	type run struct {
		v uint64
		n int
	}
	var heavy []run
	for i := 0; i < len(sample); {
		j := i
		for j < len(sample) && sample[j] == sample[i] {
			j++
		}
		if j-i > len(sample)/bsiBins {
			heavy = append(heavy, run{sample[i], j - i})
		}
		i = j
	}
	const maxHeavy = (bsiBins - 32) / 2
	if len(heavy) > maxHeavy {
		slices.SortFunc(heavy, func(a, b run) int { return b.n - a.n })
		heavy = heavy[:maxHeavy]
	}
	var bounds []uint64
	for _, h := range heavy {
		bounds = append(bounds, h.v)
		if h.v+1 != 0 {
			bounds = append(bounds, h.v+1)
		}
	}
	nq := bsiBins - 1 - len(bounds)
	for j := 1; j <= nq; j++ {
		lo := sample[(2*j-1)*len(sample)/(2*(nq+1))]
		hi := sample[min(len(sample)-1, (2*j+1)*len(sample)/(2*(nq+1)))]
		bounds = append(bounds, roundest(lo, hi, k))
	}
	slices.Sort(bounds)
	return slices.Compact(bounds)
}

// roundest returns the key in [lo, hi] whose value has the fewest
// significant decimal digits (lo itself when none is rounder).
func roundest(lo, hi uint64, k kind) uint64 {
	if lo >= hi {
		return lo
	}
	if k == kindFloat {
		a, b := keyFloat(lo), keyFloat(hi)
		if math.IsInf(a, 0) || math.IsInf(b, 0) || math.IsNaN(a) || math.IsNaN(b) {
			return lo
		}
		if a <= 0 && b >= 0 {
			return floatKey(0)
		}
		for p := 15; p >= -15; p-- {
			step := math.Pow10(p)
			n := math.Ceil(a / step)
			if math.Abs(n) > 1e15 {
				continue
			}
			for _, c := range []float64{n - 1, n, n + 1} {
				r, err := strconv.ParseFloat(strconv.FormatFloat(c, 'f', 0, 64)+"e"+strconv.Itoa(p), 64)
				if err == nil && r >= a && r <= b {
					return floatKey(r)
				}
			}
		}
		return lo
	}
	a, b := keyInt(lo), keyInt(hi)
	for p := 17; p >= 0; p-- {
		step := int64(1)
		for range p {
			step *= 10
		}
		q := a / step
		if q*step < a {
			q++
		}
		if r := q * step; r >= a && r <= b {
			return intKey(r)
		}
	}
	return lo
}

// cmpKeys applies op to two keys.
func cmpKeys(op Op, k, x uint64) bool {
	switch op {
	case OpLT:
		return k < x
	case OpLE:
		return k <= x
	case OpEQ:
		return k == x
	case OpNE:
		return k != x
	case OpGE:
		return k >= x
	case OpGT:
		return k > x
	}
	return false
}

// filter keeps in m the slots whose key satisfies "key op x". op is one of
// < <= = != >= >. Only the bin that holds x is checked slot by slot, and
// not even that one when its edges settle the question: x is its lower
// bound, or its only value, or (absent: no slot holds x) x cannot be equal.
func (b *bsi) filter(m []uint64, v win, op Op, x uint64, absent bool, keyAt func(slot uint32) uint64) {
	bx := b.bin(x)
	var lower uint64
	if bx > 0 {
		lower = b.bounds[bx-1]
	}
	allGE := lower == x                                                 // every key in the bin ≥ x
	allLE := int(bx) < len(b.bounds) && b.bounds[bx] == x+1 && x+1 != 0 // every key ≤ x
	allGT, allLT, allEQ := allGE && absent, allLE && absent, allGE && allLE
	// What the slots of bin bx do: all pass, none pass, or check each.
	const check, none, all = 0, 1, 2
	var verdict int
	switch op {
	case OpLT:
		verdict = pick(allGE, none, allLT, all)
	case OpLE:
		verdict = pick(allLE, all, allGT, none)
	case OpGT:
		verdict = pick(allLE, none, allGT, all)
	case OpGE:
		verdict = pick(allGE, all, allLT, none)
	case OpEQ:
		verdict = pick(allEQ, all, absent, none)
	case OpNE:
		verdict = pick(allEQ, none, absent, all)
	}
	// sel[i] is all ones where bin bit i of x is set.
	var sel [bsiBits]uint64
	for i := range sel {
		if bx>>i&1 != 0 {
			sel[i] = ^uint64(0)
		}
	}
	m = m[:v.hi]
	s0, s1, s2, s3 := b.sl[0][:len(m)], b.sl[1][:len(m)], b.sl[2][:len(m)], b.sl[3][:len(m)]
	s4, s5, s6, s7 := b.sl[4][:len(m)], b.sl[5][:len(m)], b.sl[6][:len(m)], b.sl[7][:len(m)]
	x0, x1, x2, x3, x4, x5, x6, x7 := sel[0], sel[1], sel[2], sel[3], sel[4], sel[5], sel[6], sel[7]
	for w := v.lo; w < len(m); w++ {
		mw := m[w]
		if mw == 0 {
			continue
		}
		// Walk the bits from the top: a slot is below x at the first bit
		// where it has 0 and x has 1, and equal when no bit differs.
		lt, eq := uint64(0), mw
		s := s7[w]
		lt |= eq &^ s & x7
		eq &^= s ^ x7
		s = s6[w]
		lt |= eq &^ s & x6
		eq &^= s ^ x6
		s = s5[w]
		lt |= eq &^ s & x5
		eq &^= s ^ x5
		s = s4[w]
		lt |= eq &^ s & x4
		eq &^= s ^ x4
		s = s3[w]
		lt |= eq &^ s & x3
		eq &^= s ^ x3
		s = s2[w]
		lt |= eq &^ s & x2
		eq &^= s ^ x2
		s = s1[w]
		lt |= eq &^ s & x1
		eq &^= s ^ x1
		s = s0[w]
		lt |= eq &^ s & x0
		eq &^= s ^ x0
		var keep uint64
		switch op {
		case OpLT, OpLE:
			keep = lt
		case OpGT, OpGE:
			keep = mw &^ lt &^ eq
		case OpNE:
			keep = mw &^ eq
		}
		if eq != 0 {
			switch verdict {
			case all:
				keep |= eq
			case check:
				for eq != 0 {
					t := bits.TrailingZeros64(eq)
					eq &= eq - 1
					if cmpKeys(op, keyAt(uint32(w<<6|t)), x) {
						keep |= 1 << t
					}
				}
			}
		}
		m[w] = keep
	}
}

// pick returns a if ca, else b if cb, else 0 (check).
func pick(ca bool, a int, cb bool, b int) int {
	switch {
	case ca:
		return a
	case cb:
		return b
	}
	return 0
}

// narrow finds candidates for the first k slots of m (window v) in key
// order (descending when desc). It returns g, the slots surely among them
// (fewer than k), and leaves in e (window v) the slots that may be: every
// slot of m in neither comes after every slot in g or e, and |g| < k ≤
// |g|+|e| unless |m| < k. It stops once |g|+|e| ≤ stopAt or the bins are
// exhausted (then e holds one bin). ws, when not nil, lists the only words
// of e that may be non-zero.
func (b *bsi) narrow(m, e []uint64, v win, k int, desc bool, stopAt int) (g []uint32, ne int, ws []int32) {
	m, e = m[:v.hi], e[:v.hi]
	var flip uint64
	if !desc {
		flip = ^uint64(0)
	}
	// cx counts the slots of e on the better side of the current bit; each
	// pass applies one bit and counts for the next.
	s := b.sl[bsiBits-1][:len(e)]
	cx := 0
	for w := v.lo; w < v.hi; w++ {
		ew := m[w]
		e[w] = ew
		ne += bits.OnesCount64(ew)
		cx += bits.OnesCount64(ew & (s[w] ^ flip))
	}
	for i := bsiBits - 1; i >= 0 && len(g)+ne > stopAt && len(g)+ne > k; i-- {
		s := b.sl[i][:len(e)]
		var sn []uint64
		if i > 0 {
			sn = b.sl[i-1][:len(e)]
		}
		if ws == nil && ne < (v.hi-v.lo)/2 {
			ws = make([]int32, 0, ne)
			for w := v.lo; w < v.hi; w++ {
				if e[w] != 0 {
					ws = append(ws, int32(w))
				}
			}
		}
		restrict := len(g)+cx >= k // the first k are all on the better side
		next := 0
		if ws != nil {
			for _, w := range ws {
				ew := e[w]
				if ew == 0 {
					continue
				}
				x := ew & (s[w] ^ flip)
				if restrict {
					ew = x
				} else {
					for ; x != 0; x &= x - 1 {
						g = append(g, uint32(int(w)<<6|bits.TrailingZeros64(x)))
					}
					ew &^= s[w] ^ flip
				}
				e[w] = ew
				if sn != nil {
					next += bits.OnesCount64(ew & (sn[w] ^ flip))
				}
			}
		} else {
			for w := v.lo; w < v.hi; w++ {
				ew := e[w]
				x := ew & (s[w] ^ flip)
				if restrict {
					ew = x
				} else {
					for ; x != 0; x &= x - 1 {
						g = append(g, uint32(w<<6|bits.TrailingZeros64(x)))
					}
					ew &^= s[w] ^ flip
				}
				e[w] = ew
				if sn != nil {
					next += bits.OnesCount64(ew & (sn[w] ^ flip))
				}
			}
		}
		if restrict {
			ne = cx
		} else {
			ne -= cx
		}
		cx = next
	}
	return g, ne, ws
}
