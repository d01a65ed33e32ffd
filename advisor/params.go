package advisor

import (
	"math"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

// ParseParams reads a parameter count as people write it: "7B", "7b",
// "1.5B", "350M", "125m", "1.2T", "7e9" or a plain integer. It returns
// EINVALID for anything else, for a count below 1000, and for "8x7B"-style
// mixture-of-experts names, whose total is not 8 × 7B (give the model name).
func ParseParams(s string) (int64, error) {
	t := strings.TrimSpace(strings.ReplaceAll(s, "_", ""))
	if t == "" {
		return 0, suanli.FieldErrorf("params", "empty: write the parameter count like 7B or 350M")
	}
	if strings.ContainsAny(t, "xX") && !strings.HasPrefix(t, "0x") {
		return 0, suanli.FieldErrorf("params", "%q looks like a mixture of experts: give the model name (e.g. mixtral-8x7b) or its total parameter count (46.7B)", s)
	}
	mult := 1.0
	switch t[len(t)-1] {
	case 'k', 'K':
		mult = 1e3
	case 'm', 'M':
		mult = 1e6
	case 'b', 'B', 'g', 'G':
		mult = 1e9
	case 't', 'T':
		mult = 1e12
	}
	if mult != 1 {
		t = strings.TrimSpace(t[:len(t)-1])
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, suanli.FieldErrorf("params", "%q is not a parameter count: write it like 7B, 1.5B or 350M", s)
	}
	n := f * mult
	if n < 1000 || n > 1e14 {
		return 0, suanli.FieldErrorf("params", "%q is out of range: between 1K and 100T parameters", s)
	}
	return int64(math.Round(n)), nil
}

// FormatParams writes a parameter count the short way: "6.74B", "350M".
func FormatParams(n int64) string {
	f := float64(n)
	switch {
	case f >= 1e12:
		return trimFloat(f/1e12, 2) + "T"
	case f >= 1e9:
		return trimFloat(f/1e9, 2) + "B"
	case f >= 1e6:
		return trimFloat(f/1e6, 1) + "M"
	case f >= 1e3:
		return trimFloat(f/1e3, 1) + "K"
	}
	return strconv.FormatInt(n, 10)
}

func trimFloat(f float64, prec int) string {
	s := strconv.FormatFloat(f, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
