package market

import (
	"cmp"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/suanli/suanli"
)

// parseValue turns one written value into a field value. quoted values keep
// underscores; unquoted ones read _ as a space. The error text completes
// "… is not …".
func parseValue(f *field, raw string, quoted bool) (val, string) {
	switch f.kind {
	case kindInt:
		s := strings.TrimSpace(raw)
		if f.name == "compute_cap" && strings.Contains(s, ".") { // 8.9 → 890
			x, err := strconv.ParseFloat(s, 64)
			if err != nil || x < 0 || x > 100 || math.IsNaN(x) {
				return val{}, "a compute capability like 8.9 or 890"
			}
			return iv(int64(math.Round(x * 100))), ""
		}
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return val{}, kindInt.String()
		}
		return iv(i), ""
	case kindFloat:
		s := strings.TrimSpace(raw)
		if f.unit == "GB" && len(s) > 2 && strings.EqualFold(s[len(s)-2:], "gb") {
			s = s[:len(s)-2]
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || strings.ContainsAny(s, "xXpP_") {
			return val{}, kindFloat.String()
		}
		return fv(x), ""
	case kindMoney:
		m, err := suanli.ParseMoney(raw)
		if err != nil {
			return val{}, kindMoney.String() + " (" + err.Error() + ")"
		}
		return iv(int64(m)), ""
	case kindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(raw))
		if err != nil {
			return val{}, kindBool.String()
		}
		return bv(b), ""
	case kindString:
		if !quoted {
			raw = strings.ReplaceAll(raw, "_", " ")
		}
		if !utf8.ValidString(raw) {
			return val{}, "valid UTF-8 text"
		}
		return sv(raw), ""
	case kindTime:
		s := strings.TrimSpace(raw)
		for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02"} {
			if t, err := time.Parse(layout, s); err == nil {
				return iv(t.Unix()), ""
			}
		}
		return val{}, kindTime.String()
	}
	return val{}, "a value"
}

// compareVals orders two values of kind k. Strings compare ignoring case,
// with runs of digits compared as numbers; floats put NaN first.
func compareVals(k kind, a, b val) int {
	switch k {
	case kindFloat:
		return cmp.Compare(a.f, b.f)
	case kindString:
		return naturalCompare(a.s, b.s)
	default:
		return cmp.Compare(a.i, b.i)
	}
}

// naturalCompare compares lower-cased strings, reading runs of ASCII digits
// as numbers ("535.9" < "535.104"); when those agree it falls back to the
// lower-cased bytes, so it returns 0 only for strings equal ignoring case.
func naturalCompare(a, b string) int {
	a, b = strings.ToLower(a), strings.ToLower(b)
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na := strings.TrimLeft(a[si:i], "0")
			nb := strings.TrimLeft(b[sj:j], "0")
			if c := cmp.Compare(len(na), len(nb)); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			continue
		}
		if ca != cb {
			return cmp.Compare(ca, cb)
		}
		i++
		j++
	}
	if c := cmp.Compare(len(a)-i, len(b)-j); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// formatVal prints a value for messages and explanations, with its unit.
func formatVal(f *field, v val) string {
	switch f.kind {
	case kindInt:
		s := strconv.FormatInt(v.i, 10)
		if f.unit != "" {
			s += " " + f.unit
		}
		return s
	case kindFloat:
		s := formatFloat(v.f)
		if f.unit != "" {
			s += " " + f.unit
		}
		return s
	case kindMoney:
		return suanli.Money(v.i).String() + f.unit
	case kindBool:
		return strconv.FormatBool(v.i != 0)
	case kindString:
		if v.s == "" {
			return `""`
		}
		return v.s
	case kindTime:
		if v.i == math.MaxInt64 {
			return "open-ended"
		}
		return time.Unix(v.i, 0).UTC().Format("2006-01-02 15:04Z")
	}
	return ""
}

// formatFloat prints at most three decimals, trimming zeros.
func formatFloat(x float64) string {
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if dot := strings.IndexByte(s, '.'); dot >= 0 && len(s)-dot-1 > 3 {
		s = strconv.FormatFloat(x, 'f', 3, 64)
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// formatCount prints n with thousands separators: 9,870.
func formatCount(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
