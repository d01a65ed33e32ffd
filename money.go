package suanli

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Money is an amount in micro-units of the marketplace currency
// (1 USD = 1,000,000). It is the only type that carries money: never float64.
// The zero value is zero dollars.
type Money int64

// Micro is the number of Money units in one currency unit.
const Micro Money = 1_000_000

// Dollars returns m as n whole currency units. It is for building constants
// and tests, not for arithmetic on user input.
func Dollars(n int64) Money { return Money(n) * Micro }

// String formats m as "$1.234567" with trailing zeros trimmed to at least two
// decimals ("$0.30", "-$1.05", "$0.000001").
func (m Money) String() string {
	if m < 0 {
		return "-$" + (-m).Decimal()
	}
	return "$" + m.Decimal()
}

// Decimal formats m without a currency sign: "0.30", "-1.05".
func (m Money) Decimal() string {
	neg := m < 0
	u := uint64(m)
	if neg {
		u = uint64(-m)
	}
	whole, frac := u/1_000_000, u%1_000_000
	fs := fmt.Sprintf("%06d", frac)
	fs = strings.TrimRight(fs, "0")
	for len(fs) < 2 {
		fs += "0"
	}
	s := strconv.FormatUint(whole, 10) + "." + fs
	if neg {
		s = "-" + s
	}
	return s
}

// ParseMoney parses a user-typed amount such as "0.3", "$0.30", "1.25/h",
// "$0.10/GB" or "-2" into Money. At most six decimals are accepted; more is
// an error rather than a silent rounding. A unit suffix after "/" is ignored
// here: the caller knows which unit the field takes.
func ParseMoney(s string) (Money, error) {
	orig := s
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	} else if strings.HasPrefix(s, "+") {
		s = s[1:]
	}
	s = strings.TrimPrefix(s, "$")
	if s == "" {
		return 0, fmt.Errorf("%q is not an amount: write it like 0.30 or $0.30", orig)
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" && !hasDot {
		return 0, fmt.Errorf("%q is not an amount: write it like 0.30 or $0.30", orig)
	}
	if whole == "" {
		whole = "0"
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("%q has more than 6 decimals: the smallest unit is 0.000001", orig)
	}
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not an amount: write it like 0.30 or $0.30", orig)
		}
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > 9_000_000_000_000 {
		return 0, fmt.Errorf("%q is too large", orig)
	}
	frac += strings.Repeat("0", 6-len(frac))
	f, _ := strconv.ParseInt(frac, 10, 64)
	m := Money(w*1_000_000 + f)
	if neg {
		m = -m
	}
	return m, nil
}

// Periods over which rates are quoted, in microseconds: compute per hour,
// storage per GB-month (730 hours, the cloud convention).
const (
	MicrosPerSecond int64 = 1_000_000
	MicrosPerHour   int64 = 3600 * MicrosPerSecond
	MicrosPerMonth  int64 = 730 * MicrosPerHour
)

// Accrue returns what a rate per period costs over elapsed, with the remainder
// carried between calls so that many small accruals sum exactly to one big
// one: rate × elapsed / period in 128-bit integer arithmetic. rate and elapsed
// must not be negative; remainder is in [0, period) and comes from the
// previous call on the same meter (0 at first).
func Accrue(rate Money, elapsedMicros, periodMicros, remainder int64) (amount Money, newRemainder int64) {
	if rate <= 0 || elapsedMicros <= 0 || periodMicros <= 0 {
		return 0, remainder
	}
	hi, lo := bits.Mul64(uint64(rate), uint64(elapsedMicros))
	var c uint64
	lo, c = bits.Add64(lo, uint64(remainder), 0)
	hi += c
	p := uint64(periodMicros)
	if hi >= p {
		// The quotient would not fit in 64 bits: more money than exists.
		panic("suanli: Accrue overflow")
	}
	q, r := bits.Div64(hi, lo, p)
	return Money(q), int64(r)
}

// MulDiv returns m × num / den rounded toward zero, in 128-bit arithmetic so
// that fee percentages and proportional splits never overflow. den must be > 0.
func MulDiv(m Money, num, den int64) Money {
	neg := (m < 0) != (num < 0)
	um, un := uint64(m), uint64(num)
	if m < 0 {
		um = uint64(-m)
	}
	if num < 0 {
		un = uint64(-num)
	}
	hi, lo := bits.Mul64(um, un)
	if hi >= uint64(den) {
		panic("suanli: MulDiv overflow")
	}
	q, _ := bits.Div64(hi, lo, uint64(den))
	if neg {
		return -Money(q)
	}
	return Money(q)
}
