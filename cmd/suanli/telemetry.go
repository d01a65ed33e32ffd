package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/internal/units"
)

// telemetryView renders an instance's telemetry for suanli top and show as
// label/value rows. The zero value (with Now set) is show's: totals, no
// rates, no GPU rows.
type telemetryView struct {
	Now *suanli.Telemetry
	// Prev is an earlier sample of the same instance, taken Interval
	// before Now: disk and network rates are computed between the two
	// (suanli top). Nil, a zero Interval or a counter that went down (the
	// instance restarted, its counters with it) leave the rate out.
	Prev     *suanli.Telemetry
	Interval time.Duration
	GPUs     bool // the instance has real GPUs: add utilisation, memory, temperature and power
	Bars     bool // a bar after each percentage (suanli top)
}

// rows returns the view's label/value rows, in a fixed order: cpu, memory,
// disk i/o, network, then for GPU instances gpu util, gpu memory, gpu temp, gpu
// power. Counters that are zero on both sides say "not reported": the
// process runtime measures no network bytes, and some hosts no disk bytes.
func (v telemetryView) rows() [][2]string {
	t := v.Now
	pct := func(p float64) string {
		s := fmt.Sprintf("%.1f%%", p)
		if v.Bars {
			s = fmt.Sprintf("%6s  %s", s, bar(int(p)))
		}
		return s
	}
	rows := [][2]string{
		{"cpu", pct(t.CPUPercent)},
		{"memory", strconv.FormatInt(t.MemoryMB, 10) + " MB"},
		{"disk i/o", v.pair("read", t.DiskReadBytes, "written", t.DiskWriteBytes, func(p *suanli.Telemetry) (int64, int64) {
			return p.DiskReadBytes, p.DiskWriteBytes
		})},
		{"network", v.pair("in", t.NetRxBytes, "out", t.NetTxBytes, func(p *suanli.Telemetry) (int64, int64) {
			return p.NetRxBytes, p.NetTxBytes
		})},
	}
	if !v.GPUs {
		return rows
	}
	temp, power := "not reported", "not reported"
	if t.GPUTempC > 0 {
		temp = strconv.Itoa(t.GPUTempC) + " °C (hottest GPU)"
	}
	if t.GPUPowerW > 0 {
		power = fmt.Sprintf("%.0f W (all its GPUs)", t.GPUPowerW)
	}
	return append(rows,
		[2]string{"gpu util", pct(t.GPUUtilPercent)},
		[2]string{"gpu memory", strconv.FormatInt(t.GPUMemoryMB, 10) + " MB"},
		[2]string{"gpu temp", temp},
		[2]string{"gpu power", power},
	)
}

// pair renders two byte counters, each with its rate when there is one:
// "read 1.2 GB (3.4 MB/s), written 100 MB (0 B/s)".
func (v telemetryView) pair(an string, a int64, bn string, b int64, prev func(*suanli.Telemetry) (int64, int64)) string {
	if a == 0 && b == 0 {
		return "not reported"
	}
	ra, rb := "", ""
	if v.Prev != nil && v.Interval > 0 {
		pa, pb := prev(v.Prev)
		ra, rb = rate(a, pa, v.Interval), rate(b, pb, v.Interval)
	}
	return an + " " + units.Bytes(a) + ra + ", " + bn + " " + units.Bytes(b) + rb
}

// rate is " (N B/s)" for a counter that went from prev to cur over d, or ""
// when it went down.
func rate(cur, prev int64, d time.Duration) string {
	if cur < prev {
		return ""
	}
	return " (" + units.Bytes(int64(float64(cur-prev)/d.Seconds())) + "/s)"
}

// telemetrySampler keeps the last two distinct telemetry samples suanli top
// has seen, and when it saw them. The control plane holds only the latest
// sample, refreshed at each agent sync, so top (which polls more often)
// sees the same sample several times: rates are computed between distinct
// samples, timed by when top first saw each (at most one refresh late).
type telemetrySampler struct {
	last, before     *suanli.Telemetry
	lastAt, beforeAt time.Time
}

// view records t, seen at now, and returns the view to print.
func (s *telemetrySampler) view(t *suanli.Telemetry, now time.Time) telemetryView {
	if t != nil && (s.last == nil || *t != *s.last) {
		s.before, s.beforeAt = s.last, s.lastAt
		s.last, s.lastAt = t, now
	}
	v := telemetryView{Now: t, Bars: true}
	if t != nil && s.before != nil {
		v.Prev, v.Interval = s.before, s.lastAt.Sub(s.beforeAt)
	}
	return v
}
