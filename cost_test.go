package suanli_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/suanli/suanli"
)

func TestStopWindow(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse("Mon 2006-01-02 15:04", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		window, at string
		want       bool
	}{
		{"Mon-Fri 22:00-06:00", "Tue 2026-11-10 23:00", true},
		{"Mon-Fri 22:00-06:00", "Wed 2026-11-11 05:59", true}, // Tuesday night's window
		{"Mon-Fri 22:00-06:00", "Wed 2026-11-11 06:00", false},
		{"Mon-Fri 22:00-06:00", "Sat 2026-11-14 01:00", true}, // Friday night's window
		{"Mon-Fri 22:00-06:00", "Sun 2026-11-15 01:00", false},
		{"Mon-Fri 22:00-06:00", "Mon 2026-11-09 01:00", false},
		{"Sat-Sun", "Sun 2026-11-15 12:00", true},
		{"Sat-Sun", "Mon 2026-11-16 00:00", false},
		{"Fri-Mon", "Sun 2026-11-15 12:00", true}, // wraps across the week
		{"* 12:00-13:00", "Wed 2026-11-11 12:30", true},
		{"Sat,Sun 00:00-08:00", "Sat 2026-11-14 07:59", true},
	} {
		w, err := suanli.ParseStopWindow(tc.window)
		if err != nil {
			t.Fatalf("ParseStopWindow(%q): %v", tc.window, err)
		}
		if got := w.Contains(at(tc.at)); got != tc.want {
			t.Errorf("%q contains %s = %v, want %v", tc.window, tc.at, got, tc.want)
		}
	}
	for _, bad := range []string{"", "Funday", "Mon 25:00-26:00", "Mon-Fri 22:00", "a b c"} {
		if _, err := suanli.ParseStopWindow(bad); err == nil {
			t.Errorf("ParseStopWindow(%q) accepted", bad)
		}
	}
}

func TestGuardsAndDurations(t *testing.T) {
	if d, err := suanli.ParseDuration("1d12h"); err != nil || d != 36*time.Hour {
		t.Errorf("ParseDuration(1d12h) = %v, %v", d, err)
	}
	var g suanli.Guards
	if err := json.Unmarshal([]byte(`{"max_runtime":"8h","idle_stop_minutes":30}`), &g); err != nil || time.Duration(g.MaxRuntime) != 8*time.Hour {
		t.Fatalf("guards JSON: %+v %v", g, err)
	}
	if err := json.Unmarshal([]byte(`{"max_runtime":3600}`), &g); err != nil || time.Duration(g.MaxRuntime) != time.Hour {
		t.Fatalf("guards JSON seconds: %+v %v", g, err)
	}
	if e := (suanli.Guards{}).Effective(); e.IdleStopMinutes != suanli.DefaultIdleStopMinutes || e.IdlePercent != suanli.DefaultIdlePercent {
		t.Errorf("defaults not applied: %+v", e)
	}
	for _, bad := range []suanli.Guards{{IdleStopMinutes: -2}, {IdlePercent: 101}, {StopWindows: []string{"nope"}}, {MaxRuntime: -1}} {
		if err := bad.Validate(); suanli.ErrorCode(err) != suanli.EINVALID {
			t.Errorf("Validate(%+v) = %v, want invalid", bad, err)
		}
	}
}
