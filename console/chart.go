package console

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// dayTotal is one day's spend.
type dayTotal struct {
	Day    time.Time // midnight UTC
	Amount suanli.Money
}

// Chart geometry, in SVG user units (the SVG scales to its container).
const (
	chartW      = 720
	chartH      = 240
	chartLeft   = 72 // room for the axis labels
	chartRight  = 8
	chartTop    = 12
	chartBottom = 28
)

// niceStep returns the smallest 1-2-5 × 10^k amount that splits max into at
// most ticks steps (at least one micro-unit).
func niceStep(max suanli.Money, ticks int64) suanli.Money {
	if max <= 0 {
		return suanli.Micro / 100 // one cent
	}
	for p := suanli.Money(1); ; p *= 10 {
		for _, f := range []suanli.Money{1, 2, 5} {
			s := p * f
			if s*suanli.Money(ticks) >= max {
				return s
			}
		}
		if p > suanli.Money(1)<<58 {
			return max
		}
	}
}

// spendChart draws spend by day as an SVG bar chart with a money axis, one
// bar per day, each with a tooltip, and a text alternative. It is drawn on
// the server: no script, no inline style (colours come from the CSS), so it
// passes the console's Content-Security-Policy.
func spendChart(days []dayTotal, title string) template.HTML {
	var top suanli.Money
	var sum suanli.Money
	for _, d := range days {
		top = max(top, d.Amount)
		sum += d.Amount
	}
	step := niceStep(top, 4)
	ticks := int64(4)
	for ticks > 1 && step*suanli.Money(ticks-1) >= top && top > 0 {
		ticks--
	}
	scale := step * suanli.Money(ticks) // the axis top
	plotW, plotH := int64(chartW-chartLeft-chartRight), int64(chartH-chartTop-chartBottom)

	var b strings.Builder
	desc := fmt.Sprintf("%s: %s over %d days", title, sum, len(days))
	if len(days) > 0 {
		desc += fmt.Sprintf(", from %s to %s; the highest day %s", days[0].Day.Format("Jan 2"), days[len(days)-1].Day.Format("Jan 2"), top)
	}
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="chart-title chart-desc" preserveAspectRatio="xMidYMid meet">`, chartW, chartH)
	fmt.Fprintf(&b, `<title id="chart-title">%s</title><desc id="chart-desc">%s</desc>`, html.EscapeString(title), html.EscapeString(desc))
	// Grid lines and the money axis.
	for i := int64(0); i <= ticks; i++ {
		y := chartTop + plotH - plotH*i/ticks
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%d" x2="%d" y2="%d"/>`, chartLeft, y, chartW-chartRight, y)
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" text-anchor="end">%s</text>`, chartLeft-6, y+4, html.EscapeString((step * suanli.Money(i)).String()))
	}
	if n := int64(len(days)); n > 0 {
		slot := plotW / n
		bw := max(slot-2, 1)
		for i, d := range days {
			x := chartLeft + int64(i)*slot + (slot-bw)/2
			h := int64(0)
			if d.Amount > 0 {
				h = max(int64(suanli.MulDiv(d.Amount, plotH, int64(scale))), 1)
			}
			label := d.Day.Format("Mon Jan 2") + ": " + d.Amount.String()
			fmt.Fprintf(&b, `<rect class="bar" x="%d" y="%d" width="%d" height="%d"><title>%s</title></rect>`,
				x, chartTop+plotH-h, bw, h, html.EscapeString(label))
			if (len(days)-1-i)%7 == 0 { // weekly, ending on the last day
				fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" text-anchor="middle">%s</text>`, x+bw/2, chartH-8, d.Day.Format("Jan 2"))
			}
		}
	}
	if top == 0 {
		fmt.Fprintf(&b, `<text class="empty" x="%d" y="%d" text-anchor="middle">No spend in this period</text>`, chartLeft+plotW/2, chartTop+plotH/2)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// shareBar draws amount as a horizontal bar against the largest amount, for
// the by-instance table.
func shareBar(amount, largest suanli.Money) template.HTML {
	const w, h = 160, 12
	width := int64(0)
	if largest > 0 && amount > 0 {
		width = max(int64(suanli.MulDiv(amount, w, int64(largest))), 1)
	}
	return template.HTML(fmt.Sprintf(`<svg class="share" viewBox="0 0 %d %d" width="%d" height="%d" aria-hidden="true" focusable="false">`+
		`<rect class="track" x="0" y="0" width="%d" height="%d"/><rect class="bar" x="0" y="0" width="%d" height="%d"/></svg>`,
		w, h, w, h, w, h, width, h))
}

// budgetBar draws a budget's spend as a progress bar with a tick at each
// alert threshold; past 100% the bar is full and marked over.
func budgetBar(percent int, thresholds []int) template.HTML {
	const w, h = 240, 14
	class := "bar"
	switch {
	case percent >= 100:
		class = "bar over"
	case len(thresholds) > 0 && percent >= thresholds[0]:
		class = "bar warn"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="budget" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%d%% of the budget spent">`, w, h+6, w, h+6, percent)
	fmt.Fprintf(&b, `<rect class="track" x="0" y="3" width="%d" height="%d" rx="3"/>`, w, h)
	fmt.Fprintf(&b, `<rect class="%s" x="0" y="3" width="%d" height="%d" rx="3"/>`, class, w*min(max(percent, 0), 100)/100, h)
	for _, t := range thresholds {
		if t > 0 && t < 100 {
			x := w * t / 100
			fmt.Fprintf(&b, `<line class="threshold" x1="%d" y1="0" x2="%d" y2="%d"><title>alert at %d%%</title></line>`, x, x, h+6, t)
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func midnight(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
