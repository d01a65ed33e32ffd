package market

import (
	"math"
	"strconv"
	"time"

	"github.com/suanli/suanli"
)

// SetThresholds lowers the column thresholds so that small tests reach every
// storage mode; it returns a function that restores them.
func SetThresholds(vbitsNum, vbitsStr, dictNum int) (restore func()) {
	a, b, c := maxVbitsNum, maxVbitsStr, maxDictNum
	maxVbitsNum, maxVbitsStr, maxDictNum = vbitsNum, vbitsStr, dictNum
	return func() { maxVbitsNum, maxVbitsStr, maxDictNum = a, b, c }
}

// ExactMax lets tests lower the exact-sort threshold of top.
func SetExactMax(n int) (restore func()) {
	old := exactMax
	exactMax = n
	return func() { exactMax = old }
}

// ValueText returns field name of o written in the query language.
func ValueText(o *suanli.Offer, name string) string {
	id, ok := lookupField(name)
	if !ok {
		panic(name)
	}
	f := &fields[id]
	v := f.get(o)
	switch f.kind {
	case kindInt:
		return strconv.FormatInt(v.i, 10)
	case kindFloat:
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	case kindMoney:
		return suanli.Money(v.i).Decimal()
	case kindBool:
		return strconv.FormatBool(v.i != 0)
	case kindString:
		return quoteValue(v.s)
	case kindTime:
		if v.i == math.MaxInt64 {
			return "2100-01-01"
		}
		return time.Unix(v.i, 0).UTC().Format(time.RFC3339)
	}
	return ""
}

// FieldKind returns "string", "bool" or "number".
func FieldKind(name string) string {
	id, _ := lookupField(name)
	switch fields[id].kind {
	case kindString:
		return "string"
	case kindBool:
		return "bool"
	}
	return "number"
}
