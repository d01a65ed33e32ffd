package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// parseLifetime reads a duration that may be given in days ("90d", "1.5d")
// as well as in Go's units ("12h", "90m").
func parseLifetime(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if v, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 || n > 100000 {
			return 0, suanli.Errorf(suanli.EINVALID, "%q is not a number of days", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, suanli.Errorf(suanli.EINVALID, "%q is not a duration: write 90d, 12h or 30m", s)
	}
	return d, nil
}
