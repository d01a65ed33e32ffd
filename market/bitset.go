package market

import "math/bits"

// A bitset has one bit per index slot. Index bitsets all have the index's
// word capacity; scratch bitsets may be shorter when only a prefix matters.

func bitSet(b []uint64, i uint32)   { b[i>>6] |= 1 << (i & 63) }
func bitClear(b []uint64, i uint32) { b[i>>6] &^= 1 << (i & 63) }

// popcount returns the number of set bits.
func popcount(b []uint64) int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// andNotInto sets dst &^= src over dst's length.
func andNotInto(dst, src []uint64) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] &^= src[i]
	}
}

// forEach calls f for each set bit, in increasing order.
func forEach(b []uint64, f func(i uint32)) {
	for wi, w := range b {
		for w != 0 {
			t := bits.TrailingZeros64(w)
			f(uint32(wi<<6 | t))
			w &= w - 1
		}
	}
}

// appendSlots appends the set bits of b in window v to dst.
func appendSlots(dst []uint32, b []uint64, v win) []uint32 {
	for wi := v.lo; wi < v.hi; wi++ {
		for w := b[wi]; w != 0; w &= w - 1 {
			dst = append(dst, uint32(wi<<6|bits.TrailingZeros64(w)))
		}
	}
	return dst
}

// A win is the range of words [lo, hi) outside which a scratch bitset is
// known to be zero (and may hold garbage): every pass over it stays inside.
type win struct{ lo, hi int }

// shrink narrows v to the non-zero words of b.
func (v win) shrink(b []uint64) win {
	for v.lo < v.hi && b[v.lo] == 0 {
		v.lo++
	}
	for v.hi > v.lo && b[v.hi-1] == 0 {
		v.hi--
	}
	return v
}

// grow returns b extended with zero words to n words.
func grow(b []uint64, n int) []uint64 {
	if len(b) >= n {
		return b
	}
	return append(b, make([]uint64, n-len(b))...)
}
