package suanli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cron is a parsed five-field cron expression (minute hour day-of-month
// month day-of-week), evaluated in UTC. Day-of-month and day-of-week
// combine as in Vixie cron: when both are restricted, either may match.
type Cron struct {
	min, hour, dom, month, dow uint64 // bit i set: value i allowed
	domStar, dowStar           bool
	text                       string
}

// ParseCron reads "0 2 * * 1-5", with lists (1,15), ranges (1-5), steps
// (*/15, 0-30/10) and names of weekdays and months (mon, jan).
func ParseCron(s string) (*Cron, error) {
	f := strings.Fields(s)
	if len(f) != 5 {
		return nil, fmt.Errorf("%q: a schedule has 5 fields: minute hour day-of-month month day-of-week, e.g. \"0 2 * * 1-5\"", s)
	}
	c := &Cron{text: s}
	var err error
	fields := []struct {
		dst      *uint64
		lo, hi   int
		names    []string
		what     string
		starFlag *bool
	}{
		{&c.min, 0, 59, nil, "minute", nil},
		{&c.hour, 0, 23, nil, "hour", nil},
		{&c.dom, 1, 31, nil, "day of month", &c.domStar},
		{&c.month, 1, 12, []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}, "month", nil},
		{&c.dow, 0, 7, []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}, "day of week", &c.dowStar},
	}
	for i, fd := range fields {
		if *fd.dst, err = cronField(f[i], fd.lo, fd.hi, fd.names); err != nil {
			return nil, fmt.Errorf("%q: %s field %q: %v", s, fd.what, f[i], err)
		}
		if fd.starFlag != nil {
			*fd.starFlag = f[i] == "*" || strings.HasPrefix(f[i], "*/")
		}
	}
	if c.dow&(1<<7) != 0 { // 7 is Sunday too
		c.dow |= 1
	}
	return c, nil
}

func cronField(s string, lo, hi int, names []string) (uint64, error) {
	var bits uint64
	for _, part := range strings.Split(s, ",") {
		rng, stepS, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepS)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("step %q is not a positive number", stepS)
			}
			step = n
		}
		a, b := lo, hi
		if rng != "*" {
			x, y, isRange := strings.Cut(rng, "-")
			var err error
			if a, err = cronValue(x, lo, names); err != nil {
				return 0, err
			}
			b = a
			if isRange {
				if b, err = cronValue(y, lo, names); err != nil {
					return 0, err
				}
			} else if hasStep {
				b = hi
			}
		}
		if a < lo || b > hi || a > b {
			return 0, fmt.Errorf("%q is outside %d-%d", part, lo, hi)
		}
		for v := a; v <= b; v += step {
			bits |= 1 << v
		}
	}
	return bits, nil
}

func cronValue(s string, lo int, names []string) (int, error) {
	for i, n := range names {
		if strings.EqualFold(s, n) {
			if lo == 1 {
				return i + 1, nil
			}
			return i, nil
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return n, nil
}

// String returns the expression as written.
func (c *Cron) String() string { return c.text }

// Next returns the first minute strictly after t (UTC) that the schedule
// names, or the zero time when none comes within a year.
func (c *Cron) Next(t time.Time) time.Time {
	t = t.UTC().Truncate(time.Minute).Add(time.Minute)
	limit := t.Add(366 * 24 * time.Hour)
	for t.Before(limit) {
		if c.month&(1<<int(t.Month())) == 0 {
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
			continue
		}
		domOK := c.dom&(1<<t.Day()) != 0
		dowOK := c.dow&(1<<int(t.Weekday())) != 0
		dayOK := domOK && dowOK
		if !c.domStar && !c.dowStar {
			dayOK = domOK || dowOK
		}
		if !dayOK {
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if c.hour&(1<<t.Hour()) == 0 {
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, time.UTC)
			continue
		}
		if c.min&(1<<t.Minute()) == 0 {
			t = t.Add(time.Minute)
			continue
		}
		return t
	}
	return time.Time{}
}
