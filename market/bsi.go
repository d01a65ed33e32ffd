package market

import (
	"math/bits"
	"slices"
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
}

// grow makes room for nwords words of slots.
func (b *bsi) grow(nwords int) {
	for i := range b.sl {
		b.sl[i] = grow(b.sl[i], nwords)
	}
}

// memBytes is the size of the slices.
func (b *bsi) memBytes() int { return 8 * len(b.sl[0]) * bsiBits }

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

// rebuild chooses bin boundaries from the keys of the live slots and files
// every live slot again.
func (b *bsi) rebuild(live []uint64, n int, keyAt func(slot uint32) uint64) {
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
	b.bounds = b.bounds[:0]
	if len(sample) > 0 {
		// A value heavier than a bin gets a bin of its own, [v, v+1), so
		// that ties on it are known to be exact ties.
		heavy := len(sample) / bsiBins
		for j := 1; j < bsiBins-1 && len(b.bounds) < bsiBins-2; j++ {
			v := sample[j*len(sample)/bsiBins]
			if len(b.bounds) == 0 || v > b.bounds[len(b.bounds)-1] {
				b.bounds = append(b.bounds, v)
			}
			lo, _ := slices.BinarySearch(sample, v)
			hi, _ := slices.BinarySearch(sample, v+1)
			if hi-lo > heavy && v+1 != 0 && len(b.bounds) < bsiBins-1 {
				b.bounds = append(b.bounds, v+1)
			}
		}
	}
	b.counts = [bsiBins]int32{}
	forEach(live, func(s uint32) {
		bin := b.bin(keyAt(s))
		b.setBin(s, bin)
		b.counts[bin]++
	})
	b.builtN = n
	b.maxAtBuild = slices.Max(b.counts[:])
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
// < <= = != >= >. Only the bin that holds x is checked slot by slot.
func (b *bsi) filter(m []uint64, v win, op Op, x uint64, keyAt func(slot uint32) uint64) {
	bx := b.bin(x)
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
	for w := v.lo; w < len(m); w++ {
		mw := m[w]
		if mw == 0 {
			continue
		}
		// Walk the bits from the top: a slot is below x at the first bit
		// where it has 0 and x has 1, and equal when no bit differs.
		lt, eq := uint64(0), mw
		for i, s := range [bsiBits]uint64{s7[w], s6[w], s5[w], s4[w], s3[w], s2[w], s1[w], s0[w]} {
			xs := sel[bsiBits-1-i]
			lt |= eq &^ s & xs
			eq &^= s ^ xs
		}
		var keep uint64
		switch op {
		case OpLT, OpLE:
			keep = lt
		case OpGT, OpGE:
			keep = mw &^ lt &^ eq
		case OpNE:
			keep = mw &^ eq
		}
		for eq != 0 {
			t := bits.TrailingZeros64(eq)
			eq &= eq - 1
			if cmpKeys(op, keyAt(uint32(w<<6|t)), x) {
				keep |= 1 << t
			}
		}
		m[w] = keep
	}
}

// narrow finds candidates for the first k slots of m in key order
// (descending when desc): on return every slot of m outside g ∪ e comes
// after every slot in g ∪ e, and |g| < k ≤ |g|+|e| unless |m| < k. It stops
// once |g|+|e| ≤ stopAt or the bins are exhausted (then e holds one bin).
// g and e must have len(m) words.
func (b *bsi) narrow(m, g, e []uint64, v win, k int, desc bool, stopAt int) (ng, ne int) {
	m, g, e = m[:v.hi], g[:v.hi], e[:v.hi]
	copy(e[v.lo:], m[v.lo:])
	clear(g[v.lo:])
	ne = popcount(e[v.lo:])
	var flip uint64
	if !desc {
		flip = ^uint64(0)
	}
	var ws []int32 // the words of e that may be non-zero, once e is sparse
	for i := bsiBits - 1; i >= 0 && ng+ne > stopAt && ng+ne > k; i-- {
		s := b.sl[i][:len(e)]
		if ws == nil && ne < (v.hi-v.lo)/2 {
			ws = make([]int32, 0, ne)
			for w := v.lo; w < v.hi; w++ {
				if e[w] != 0 {
					ws = append(ws, int32(w))
				}
			}
		}
		// x: the slots of e on the better side of bit i.
		cx := 0
		if ws != nil {
			for _, w := range ws {
				cx += bits.OnesCount64(e[w] & (s[w] ^ flip))
			}
		} else {
			for w := v.lo; w < v.hi; w++ {
				cx += bits.OnesCount64(e[w] & (s[w] ^ flip))
			}
		}
		if ng+cx >= k { // the first k are all in x: keep only x
			if ws != nil {
				for _, w := range ws {
					e[w] &= s[w] ^ flip
				}
			} else {
				for w := v.lo; w < v.hi; w++ {
					e[w] &= s[w] ^ flip
				}
			}
			ne = cx
		} else { // all of x is in, and the rest comes from e minus x
			if ws != nil {
				for _, w := range ws {
					x := e[w] & (s[w] ^ flip)
					g[w] |= x
					e[w] &^= x
				}
			} else {
				for w := v.lo; w < v.hi; w++ {
					x := e[w] & (s[w] ^ flip)
					g[w] |= x
					e[w] &^= x
				}
			}
			ng += cx
			ne -= cx
		}
	}
	return ng, ne
}
