// Package gctune sets the garbage collector's target for the control plane.
//
// The server keeps the whole offer index in memory (about 180 MB at a
// million offers) and every API call makes short-lived garbage. With Go's
// default target (GOGC=100) the collector runs every second or so under
// load, and its mark phases put the slowest searches several milliseconds
// behind: `suanli-bench http-search -offers 1000000` measured p99 17.4 ms at
// the default and 11.4 ms at 400, at 1,651 and 1,754 requests/s. The heap
// may grow to about five times the live data between collections; a soft
// memory limit (GOMEMLIMIT) bounds that on small machines.
package gctune

import (
	"os"
	"runtime/debug"
)

// DefaultPercent is the server's GC target when GOGC is not set.
const DefaultPercent = 400

// Apply sets the GC target to percent unless the environment's GOGC says
// otherwise (the operator's word wins), and returns the target in force
// (-1: off).
func Apply(percent int) int {
	if os.Getenv("GOGC") != "" {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(percent)
	return percent
}
