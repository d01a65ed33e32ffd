package console

import (
	"fmt"
	"html"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// A machine's calendar for its provider: the control plane's
// MachineCalendar (published windows, bookings in them, rentals with no
// end) laid out by UTC day, as a table and as an SVG timeline drawn on the
// server.

// Calendar bounds: the days shown at least, and at most (a window is at
// most 31 days long, and may start up to a year ahead; later days are
// listed, not drawn).
const (
	calendarMinDays = 14
	calendarMaxDays = 35
)

// calendarItem is one entry's part of one day.
type calendarItem struct {
	E          suanli.CalendarEntry
	From, To   time.Time // the part of the entry on this day
	OpenEnded  bool
	Label      string // "window 4: 2 GPUs at $2.10/GPU-h, open"
	StartsHere bool
}

// calendarDay is one UTC day of the calendar.
type calendarDay struct {
	Day      time.Time
	Windows  []calendarItem
	Bookings []calendarItem
	Rentals  []calendarItem
}

// calendarPage is the calendar template's data.
type calendarPage struct {
	Machine *suanli.Machine
	GPUName string
	Days    []calendarDay
	Chart   template.HTML
	Entries []suanli.CalendarEntry // every entry, for the list
	Later   int                    // entries that start after the last day drawn
}

func entryLabel(e suanli.CalendarEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d: %s", e.Kind, e.ID, plural(e.GPUs, "GPU", "GPUs"))
	if e.Price > 0 {
		fmt.Fprintf(&b, " at %s/GPU-h", e.Price)
	}
	if e.Status != "" {
		b.WriteString(", " + e.Status)
	}
	if e.AccountID != 0 {
		fmt.Fprintf(&b, ", renter %d", e.AccountID)
	}
	return b.String()
}

// layoutCalendar spreads entries over the UTC days from first: at least
// calendarMinDays, more to reach the last entry's end, at most
// calendarMaxDays. An open-ended entry runs to the last day's end.
func layoutCalendar(entries []suanli.CalendarEntry, first time.Time) ([]calendarDay, int) {
	n := calendarMinDays
	later := 0
	for _, e := range entries {
		if !e.Start.Before(first.AddDate(0, 0, calendarMaxDays)) {
			later++
			continue
		}
		if !e.End.IsZero() {
			d := int(midnight(e.End.Add(-time.Nanosecond)).Sub(first)/(24*time.Hour)) + 1
			n = max(n, min(d, calendarMaxDays))
		}
	}
	end := first.AddDate(0, 0, n)
	days := make([]calendarDay, n)
	for i := range days {
		days[i].Day = first.AddDate(0, 0, i)
	}
	for _, e := range entries {
		eEnd, open := e.End, e.End.IsZero()
		if open {
			eEnd = end
		}
		for i := range days {
			from, to := days[i].Day, days[i].Day.Add(24*time.Hour)
			if !eEnd.After(from) || !e.Start.Before(to) {
				continue
			}
			it := calendarItem{E: e, From: maxTime(from, e.Start), To: minTime(to, eEnd), OpenEnded: open, Label: entryLabel(e),
				StartsHere: !e.Start.Before(from)}
			switch e.Kind {
			case "window":
				days[i].Windows = append(days[i].Windows, it)
			case "booking":
				days[i].Bookings = append(days[i].Bookings, it)
			default:
				days[i].Rentals = append(days[i].Rentals, it)
			}
		}
	}
	return days, later
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Calendar chart geometry: one row per day, three lanes in each (windows,
// bookings, rentals), 24 hours across.
const (
	calLeft  = 84
	calRight = 8
	calTop   = 22
	calRow   = 30
	calLane  = 8
	calW     = 720
)

// calendarChart draws the days as an SVG timeline: a lane each for
// windows, bookings and open-ended rentals, a bar per entry with a tooltip,
// and a text alternative (the table beside it says the same).
func calendarChart(days []calendarDay, title string) template.HTML {
	plotW := int64(calW - calLeft - calRight)
	h := calTop + calRow*len(days) + 4
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart calendar" viewBox="0 0 %d %d" role="img" aria-labelledby="cal-title cal-desc" preserveAspectRatio="xMidYMid meet">`, calW, h)
	desc := fmt.Sprintf("%d days from %s; each day has three lanes: published windows, bookings, and rentals with no end.", len(days), days[0].Day.Format("Jan 2"))
	fmt.Fprintf(&b, `<title id="cal-title">%s</title><desc id="cal-desc">%s</desc>`, html.EscapeString(title), html.EscapeString(desc))
	for hr := 0; hr <= 24; hr += 6 {
		x := calLeft + plotW*int64(hr)/24
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%d" x2="%d" y2="%d"/>`, x, calTop-4, x, h-4)
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" text-anchor="middle">%02d:00</text>`, x, calTop-8, hr)
	}
	x := func(t, day time.Time) int64 { return calLeft + plotW*int64(t.Sub(day)/time.Minute)/(24*60) }
	for i, d := range days {
		y := calTop + calRow*i
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" text-anchor="end">%s</text>`, calLeft-6, y+calRow/2+4, d.Day.Format("Mon Jan 2"))
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%d" x2="%d" y2="%d"/>`, calLeft, y+calRow-1, calW-calRight, y+calRow-1)
		for lane, items := range [][]calendarItem{d.Windows, d.Bookings, d.Rentals} {
			class := [...]string{"cal-window", "cal-booking", "cal-rental"}[lane]
			for _, it := range items {
				x0, x1 := x(it.From, d.Day), x(it.To, d.Day)
				label := it.Label + ": " + it.From.Format("15:04") + "–" + it.To.Format("15:04") + " UTC"
				fmt.Fprintf(&b, `<rect class="%s" x="%d" y="%d" width="%d" height="%d"><title>%s</title></rect>`,
					class, x0, y+2+lane*(calLane+1), max(x1-x0, 1), calLane, html.EscapeString(label))
			}
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// handleCalendar shows one of the caller's machines' calendar by day.
func (c *Console) handleCalendar(w http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "machine")
	if err != nil {
		return err
	}
	es, err := c.svc.MachineCalendar(r.Context(), id)
	if err != nil {
		return err
	}
	m, err := c.svc.FindMachineByID(r.Context(), id)
	if err != nil {
		return err
	}
	p := &calendarPage{Machine: m, Entries: es}
	if len(m.Hardware.GPUs) > 0 {
		p.GPUName = m.Hardware.GPUs[0].Name
	}
	p.Days, p.Later = layoutCalendar(es, midnight(c.now()))
	p.Chart = calendarChart(p.Days, "Machine "+strconv.FormatInt(id, 10)+" by day (UTC)")
	c.render(w, r, http.StatusOK, "calendar.html", &view{Title: "Calendar of machine " + strconv.FormatInt(id, 10), Nav: "hosts", sess: s, Page: p})
	return nil
}
