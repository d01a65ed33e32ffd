// Package units formats quantities for people: byte counts in decimal
// units, as the agent's messages, the CLI and audit details print them. It
// owns no state and parses nothing.
package units

import (
	"fmt"
	"strconv"
)

// Bytes writes n in decimal units with two or three significant digits:
// "999 B", "1.2 kB", "34 MB", "5.6 GB".
func Bytes(n int64) string {
	const unit = 1000
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	x := float64(n) / float64(div)
	if x < 10 {
		return fmt.Sprintf("%.1f %cB", x, "kMGTPE"[exp])
	}
	return fmt.Sprintf("%.0f %cB", x, "kMGTPE"[exp])
}
