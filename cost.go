package suanli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Guards keep an instance from becoming ghost spend. They are on by
// default (idle auto-stop) and shown in `show`. The zero value means the
// defaults; negative numbers switch a guard off.
type Guards struct {
	// MaxRuntime stops the instance this long after it last started
	// running (--ttl). 0: no limit.
	MaxRuntime Duration `json:"max_runtime,omitempty"`
	// IdleStopMinutes stops a running instance whose CPU and GPU
	// utilisation stayed below IdlePercent this long. 0: DefaultIdleStopMinutes; -1: off.
	IdleStopMinutes int `json:"idle_stop_minutes,omitempty"`
	// IdlePercent is the utilisation below which an instance counts as idle. 0: DefaultIdlePercent.
	IdlePercent int `json:"idle_percent,omitempty"`
	// StopWindows are UTC times when the instance is stopped, e.g.
	// "Mon-Fri 22:00-06:00", "Sat-Sun", "*/22:00-07:00".
	StopWindows []string `json:"stop_windows,omitempty"`
	// DestroyAfterStoppedDays destroys an instance that stayed stopped this
	// many days (opt-in: 0 never destroys).
	DestroyAfterStoppedDays int `json:"destroy_after_stopped_days,omitempty"`
}

// Guard defaults.
const (
	DefaultIdleStopMinutes = 60
	DefaultIdlePercent     = 5
)

// Effective returns g with defaults filled in.
func (g Guards) Effective() Guards {
	if g.IdleStopMinutes == 0 {
		g.IdleStopMinutes = DefaultIdleStopMinutes
	}
	if g.IdlePercent == 0 {
		g.IdlePercent = DefaultIdlePercent
	}
	return g
}

// Validate checks the guards; the error names the field.
func (g Guards) Validate() error {
	if g.MaxRuntime < 0 {
		return FieldErrorf("guards.max_runtime", "must not be negative")
	}
	if g.IdleStopMinutes < -1 || g.IdleStopMinutes > 7*24*60 {
		return FieldErrorf("guards.idle_stop_minutes", "%d: give minutes between 1 and 10080, or -1 to switch idle auto-stop off", g.IdleStopMinutes)
	}
	if g.IdlePercent < 0 || g.IdlePercent > 100 {
		return FieldErrorf("guards.idle_percent", "%d is not a percentage", g.IdlePercent)
	}
	for _, w := range g.StopWindows {
		if _, err := ParseStopWindow(w); err != nil {
			return FieldErrorf("guards.stop_windows", "%v", err)
		}
	}
	if g.DestroyAfterStoppedDays < 0 {
		return FieldErrorf("guards.destroy_after_stopped_days", "must not be negative")
	}
	return nil
}

// Duration is a time.Duration that reads and writes JSON as "8h0m0s" and
// also reads a number of seconds.
type Duration time.Duration

// MarshalJSON writes the duration as a string like "8h0m0s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON reads "8h", "90m" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := string(b)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*d = Duration(time.Duration(n) * time.Second)
		return nil
	}
	u, err := strconv.Unquote(s)
	if err != nil {
		return fmt.Errorf("duration: want \"8h\" or seconds, got %s", s)
	}
	v, err := ParseDuration(u)
	*d = Duration(v)
	return err
}

// ParseDuration reads a duration with day support: "8h", "90m", "7d", "1d12h".
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	var days int64
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: write 8h, 90m or 7d", s)
		}
		days, s = n, s[i+1:]
	}
	var rest time.Duration
	if s != "" {
		var err error
		if rest, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration: write 8h, 90m or 7d", s)
		}
	}
	return time.Duration(days)*24*time.Hour + rest, nil
}

// StopWindow is a recurring UTC time span on some weekdays.
type StopWindow struct {
	Days       [7]bool // indexed by time.Weekday
	Start, End int     // minutes after midnight; End < Start wraps past midnight; Start == End: all day
}

var weekdays = map[string]time.Weekday{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

// ParseStopWindow reads "Mon-Fri 22:00-06:00", "Sat-Sun", "Sat,Sun 00:00-08:00"
// or "* 22:00-06:00" (every day).
func ParseStopWindow(s string) (StopWindow, error) {
	var w StopWindow
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > 2 {
		return w, fmt.Errorf("%q: write DAYS [HH:MM-HH:MM], e.g. \"Mon-Fri 22:00-06:00\" or \"Sat-Sun\"", s)
	}
	days := strings.ToLower(fields[0])
	if days == "*" {
		for i := range w.Days {
			w.Days[i] = true
		}
	} else {
		for _, part := range strings.Split(days, ",") {
			a, b, isRange := strings.Cut(part, "-")
			da, ok1 := weekdays[a]
			db := da
			ok2 := true
			if isRange {
				db, ok2 = weekdays[b]
			}
			if !ok1 || !ok2 {
				return w, fmt.Errorf("%q: unknown day %q (use Mon Tue Wed Thu Fri Sat Sun, ranges like Mon-Fri, or *)", s, part)
			}
			for d := da; ; d = (d + 1) % 7 {
				w.Days[d] = true
				if d == db {
					break
				}
			}
		}
	}
	if len(fields) == 2 {
		a, b, ok := strings.Cut(fields[1], "-")
		start, err1 := parseClock(a)
		end, err2 := parseClock(b)
		if !ok || err1 != nil || err2 != nil {
			return w, fmt.Errorf("%q: times are HH:MM-HH:MM in UTC", s)
		}
		w.Start, w.End = start, end
	}
	return w, nil
}

func parseClock(s string) (int, error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, err
	}
	return t.Hour()*60 + t.Minute(), nil
}

// Contains reports whether t (taken in UTC) falls in the window. A window
// that wraps past midnight belongs to the day it starts on.
func (w StopWindow) Contains(t time.Time) bool {
	t = t.UTC()
	m := t.Hour()*60 + t.Minute()
	day := t.Weekday()
	switch {
	case w.Start == w.End:
		return w.Days[day]
	case w.Start < w.End:
		return w.Days[day] && m >= w.Start && m < w.End
	default: // wraps: [Start, 24h) on its day, [0, End) on the next
		return (w.Days[day] && m >= w.Start) || (w.Days[(day+6)%7] && m < w.End)
	}
}

// QuoteRequest asks what a rental would cost, before anything is reserved.
type QuoteRequest struct {
	InstanceCreate
	Hours     float64 `json:"hours"`      // expected running hours (default 1)
	EgressGB  float64 `json:"egress_gb"`  // expected data sent
	IngressGB float64 `json:"ingress_gb"` // expected data received
}

// QuoteLine is one item of a quote or an invoice.
type QuoteLine struct {
	Item     string `json:"item"`     // "compute", "storage while running", …
	Quantity string `json:"quantity"` // "10 h × 2 GPUs"
	Rate     string `json:"rate"`     // "$0.40/GPU-h"
	Amount   Money  `json:"amount"`
}

// Quote itemizes what a rental costs: every fee visible before spending.
type Quote struct {
	OfferID        int64       `json:"offer_id"`
	RentalType     string      `json:"rental_type"`
	Bid            Money       `json:"bid,omitempty"`
	GPUCount       int         `json:"num_gpus"`
	DiskGB         int64       `json:"disk_gb"`
	Lines          []QuoteLine `json:"lines"`
	Total          Money       `json:"total"`
	PerHour        Money       `json:"per_hour"`         // compute + storage while running
	StoppedPerDay  Money       `json:"stopped_per_day"`  // storage alone, while stopped
	FeeIncluded    Money       `json:"fee_included"`     // the platform's share, paid out of the provider's price
	Checks         []string    `json:"checks,omitempty"` // pre-flight checks that passed
	Warnings       []string    `json:"warnings,omitempty"`
	BalanceAfter1h Money       `json:"balance_after_1h"`
}

// Budget limits spend on a scope over a period.
type Budget struct {
	ID         int64      `json:"id"`
	AccountID  int64      `json:"account_id"`
	Name       string     `json:"name"`
	Scope      string     `json:"scope"` // "account", "project:NAME", "tag:KEY=VALUE"
	Amount     Money      `json:"amount"`
	Period     string     `json:"period"` // "monthly" or "custom"
	Start      *time.Time `json:"start,omitempty"`
	End        *time.Time `json:"end,omitempty"`
	Thresholds []int      `json:"thresholds"` // percent; default 50, 80, 100
	Action     string     `json:"action"`     // at 100%: "alert", "block" (new rentals), "stop" (running instances too)
	WebhookURL string     `json:"webhook_url,omitempty"`
	// WebhookSecret signs deliveries (HMAC-SHA256); write-only: never returned.
	WebhookSecret string    `json:"webhook_secret,omitempty"`
	CreatedAt     time.Time `json:"created_at"`

	// Filled on reads.
	PeriodStart time.Time `json:"period_start"`
	PeriodEnd   time.Time `json:"period_end"`
	Spent       Money     `json:"spent"`
	Forecast    Money     `json:"forecast"` // at period end at the current burn rate
	Percent     int       `json:"percent"`
}

// Budget actions at 100%.
const (
	BudgetAlert = "alert"
	BudgetBlock = "block"
	BudgetStop  = "stop"
)

// Alert is a notice to an account: a budget threshold crossed, a low
// balance, an instance stopped by a guard.
type Alert struct {
	ID         int64     `json:"id"`
	AccountID  int64     `json:"account_id"`
	Kind       string    `json:"kind"` // "budget", "low_balance", "guard", "hint"
	BudgetID   int64     `json:"budget_id,omitempty"`
	InstanceID int64     `json:"instance_id,omitempty"`
	Threshold  int       `json:"threshold,omitempty"`
	Message    string    `json:"message"`
	CreatedAt  time.Time `json:"created_at"`
	Delivery   string    `json:"delivery,omitempty"` // webhook result: "200 OK", "failed: …"
}

// Invoice is an account's charges for one calendar month (UTC).
type Invoice struct {
	AccountID int64         `json:"account_id"`
	Month     string        `json:"month"` // "2026-11"
	From      time.Time     `json:"from"`
	To        time.Time     `json:"to"`
	Lines     []InvoiceLine `json:"lines"`
	Credits   Money         `json:"credits"`
	Total     Money         `json:"total"`
}

// InvoiceLine is one instance's charges of one kind in the month.
type InvoiceLine struct {
	InstanceID int64  `json:"instance_id"`
	Label      string `json:"label,omitempty"`
	Project    string `json:"project,omitempty"`
	Kind       string `json:"kind"`
	Quantity   string `json:"quantity"`
	Amount     Money  `json:"amount"`
}

// Earnings is a provider's income over a period, per machine.
type Earnings struct {
	AccountID int64            `json:"account_id"`
	From      time.Time        `json:"from"`
	To        time.Time        `json:"to"`
	Machines  []MachineEarning `json:"machines"`
	Gross     Money            `json:"gross"` // what renters paid
	Fees      Money            `json:"fees"`  // the platform's share
	Net       Money            `json:"net"`
	PaidOut   Money            `json:"paid_out"`  // all payouts so far
	Available Money            `json:"available"` // earnings balance now
}

// MachineEarning is one machine's part of Earnings.
type MachineEarning struct {
	MachineID int64 `json:"machine_id"`
	Gross     Money `json:"gross"`
	Fees      Money `json:"fees"`
	Net       Money `json:"net"`
}

// CostReport groups an account's spend by a dimension.
type CostReport struct {
	By    string    `json:"by"` // "project", "tag:KEY", "day", "service", "instance"
	Since time.Time `json:"since"`
	Rows  []CostRow `json:"rows"`
	Total Money     `json:"total"`
}

// CostRow is one group of a CostReport.
type CostRow struct {
	Key    string `json:"key"`
	Amount Money  `json:"amount"`
}
