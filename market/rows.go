package market

import "encoding/binary"

// rowStore keeps every column's code for a slot side by side in one row of
// bytes, each column at its own offset and width (1, 2, 4 or 8 bytes), so
// that rebuilding an offer reads one or two cache lines instead of one per
// field. Widening a column re-lays the rows out.
type rowStore struct {
	rows   []byte
	stride int
	off    []int   // by fieldID
	w      []uint8 // by fieldID; 0 for fields without a column
	nslots int
}

func newRowStore(nfields int) *rowStore {
	return &rowStore{off: make([]int, nfields), w: make([]uint8, nfields)}
}

func (r *rowStore) get(id fieldID, s uint32) uint64 {
	p := r.rows[int(s)*r.stride+r.off[id]:]
	switch r.w[id] {
	case 1:
		return uint64(p[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(p))
	case 4:
		return uint64(binary.LittleEndian.Uint32(p))
	}
	return binary.LittleEndian.Uint64(p)
}

func (r *rowStore) set(id fieldID, s uint32, v uint64) {
	p := r.rows[int(s)*r.stride+r.off[id]:]
	switch r.w[id] {
	case 1:
		p[0] = uint8(v)
	case 2:
		binary.LittleEndian.PutUint16(p, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(p, uint32(v))
	default:
		binary.LittleEndian.PutUint64(p, v)
	}
}

// grow makes room for nslots slots.
func (r *rowStore) grow(nslots int) {
	r.rows = append(r.rows, make([]byte, (nslots-r.nslots)*r.stride)...)
	r.nslots = nslots
}

// setWidth gives field id w bytes a slot, keeping every value.
func (r *rowStore) setWidth(id fieldID, w uint8) {
	old := *r
	r.off = make([]int, len(old.off))
	r.w = append([]uint8(nil), old.w...)
	r.w[id] = w
	r.stride = 0
	for i, fw := range r.w {
		r.off[i] = r.stride
		r.stride += int(fw)
	}
	r.rows = make([]byte, r.nslots*r.stride)
	if old.stride == 0 {
		return
	}
	// Copy the bytes before and after the field as they are; re-store the
	// field itself at its new width.
	before := old.off[id]
	after := old.stride - before - int(old.w[id])
	for s := 0; s < r.nslots; s++ {
		src := old.rows[s*old.stride : (s+1)*old.stride]
		dst := r.rows[s*r.stride : (s+1)*r.stride]
		copy(dst, src[:before])
		copy(dst[before+int(w):], src[old.stride-after:])
		if old.w[id] > 0 {
			r.set(id, uint32(s), old.get(id, uint32(s)))
		}
	}
}
