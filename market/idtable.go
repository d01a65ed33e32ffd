package market

// idTable maps offer IDs to slots: open addressing with linear probing over
// a power-of-two table of slot+1 (0 is empty), and backward-shift deletion.
// It stores only 4 bytes an entry; the IDs themselves are read through idOf.
// The zero value is an empty table.
type idTable struct {
	tab  []uint32
	n    int
	idOf func(slot uint32) int64
}

func hashID(id int64) uint64 {
	x := uint64(id) * 0x9E3779B97F4A7C15
	return x ^ x>>31
}

func (t *idTable) find(id int64) (uint32, bool) {
	if len(t.tab) == 0 {
		return 0, false
	}
	mask := uint64(len(t.tab) - 1)
	for i := hashID(id) & mask; ; i = (i + 1) & mask {
		s := t.tab[i]
		if s == 0 {
			return 0, false
		}
		if t.idOf(s-1) == id {
			return s - 1, true
		}
	}
}

// insert adds id → slot; id must not be present.
func (t *idTable) insert(id int64, slot uint32) {
	if (t.n+1)*2 > len(t.tab) {
		t.resize(max(64, len(t.tab)*2))
	}
	mask := uint64(len(t.tab) - 1)
	i := hashID(id) & mask
	for t.tab[i] != 0 {
		i = (i + 1) & mask
	}
	t.tab[i] = slot + 1
	t.n++
}

func (t *idTable) resize(size int) {
	old := t.tab
	t.tab = make([]uint32, size)
	t.n = 0
	mask := uint64(size - 1)
	for _, s := range old {
		if s != 0 {
			i := hashID(t.idOf(s-1)) & mask
			for t.tab[i] != 0 {
				i = (i + 1) & mask
			}
			t.tab[i] = s
			t.n++
		}
	}
}

// remove deletes id; it must be present and still readable through idOf.
func (t *idTable) remove(id int64) {
	mask := uint64(len(t.tab) - 1)
	i := hashID(id) & mask
	for t.idOf(t.tab[i]-1) != id {
		i = (i + 1) & mask
	}
	// Backward-shift: move later entries of the run into the hole when
	// their home position allows it.
	for j := (i + 1) & mask; t.tab[j] != 0; j = (j + 1) & mask {
		home := hashID(t.idOf(t.tab[j]-1)) & mask
		if (j-home)&mask >= (j-i)&mask {
			t.tab[i] = t.tab[j]
			i = j
		}
	}
	t.tab[i] = 0
	t.n--
}
