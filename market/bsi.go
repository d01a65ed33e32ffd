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
// It costs one byte a slot and two bit writes… eight, per update.
type bsi struct {
	bounds     []uint64 // strictly increasing; bin(k) = number of bounds ≤ k
	words      []uint64 // interleaved slices: words[w*bsiBits+i] is bit i of the bins of slots 64w…64w+63
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
	w := int(slot>>6) * bsiBits
	sh := slot & 63
	var bin uint32
	for i := 0; i < bsiBits; i++ {
		bin |= uint32(b.words[w+i]>>sh&1) << i
	}
	return bin
}

func (b *bsi) setBin(slot, bin uint32) {
	w := int(slot>>6) * bsiBits
	m := uint64(1) << (slot & 63)
	for i := 0; i < bsiBits; i++ {
		if bin>>i&1 != 0 {
			b.words[w+i] |= m
		} else {
			b.words[w+i] &^= m
		}
	}
}

// grow makes room for nwords words of slots.
func (b *bsi) grow(nwords int) { b.words = grow(b.words, nwords*bsiBits) }

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
func (b *bsi) filter(m []uint64, op Op, x uint64, keyAt func(slot uint32) uint64) {
	bx := b.bin(x)
	words := b.words
	for w, mw := range m {
		if mw == 0 {
			continue
		}
		base := w * bsiBits
		s := words[base : base+bsiBits : base+bsiBits]
		lt, eq := uint64(0), mw
		for i := bsiBits - 1; i >= 0; i-- {
			if bx>>i&1 != 0 {
				lt |= eq &^ s[i]
				eq &= s[i]
			} else {
				eq &^= s[i]
			}
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
func (b *bsi) narrow(m, g, e []uint64, k int, desc bool, stopAt int) (ng, ne int) {
	copy(e, m)
	clear(g)
	ne = popcount(e)
	words := b.words
	for i := bsiBits - 1; i >= 0 && ng+ne > stopAt && ng+ne > k; i-- {
		// x: the slots of e on the better side of bit i.
		var flip uint64
		if !desc {
			flip = ^uint64(0)
		}
		cx := 0
		for w, ew := range e {
			if ew != 0 {
				cx += bits.OnesCount64(ew & (words[w*bsiBits+i] ^ flip))
			}
		}
		if ng+cx >= k {
			for w, ew := range e {
				if ew != 0 {
					e[w] = ew & (words[w*bsiBits+i] ^ flip)
				}
			}
			ne = cx
		} else {
			for w, ew := range e {
				if ew != 0 {
					x := ew & (words[w*bsiBits+i] ^ flip)
					g[w] |= x
					e[w] = ew &^ x
				}
			}
			ng += cx
			ne -= cx
		}
	}
	return ng, ne
}
