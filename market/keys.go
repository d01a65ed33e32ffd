package market

import "math"

// A key is a numeric field value as a uint64 whose unsigned order is the
// value order: signed integers (int, money, bool, time) flip the sign bit;
// floats flip all bits when negative and the sign bit otherwise. Strings have
// no key: they are dictionary codes.

const signBit = 1 << 63

func intKey(i int64) uint64 { return uint64(i) ^ signBit }
func keyInt(k uint64) int64 { return int64(k ^ signBit) }
func floatKey(f float64) uint64 {
	b := math.Float64bits(f)
	if b&signBit != 0 {
		return ^b
	}
	return b | signBit
}
func keyFloat(k uint64) float64 {
	if k&signBit != 0 {
		return math.Float64frombits(k &^ signBit)
	}
	return math.Float64frombits(^k)
}

// keyOf returns the key of a numeric value of kind k.
func keyOf(k kind, v val) uint64 {
	if k == kindFloat {
		return floatKey(v.f)
	}
	return intKey(v.i)
}

// valOfKey is the inverse of keyOf.
func valOfKey(k kind, key uint64) val {
	if k == kindFloat {
		return val{f: keyFloat(key)}
	}
	return val{i: keyInt(key)}
}
