package suanli_test

import (
	"testing"
	"time"

	"github.com/suanli/suanli"
)

func TestCronNext(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct{ expr, from, want string }{
		{"0 2 * * 1-5", "2026-11-27 03:00", "2026-11-30 02:00"}, // Friday after 2:00 → Monday
		{"0 2 * * 1-5", "2026-11-30 01:59", "2026-11-30 02:00"},
		{"*/15 * * * *", "2026-11-29 10:07", "2026-11-29 10:15"},
		{"30 9 1 * *", "2026-11-29 10:00", "2026-12-01 09:30"},
		{"0 0 29 2 *", "2026-03-01 00:00", "2028-02-29 00:00"}, // beyond a year: none
		{"0 12 * jan,jul sun", "2026-11-29 13:00", "2027-01-03 12:00"},
		{"0 0 13 * fri", "2026-11-29 00:00", "2026-12-04 00:00"}, // dom or dow when both restricted
		{"0 8 * * 7", "2026-11-29 07:00", "2026-11-29 08:00"},    // 7 is Sunday
	} {
		c, err := suanli.ParseCron(tc.expr)
		if err != nil {
			t.Fatalf("ParseCron(%q): %v", tc.expr, err)
		}
		got := c.Next(at(tc.from))
		want := time.Time{}
		if tc.expr != "0 0 29 2 *" {
			want = at(tc.want)
		}
		if !got.Equal(want) {
			t.Errorf("%q after %s = %v, want %v", tc.expr, tc.from, got, want)
		}
	}
	for _, bad := range []string{"", "* * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "*/0 * * * *", "a b c d e", "5-1 * * * *"} {
		if _, err := suanli.ParseCron(bad); err == nil {
			t.Errorf("ParseCron(%q) accepted", bad)
		}
	}
}
