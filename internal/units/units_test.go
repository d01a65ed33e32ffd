package units_test

import (
	"testing"

	"github.com/suanli/suanli/internal/units"
)

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {999, "999 B"}, {1000, "1.0 kB"}, {15_500, "16 kB"}, {12_345_678, "12 MB"}, {1_200_000_000, "1.2 GB"}, {5_600_000_000_000, "5.6 TB"}} {
		if got := units.Bytes(c.n); got != c.want {
			t.Errorf("Bytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
