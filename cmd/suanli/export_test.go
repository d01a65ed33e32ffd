package main

import (
	"time"

	"github.com/suanli/suanli"
)

// TelemetryRows is show's rendering of t (prev nil) or top's (with prev
// taken interval before t, and bars).
func TelemetryRows(t, prev *suanli.Telemetry, interval time.Duration, gpus, bars bool) [][2]string {
	return telemetryView{Now: t, Prev: prev, Interval: interval, GPUs: gpus, Bars: bars}.rows()
}

// TopRows feeds suanli top's sampler the samples polled at the given times
// and returns what it prints after the last.
func TopRows(samples []*suanli.Telemetry, at []time.Time) [][2]string {
	var s telemetrySampler
	var v telemetryView
	for i, t := range samples {
		v = s.view(t, at[i])
	}
	return v.rows()
}
