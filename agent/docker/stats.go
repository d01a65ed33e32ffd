package docker

import (
	"context"
	"encoding/json"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/suanli/suanli"
)

// cpuSample is one reading of a container's CPU counters; CPU % is the
// difference between two readings (one per Status call).
type cpuSample struct {
	total, system uint64
	cpus          uint32
}

// sampleLocked reads one stats sample of a running container, folds its
// network counters into st (saving st when they moved) and returns its
// telemetry; nil when the daemon has no sample (the container stopped
// meanwhile). Failures are logged: telemetry is best effort. The caller
// holds the instance lock.
func (r *Runtime) sampleLocked(ctx context.Context, id int64, c *container.InspectResponse, st *instanceState) *suanli.Telemetry {
	res, err := r.cli.ContainerStats(ctx, c.ID, client.ContainerStatsOptions{})
	if err != nil {
		r.log.Debug("container stats", "instance_id", id, "err", err)
		return nil
	}
	defer res.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		r.log.Debug("decode container stats", "instance_id", id, "err", err)
		return nil
	}
	if s.Read.IsZero() || s.PidsStats.Current == 0 && s.CPUStats.CPUUsage.TotalUsage == 0 {
		return nil
	}

	var tx, rx uint64
	for _, n := range s.Networks {
		tx += n.TxBytes
		rx += n.RxBytes
	}
	before := *st
	if st.RunStartedAt != c.State.StartedAt {
		// A new run: its network namespace counts from zero.
		st.TxBase += st.TxLast
		st.RxBase += st.RxLast
		st.TxLast, st.RxLast = 0, 0
		st.RunStartedAt = c.State.StartedAt
	}
	if tx < st.TxLast || rx < st.RxLast {
		st.TxBase += st.TxLast // counters reset within a run (reconnected network)
		st.RxBase += st.RxLast
	}
	st.TxLast, st.RxLast = tx, rx
	if *st != before {
		if err := r.saveState(id, st); err != nil {
			r.log.Warn("save traffic counters", "instance_id", id, "err", err)
		}
	}

	cur := cpuSample{total: s.CPUStats.CPUUsage.TotalUsage, system: s.CPUStats.SystemUsage, cpus: s.CPUStats.OnlineCPUs}
	if cur.cpus == 0 {
		cur.cpus = uint32(len(s.CPUStats.CPUUsage.PercpuUsage))
	}
	r.mu.Lock()
	prev, ok := r.samples[id]
	r.samples[id] = cur
	r.mu.Unlock()
	t := &suanli.Telemetry{}
	if ok && cur.system > prev.system && cur.total >= prev.total {
		t.CPUPercent = float64(cur.total-prev.total) / float64(cur.system-prev.system) * float64(cur.cpus) * 100
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

// Usage returns each instance's traffic since it was created: bytes sent
// (TxBytes, egress) and received (RxBytes) by the container's network
// interfaces, summed across its runs. Seq is left for the agent to set. The
// bytes a workload moves between the last sample and a stop it did not ask
// for (a crash) are not counted; a stop through Ensure samples first.
func (r *Runtime) Usage(ctx context.Context) (map[int64]suanli.UsageReport, error) {
	cs, err := r.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]suanli.UsageReport, len(cs))
	for _, m := range cs {
		var c *container.InspectResponse
		if m.state == container.StateRunning {
			if c, err = r.inspect(ctx, m.id); err != nil {
				return nil, err
			}
		}
		mu := r.instanceLock(m.id)
		mu.Lock()
		st := r.loadState(m.id)
		if c != nil && c.State.Running {
			r.sampleLocked(ctx, m.id, c, st)
		}
		mu.Unlock()
		out[m.id] = suanli.UsageReport{
			InstanceID: m.id,
			TxBytes:    int64(st.TxBase + st.TxLast),
			RxBytes:    int64(st.RxBase + st.RxLast),
		}
	}
	return out, nil
}
