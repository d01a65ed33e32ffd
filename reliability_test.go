package suanli_test

import (
	"testing"
	"time"

	"github.com/suanli/suanli"
)

func TestReliability(t *testing.T) {
	week := 7 * 24 * time.Hour
	for _, tc := range []struct {
		name     string
		h        suanli.HostRecord
		min, max float64
	}{
		{"new", suanli.HostRecord{}, 0.6, 0.6},
		{"perfect week", suanli.HostRecord{Observed: week, Online: week, Started: 50}, 0.98, 1},
		{"half day perfect", suanli.HostRecord{Observed: 12 * time.Hour, Online: 12 * time.Hour, Started: 3}, 0.61, 0.65},
		{"flaky", suanli.HostRecord{Observed: 2 * week, Online: week, Started: 10, Lost: 5}, 0, 0.4},
		{"failed starts", suanli.HostRecord{Observed: week, Online: week, Started: 1, FailedStarts: 9}, 0, 0.2},
	} {
		if got := tc.h.Reliability(); got < tc.min || got > tc.max {
			t.Errorf("%s: Reliability() = %.3f, want in [%.2f, %.2f]", tc.name, got, tc.min, tc.max)
		}
	}
}
