package docker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/internal/procio"
)

// Stats: each running container's stats are streamed (one sample a second,
// Docker's own pace) by a goroutine of its follower, and the latest sample
// is kept in memory. Status and Usage read that sample instead of asking the
// daemon: a one-shot stats request to Docker 20.10 takes a second after the
// first, which would make Status take a second per instance.

// liveSample is the latest stats sample of an instance's current run.
type liveSample struct {
	run       string // the container's StartedAt: the run the counters belong to
	tx, rx    uint64 // bytes sent and received in this run
	telemetry suanli.Telemetry
}

// statsOnce streams the container's stats while it runs, keeping the latest
// sample in r.live; when the stream ends (the container stopped) it folds
// the last counters into the state file.
func (r *Runtime) statsOnce(ctx context.Context, id int64, cid string) error {
	ins, err := r.cli.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
	if err != nil {
		return err
	}
	if ins.Container.State == nil || !ins.Container.State.Running {
		return nil
	}
	run := ins.Container.State.StartedAt
	res, err := r.cli.ContainerStats(ctx, cid, client.ContainerStatsOptions{Stream: true})
	if err != nil {
		return err
	}
	defer res.Body.Close()
	defer r.foldLive(id)
	dec := json.NewDecoder(res.Body)
	var prev suanli.Telemetry
	var procs *string // the container's cgroup.procs, once looked for
	for {
		var s container.StatsResponse
		if err := dec.Decode(&s); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return err
		}
		if s.Read.IsZero() {
			return nil // the container stopped: Docker sends empty samples from then on
		}
		ls := &liveSample{run: run, telemetry: telemetryOf(&s)}
		for _, n := range s.Networks {
			ls.tx += n.TxBytes
			ls.rx += n.RxBytes
		}
		if len(s.BlkioStats.IoServiceBytesRecursive) == 0 {
			if procs == nil {
				p := cgroupProcs(ins.Container.State.Pid, ins.Container.ID)
				procs = &p
			}
			t := &ls.telemetry
			t.DiskReadBytes, t.DiskWriteBytes = procDiskBytes(*procs)
			// Processes that end without being reaped in the container
			// (docker exec) take their counts with them; a run's counters
			// only grow.
			t.DiskReadBytes = max(t.DiskReadBytes, prev.DiskReadBytes)
			t.DiskWriteBytes = max(t.DiskWriteBytes, prev.DiskWriteBytes)
		}
		prev = ls.telemetry
		r.mu.Lock()
		r.live[id] = ls
		r.mu.Unlock()
	}
}

// telemetryOf turns a stats sample (with its previous sample) into
// telemetry: CPU % where 100 is one core, memory without page cache, block
// I/O bytes of the container's cgroup (cgroup v1 "Read"/"Write", v2
// "read"/"write", summed over devices) and its interfaces' bytes, all
// counted since the container started.
func telemetryOf(s *container.StatsResponse) suanli.Telemetry {
	var t suanli.Telemetry
	for _, e := range s.BlkioStats.IoServiceBytesRecursive {
		switch {
		case strings.EqualFold(e.Op, "read"):
			t.DiskReadBytes += int64(e.Value)
		case strings.EqualFold(e.Op, "write"):
			t.DiskWriteBytes += int64(e.Value)
		}
	}
	for _, n := range s.Networks {
		t.NetRxBytes += int64(n.RxBytes)
		t.NetTxBytes += int64(n.TxBytes)
	}
	cpus := s.CPUStats.OnlineCPUs
	if cpus == 0 {
		cpus = uint32(len(s.CPUStats.CPUUsage.PercpuUsage))
	}
	cur, prev := s.CPUStats, s.PreCPUStats
	if prev.SystemUsage > 0 && cur.SystemUsage > prev.SystemUsage && cur.CPUUsage.TotalUsage >= prev.CPUUsage.TotalUsage {
		t.CPUPercent = float64(cur.CPUUsage.TotalUsage-prev.CPUUsage.TotalUsage) /
			float64(cur.SystemUsage-prev.SystemUsage) * float64(cpus) * 100
	}
	mem := s.MemoryStats.Usage
	for _, k := range []string{"total_inactive_file", "inactive_file"} { // cgroup v1, v2
		if v, ok := s.MemoryStats.Stats[k]; ok && v <= mem {
			mem -= v
			break
		}
	}
	t.MemoryMB = int64(mem >> 20)
	return t
}

// Block I/O fallback. The daemon reads a container's block I/O from its
// cgroup; on cgroup v1 with Linux 6.10 and later the kernel counts it only
// for cgroups under a throttle rule, so the daemon sends an empty list (and
// with fuse-overlayfs the writes to the root filesystem are the FUSE
// daemon's, in no container's cgroup). Then the runtime sums /proc/<pid>/io
// over the container's processes, as the process runtime does for its
// process groups: that needs the agent in the host's PID namespace with
// ptrace rights over the containers (root), and the processes' cgroup path
// to name the container; otherwise the disk bytes stay zero. Page-cache
// writes count when dirtied; a docker exec process's I/O counts only while
// it lives (its parent, the shim, is outside the container).

// cgroupProcs returns the cgroup.procs file of the cgroup of process pid,
// or "" when pid's cgroup path does not name container cid (the agent is
// not in the daemon's PID and cgroup namespaces) or the file cannot be
// read.
func cgroupProcs(pid int, cid string) string {
	if pid <= 0 || cid == "" {
		return ""
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3) // hierarchy-ID:controllers:path
		if len(f) != 3 || !strings.Contains(f[2], cid) {
			continue
		}
		var dirs []string
		if f[1] == "" { // cgroup v2, or v1's unified hierarchy
			dirs = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}
		} else {
			for _, c := range strings.Split(f[1], ",") {
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(c, "name=")))
			}
		}
		for _, d := range dirs {
			p := filepath.Join(d, f[2], "cgroup.procs")
			if procs, err := os.ReadFile(p); err == nil && slices.Contains(strings.Fields(string(procs)), strconv.Itoa(pid)) {
				return p
			}
		}
	}
	return ""
}

// procDiskBytes sums the storage I/O counters of the processes listed in
// the cgroup.procs file procs; zero when there is none.
func procDiskBytes(procs string) (read, write int64) {
	if procs == "" {
		return 0, 0
	}
	b, err := os.ReadFile(procs)
	if err != nil {
		return 0, 0
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if c, err := procio.Read(pid); err == nil {
			read += c.ReadBytes
			write += c.WriteBytes
		}
	}
	return read, write
}

// foldLive folds the instance's latest sample into its state file.
func (r *Runtime) foldLive(id int64) {
	mu := r.instanceLock(id)
	mu.Lock()
	defer mu.Unlock()
	st := r.loadState(id)
	r.foldLiveLocked(id, st)
}

// foldLiveLocked folds the instance's latest sample into st and saves st
// when it changed. The caller holds the instance lock.
func (r *Runtime) foldLiveLocked(id int64, st *instanceState) {
	r.mu.Lock()
	ls := r.live[id]
	r.mu.Unlock()
	if ls == nil {
		return
	}
	before := *st
	if st.RunStartedAt != ls.run {
		// A new run: its network namespace counts from zero.
		st.TxBase += st.TxLast
		st.RxBase += st.RxLast
		st.TxLast, st.RxLast = 0, 0
		st.RunStartedAt = ls.run
	}
	if ls.tx < st.TxLast || ls.rx < st.RxLast {
		st.TxBase += st.TxLast // counters reset within a run (reconnected network)
		st.RxBase += st.RxLast
	}
	st.TxLast, st.RxLast = ls.tx, ls.rx
	if *st != before {
		if err := r.saveState(id, st); err != nil {
			r.log.Warn("save traffic counters", "instance_id", id, "err", err)
		}
	}
}

// telemetry returns the latest telemetry of the instance's run, nil when no
// sample of that run has come yet.
func (r *Runtime) telemetry(id int64, run string) *suanli.Telemetry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ls := r.live[id]; ls != nil && ls.run == run {
		t := ls.telemetry
		return &t
	}
	return nil
}

// Usage returns each instance's traffic since it was created: bytes sent
// (TxBytes, egress) and received (RxBytes) by the container's network
// interfaces, summed across its runs, as of the latest stats sample (at most
// about a second old while it runs). Seq is left for the agent to set. The
// last second of traffic before a container stops may be missed.
func (r *Runtime) Usage(ctx context.Context) (map[int64]suanli.UsageReport, error) {
	cs, err := r.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]suanli.UsageReport, len(cs))
	for _, m := range cs {
		mu := r.instanceLock(m.id)
		mu.Lock()
		st := r.loadState(m.id)
		r.foldLiveLocked(m.id, st)
		mu.Unlock()
		out[m.id] = suanli.UsageReport{
			InstanceID: m.id,
			TxBytes:    int64(st.TxBase + st.TxLast),
			RxBytes:    int64(st.RxBase + st.RxLast),
		}
	}
	return out, nil
}
