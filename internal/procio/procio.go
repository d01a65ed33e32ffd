package procio

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Counters are one process's storage I/O totals, as /proc/<pid>/io has
// them: for every thread of the process, living or gone, and for the
// children it has reaped (the kernel adds a child's counters to its
// parent's when the parent waits for it). The zero value is no I/O.
type Counters struct {
	// ReadBytes counts bytes read from block devices: page-cache hits do
	// not count, direct I/O does.
	ReadBytes int64
	// WriteBytes counts bytes written through the page cache when they
	// are dirtied (before they reach the disk), and direct writes. Files on
	// tmpfs never count.
	WriteBytes int64
}

// Read returns the counters of process pid. Reading another user's process
// needs ptrace rights over it (root, or the same user).
func Read(pid int) (Counters, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return Counters{}, err
	}
	return Parse(b)
}

// Parse parses the contents of /proc/<pid>/io ("read_bytes: 4096" lines;
// the other lines are ignored).
func Parse(b []byte) (Counters, error) {
	var c Counters
	seen := 0
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		var dst *int64
		switch {
		case !ok:
			continue
		case k == "read_bytes":
			dst = &c.ReadBytes
		case k == "write_bytes":
			dst = &c.WriteBytes
		default:
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return Counters{}, fmt.Errorf("parse /proc io line %q: %w", line, err)
		}
		*dst = n
		seen++
	}
	if seen != 2 {
		return Counters{}, fmt.Errorf("parse /proc io %q: want read_bytes and write_bytes", b)
	}
	return c, nil
}
