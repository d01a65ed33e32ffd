package process

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/suanli/suanli/internal/procio"
)

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat. It is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procStat is the part of /proc/<pid>/stat the runtime uses.
type procStat struct {
	state      byte   // R, S, D, Z, T, …
	pgrp       int    // process group
	cpuTicks   uint64 // utime + stime
	startTicks uint64 // start time after boot, in clock ticks
	rssPages   int64
}

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// parseStat parses a /proc/<pid>/stat line. The command name (field 2) may
// hold spaces and parentheses, so fields are counted after its last ')'.
func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return procStat{}, fmt.Errorf("malformed /proc stat %q", b)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 22 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("malformed /proc stat %q", b)
	}
	var s procStat
	var errs [5]error
	s.state = f[0][0]
	s.pgrp, errs[0] = strconv.Atoi(f[5-3])
	utime, e1 := strconv.ParseUint(f[14-3], 10, 64)
	stime, e2 := strconv.ParseUint(f[15-3], 10, 64)
	errs[1], errs[2] = e1, e2
	s.cpuTicks = utime + stime
	s.startTicks, errs[3] = strconv.ParseUint(f[22-3], 10, 64)
	s.rssPages, errs[4] = strconv.ParseInt(f[24-3], 10, 64)
	for _, err := range errs {
		if err != nil {
			return procStat{}, fmt.Errorf("malformed /proc stat %q: %w", b, err)
		}
	}
	return s, nil
}

// readBootID returns this boot's random id, so that a pid recorded before a
// reboot is never taken for a live process after it.
func readBootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return string(bytes.TrimSpace(b))
}

// alive reports whether pid is still the process that started at startTicks
// during boot bootID, and has not exited.
func alive(pid int, startTicks uint64, bootID, currentBootID string) bool {
	if pid <= 0 || bootID != currentBootID {
		return false
	}
	s, err := readStat(pid)
	if err != nil || s.startTicks != startTicks {
		return false
	}
	return s.state != 'Z' && s.state != 'X' && s.state != 'x'
}

// groupUsage is the summed CPU time, resident memory and storage I/O of the
// live processes in one process group.
type groupUsage struct {
	cpuTicks   uint64
	rssBytes   int64
	readBytes  int64 // see procio.Counters
	writeBytes int64
}

// scanGroups reads /proc once and sums usage for each of the given process
// groups.
func scanGroups(pgids map[int]bool) map[int]groupUsage {
	out := make(map[int]groupUsage, len(pgids))
	if len(pgids) == 0 {
		return out
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	page := int64(os.Getpagesize())
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, err := readStat(pid)
		if err != nil || !pgids[s.pgrp] || s.state == 'Z' {
			continue
		}
		u := out[s.pgrp]
		u.cpuTicks += s.cpuTicks
		u.rssBytes += s.rssPages * page
		if c, err := procio.Read(pid); err == nil {
			u.readBytes += c.ReadBytes
			u.writeBytes += c.WriteBytes
		}
		out[s.pgrp] = u
	}
	return out
}
