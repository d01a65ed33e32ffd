package market

// A column stores one field of every slot. Values are dictionary-encoded in
// 1, 2 or 4 bytes a slot while the field has few distinct values (strings
// always are); a numeric field with more than maxDictNum distinct values
// stores its keys directly in 8 bytes. A column keeps one bitset per value
// (vbits) while it has few values, which answers = != in notin and small
// ranges by OR-ing bitsets; a numeric column with more values has a bsi
// instead. Dead slots keep stale codes; every reader masks them out with the
// index's live set.
type column struct {
	id    fieldID
	kind  kind
	isStr bool
	raw   bool      // codes are keys, no dictionary
	rs    *rowStore // where the codes live

	nkeys []uint64 // numeric dictionary: code → key
	nlook map[uint64]uint32
	strs  []string // string dictionary: code → string
	slook map[string]uint32
	refs  []uint32 // live slots per code
	free  []uint32 // codes without live slots, for reuse

	vbits  [][]uint64 // per code, the slots holding it; nil once too many values
	noVbit bool       // vbits were dropped for good (until the index is rebuilt)
	bsi    *bsi
	nwords int
}

// Column thresholds (variables so that tests can lower them).
var (
	maxVbitsNum = 32      // numeric columns keep per-value bitsets up to this many values
	maxVbitsStr = 128     // string columns likewise
	maxDictNum  = 1 << 16 // numeric columns store keys beyond this many values
)

func newColumn(id fieldID, raw bool, rs *rowStore) *column {
	c := &column{id: id, kind: fields[id].kind, rs: rs}
	c.isStr = c.kind == kindString
	rs.setWidth(id, 1)
	if raw {
		c.raw, c.noVbit, c.bsi = true, true, &bsi{}
		rs.setWidth(id, 8)
	} else if c.isStr {
		c.slook = map[string]uint32{}
	} else {
		c.nlook = map[uint64]uint32{}
	}
	return c
}

func (c *column) code(s uint32) uint64 { return c.rs.get(c.id, s) }

func (c *column) setCode(s uint32, v uint64) { c.rs.set(c.id, s, v) }

// grow makes room for nwords words of slots.
func (c *column) grow(nwords int) {
	c.nwords = nwords
	for i := range c.vbits {
		c.vbits[i] = grow(c.vbits[i], nwords)
	}
	if c.bsi != nil {
		c.bsi.grow(nwords)
	}
}

// card returns the number of distinct values in live slots (dictionary
// columns only).
func (c *column) card() int { return len(c.refs) - len(c.free) }

// key returns the key of slot s (numeric columns).
func (c *column) key(s uint32) uint64 {
	if c.raw {
		return c.code(s)
	}
	return c.nkeys[c.code(s)]
}

// value returns the value of slot s.
func (c *column) value(s uint32) val {
	if c.isStr {
		return sv(c.strs[c.code(s)])
	}
	return valOfKey(c.kind, c.key(s))
}

// same reports whether slot s holds v.
func (c *column) same(s uint32, v val) bool {
	if c.isStr {
		return c.strs[c.code(s)] == v.s
	}
	return c.key(s) == keyOf(c.kind, v)
}

// release removes slot s's value from the dictionary and the indexes.
func (c *column) release(s uint32) {
	if c.raw {
		c.bsi.remove(s)
		return
	}
	code := uint32(c.code(s))
	if c.vbits != nil {
		bitClear(c.vbits[code], s)
	}
	if c.bsi != nil {
		c.bsi.remove(s)
	}
	c.refs[code]--
	if c.refs[code] == 0 {
		if c.isStr {
			delete(c.slook, c.strs[code])
			c.strs[code] = ""
		} else {
			delete(c.nlook, c.nkeys[code])
		}
		c.free = append(c.free, code)
	}
}

// assign stores v in slot s (released or new) and reports what the index
// must do next: rebuild this column's bsi (new, or lopsided). In bulk mode
// the bsi is left alone: the caller rebuilds it at the end.
func (c *column) assign(s uint32, v val, n int, bulk bool) (rebuildBSI bool) {
	if c.raw {
		k := keyOf(c.kind, v)
		c.setCode(s, k)
		return !bulk && c.bsi.add(s, k, n)
	}
	var code uint32
	var ok bool
	if c.isStr {
		code, ok = c.slook[v.s]
	} else {
		code, ok = c.nlook[keyOf(c.kind, v)]
	}
	if !ok {
		if len(c.free) > 0 {
			code = c.free[len(c.free)-1]
			c.free = c.free[:len(c.free)-1]
		} else {
			code = uint32(len(c.refs))
			c.refs = append(c.refs, 0)
			if c.isStr {
				c.strs = append(c.strs, "")
			} else {
				c.nkeys = append(c.nkeys, 0)
			}
			if c.vbits != nil || (!c.noVbit && len(c.refs) == 1) {
				c.vbits = append(c.vbits, make([]uint64, c.nwords))
			}
		}
		if c.isStr {
			c.strs[code] = v.s
			c.slook[v.s] = code
		} else {
			k := keyOf(c.kind, v)
			c.nkeys[code] = k
			c.nlook[k] = code
		}
	}
	c.refs[code]++
	if w := c.rs.w[c.id]; uint64(code) >= 1<<(8*uint(w)) && w < 8 {
		c.rs.setWidth(c.id, w*2)
	}
	c.setCode(s, uint64(code))
	if c.vbits != nil {
		bitSet(c.vbits[code], s)
	}
	switch {
	case c.isStr:
		if c.vbits != nil && c.card() > maxVbitsStr {
			c.vbits, c.noVbit = nil, true
		}
		return false
	case c.bsi != nil:
		rebuildBSI = !bulk && c.bsi.add(s, keyOf(c.kind, v), n)
		if c.card() > maxDictNum {
			c.toRaw()
		}
		return rebuildBSI
	case c.card() > maxVbitsNum:
		c.vbits, c.noVbit, c.bsi = nil, true, &bsi{}
		c.bsi.grow(c.nwords)
		return !bulk
	}
	return false
}

// toRaw drops the dictionary and stores keys.
func (c *column) toRaw() {
	c.rs.setWidth(c.id, 8)
	for s := 0; s < c.rs.nslots; s++ {
		if code := c.code(uint32(s)); code < uint64(len(c.nkeys)) {
			c.setCode(uint32(s), c.nkeys[code])
		}
	}
	c.raw = true
	c.nkeys, c.nlook, c.refs, c.free = nil, nil, nil, nil
}

// memBytes estimates the column's heap size.
func (c *column) memBytes() int {
	b := c.rs.nslots * int(c.rs.w[c.id])
	b += 8*len(c.nkeys) + 4*len(c.refs) + 4*len(c.free) + 24*len(c.nlook)
	for _, s := range c.strs {
		b += 16 + len(s)
	}
	b += 40 * len(c.slook)
	for _, v := range c.vbits {
		b += 8 * len(v)
	}
	if c.bsi != nil {
		b += c.bsi.memBytes()
	}
	return b
}
