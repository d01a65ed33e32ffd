package billing

import (
	"fmt"
	"iter"

	"github.com/suanli/suanli"
)

// Span is a stretch of one active meter's life that hour closes billed:
// the meter's terms and the state (Since, Remainder) it had when the
// stretch began, that is when its row was last written. The closes that
// billed it are a contiguous run of the close calendar; the store keeps
// which.
type Span struct {
	MeterID   int64
	AccountID int64
	HostID    int64
	Rate      suanli.Money
	PeriodUS  int64
	FeeBP     int64
	Since     int64 // µs
	Remainder int64
}

// cum is what the span owes from Since up to t, the remainder carried in:
// one Accrue over the whole stretch, which equals the sum of the accruals
// over any split of it.
func (s Span) cum(t int64) suanli.Money {
	if t <= s.Since {
		return 0
	}
	amt, _ := suanli.Accrue(s.Rate, t-s.Since, s.PeriodUS, s.Remainder)
	return amt
}

// Total is what closes up to through billed the span, all lines together.
func (s Span) Total(through int64) suanli.Money { return s.cum(through) }

// State is the meter's (since, remainder) after closes up to through: what
// the store writes when it catches the meter's row up.
func (s Span) State(through int64) (since, remainder int64) {
	if through <= s.Since {
		return s.Since, s.Remainder
	}
	_, rem := suanli.Accrue(s.Rate, through-s.Since, s.PeriodUS, s.Remainder)
	return through, rem
}

// Line is one close's charge on a span.
type Line struct {
	Close    int   // index in the throughs given to Lines
	From, To int64 // µs: the interval billed
	Amount   suanli.Money
	Fee      suanli.Money
}

// Digest is the line's LineDigest under the span's meter and accounts.
func (s Span) Digest(l Line) uint64 {
	return LineDigest(s.MeterID, s.AccountID, s.HostID, l.Amount, l.Fee)
}

// Lines yields the lines that the closes throughs[lo:hi] charged the span,
// in order. throughs are the through times (µs, strictly increasing) of the
// closes that billed the span, from the first; the ones before lo only
// place where the first yielded line starts. A close that billed the span
// nothing (through not after the meter's since, or an amount that rounds to
// zero and is carried) yields no line, as a row-per-charge settlement wrote
// none.
func (s Span) Lines(throughs []int64, lo, hi int) iter.Seq[Line] {
	return func(yield func(Line) bool) {
		from := s.Since
		if lo > 0 && throughs[lo-1] > from {
			from = throughs[lo-1]
		}
		prev := s.cum(from)
		for k := lo; k < hi; k++ {
			t := throughs[k]
			if t <= from {
				continue
			}
			c := s.cum(t)
			if amt := c - prev; amt > 0 {
				if !yield(Line{Close: k, From: from, To: t, Amount: amt, Fee: Fee(amt, s.FeeBP)}) {
					return
				}
			}
			from, prev = t, c
		}
	}
}

// Quantity describes an interval of metered time as a charge line shows
// it: "3600.000 s".
func Quantity(fromUS, toUS int64) string {
	return fmt.Sprintf("%.3f s", float64(toUS-fromUS)/1e6)
}
