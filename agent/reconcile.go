package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/suanli/suanli"
)

// instState is what the agent knows about one instance besides what the
// runtime reports. Guarded by Agent.mu.
type instState struct {
	spec *suanli.InstanceSpec // the last spec the server sent
	want *op                  // the operation asked for last
	done *op                  // the operation that ran last (an Ensure that failed counts as run)
	busy bool                 // a worker goroutine runs operations for it
	err  string               // why the last Ensure failed; "" when it did not
	// token is the instance token last handed to the runtime's
	// TokenWriter; a different one in the spec is written on sync.
	token string
	// ended: at agent start the runtime held this instance exited or
	// failed. The server's first "running" for it is taken as already
	// applied, so that restarting the agent does not restart finished work.
	ended bool
}

// op is one runtime operation: Ensure(spec) or Remove.
type op struct {
	remove bool
	// For a remove: the last spec (to stop the workload gracefully first)
	// and the log offset the server holds, so the log's tail is shipped
	// before the runtime deletes it.
	last    *suanli.InstanceSpec
	logFrom int64
	spec    suanli.InstanceSpec
	key     []byte // spec as JSON, for comparison (nil and empty fields alike)
}

// ensureOp is Ensure(spec). Its key leaves out the instance token: a fresh
// token alone is not a new spec (it would restart an exited workload); it
// reaches the workload through TokenWriter.
func ensureOp(spec suanli.InstanceSpec) *op {
	k := spec
	k.Token = ""
	key, _ := json.Marshal(k)
	return &op{spec: spec, key: key}
}

func (o *op) same(p *op) bool {
	if o == nil || p == nil {
		return o == p
	}
	return o.remove == p.remove && (o.remove || (o.spec.ID == p.spec.ID && bytes.Equal(o.key, p.key)))
}

// seed notes the instances the runtime holds at start that have finished.
func (a *Agent) seed(ctx context.Context) {
	reports, err := a.rt.Status(ctx)
	if err != nil {
		a.log.Warn("runtime status failed", "err", err)
		return
	}
	a.lastReports = reports
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range reports {
		if r.Status == suanli.StatusExited || r.Status == suanli.StatusFailed {
			a.insts[r.ID] = &instState{ended: true}
		}
	}
}

// reconcile asks the runtime for the desired state: Ensure for each spec
// that differs from the one asked for last, Remove for each instance the
// server no longer lists (or lists as destroyed). Operations run in one
// goroutine per instance, one at a time, so that a slow one (an image pull,
// a stop grace) holds up no other instance; a newer request for an instance
// replaces one still waiting.
//
// An Ensure is not repeated for the same spec: a workload that exited stays
// exited, and a failed Ensure stays failed, until the server sends a
// different spec for it (stop, then start). A failed Remove is retried on
// the next sync.
func (a *Agent) reconcile(ctx context.Context, specs []suanli.InstanceSpec, reports []suanli.InstanceReport) {
	a.reconcileLocked(ctx, specs, reports)
	a.writeTokens(ctx, specs)
}

// writeTokens hands each instance whose token changed its new token, when
// the runtime can take one.
func (a *Agent) writeTokens(ctx context.Context, specs []suanli.InstanceSpec) {
	tw, ok := a.rt.(TokenWriter)
	if !ok {
		return
	}
	for _, spec := range specs {
		if spec.Token == "" || spec.Desired == suanli.DesiredDestroyed {
			continue
		}
		a.mu.Lock()
		st := a.insts[spec.ID]
		stale := st != nil && st.token != spec.Token
		a.mu.Unlock()
		if !stale {
			continue
		}
		if err := tw.WriteToken(ctx, spec.ID, spec.Token); err != nil {
			a.log.Debug("write instance token", "instance_id", spec.ID, "err", err)
			continue
		}
		a.mu.Lock()
		st.token = spec.Token
		a.mu.Unlock()
	}
}

func (a *Agent) reconcileLocked(ctx context.Context, specs []suanli.InstanceSpec, reports []suanli.InstanceReport) {
	a.mu.Lock()
	defer a.mu.Unlock()
	desired := make(map[int64]bool, len(specs))
	for _, spec := range specs {
		if spec.Desired == suanli.DesiredDestroyed {
			continue
		}
		desired[spec.ID] = true
		st := a.insts[spec.ID]
		if st == nil {
			st = &instState{}
			a.insts[spec.ID] = st
		}
		s := spec
		st.spec = &s
		o := ensureOp(spec)
		if st.ended && st.want == nil && spec.Desired == suanli.DesiredRunning {
			st.want, st.done, st.ended = o, o, false
			continue
		}
		st.ended = false
		if o.same(st.want) {
			continue
		}
		st.want = o
		a.kickLocked(ctx, spec.ID, st)
	}
	ids := sortedKeys(a.insts)
	for _, r := range reports {
		ids = append(ids, r.ID)
	}
	for _, id := range ids {
		if desired[id] {
			continue
		}
		st := a.insts[id]
		if st == nil {
			st = &instState{}
			a.insts[id] = st
		}
		if st.want != nil && st.want.remove {
			continue
		}
		st.want = &op{remove: true, last: st.spec, logFrom: a.ackedLog[id]}
		a.kickLocked(ctx, id, st)
	}
}

// kickLocked starts a worker for the instance unless one runs.
func (a *Agent) kickLocked(ctx context.Context, id int64, st *instState) {
	if st.busy {
		return
	}
	st.busy = true
	a.wg.Add(1)
	go a.work(ctx, id, st)
}

// work runs the instance's operations until it has done the last one asked.
func (a *Agent) work(ctx context.Context, id int64, st *instState) {
	defer a.wg.Done()
	for {
		a.mu.Lock()
		o := st.want
		if o == nil || o.same(st.done) || ctx.Err() != nil {
			st.busy = false
			a.mu.Unlock()
			return
		}
		if !o.remove && o.spec.Desired == suanli.DesiredRunning && a.gpusStoppingLocked(id, o.spec.GPUIndexes) {
			// Another workload on these GPUs is being stopped (a preempted
			// one running out its grace, a destroyed one): start after it.
			a.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(gpuWaitPoll):
			}
			continue
		}
		a.mu.Unlock()

		var err error
		if o.remove {
			a.stopAndShipTail(ctx, id, o)
			err = a.release(ctx, id)
		} else {
			err = a.rt.Ensure(ctx, o.spec)
		}

		a.mu.Lock()
		switch {
		case ctx.Err() != nil:
			// Shutting down: what happened is not the instance's fault.
		case o.remove && err == nil:
			st.done, st.err = o, ""
			if st.want == o {
				delete(a.insts, id)
			}
			a.log.Info("instance removed", "instance_id", id)
		case o.remove:
			if st.want == o {
				st.want = nil // the next sync asks again
			}
			a.log.Warn("instance remove failed", "instance_id", id, "err", err)
		case err != nil:
			st.done, st.err = o, err.Error()
			a.log.Warn("instance ensure failed", "instance_id", id, "desired", o.spec.Desired, "err", err)
		default:
			st.done, st.err = o, ""
		}
		a.mu.Unlock()
		a.nudge()
	}
}

// gpuWaitPoll is how often a start held back by another workload's stop
// looks again.
const gpuWaitPoll = 50 * time.Millisecond

// gpusStoppingLocked reports whether an instance other than id that uses
// one of gpus is being stopped or removed: its last asked operation is a
// stop or a remove that has not finished. Starting a workload on those GPUs
// now could run two at once on one GPU.
func (a *Agent) gpusStoppingLocked(id int64, gpus []int) bool {
	if len(gpus) == 0 {
		return false
	}
	for other, st := range a.insts {
		if other == id || st.want == nil || st.want.same(st.done) {
			continue
		}
		if !st.want.remove && st.want.spec.Desired == suanli.DesiredRunning {
			continue
		}
		var theirs []int
		if st.spec != nil {
			theirs = st.spec.GPUIndexes
		}
		if !st.want.remove {
			theirs = st.want.spec.GPUIndexes
		}
		for _, g := range theirs {
			if slices.Contains(gpus, g) {
				return true
			}
		}
	}
	return false
}

// reports reads the runtime's status and overlays what only the agent
// knows: failed Ensures and GPU load. When the runtime cannot answer, the
// last reports stand.
func (a *Agent) reports(ctx context.Context) []suanli.InstanceReport {
	reports, err := a.rt.Status(ctx)
	if err != nil {
		a.log.Warn("runtime status failed", "err", err)
		reports = slices.Clone(a.lastReports)
	}
	a.mu.Lock()
	gpus := map[int64][]int{}
	for id, st := range a.insts {
		if st.spec != nil && !st.spec.Simulated && len(st.spec.GPUIndexes) > 0 {
			gpus[id] = st.spec.GPUIndexes
		}
		if st.err == "" || (st.want != nil && st.want.remove) {
			continue
		}
		i := slices.IndexFunc(reports, func(r suanli.InstanceReport) bool { return r.ID == id })
		if i < 0 {
			reports = append(reports, suanli.InstanceReport{ID: id})
			i = len(reports) - 1
		}
		reports[i] = suanli.InstanceReport{ID: id, Status: suanli.StatusFailed, Message: st.err, StartedAt: reports[i].StartedAt}
	}
	a.mu.Unlock()
	a.addGPUTelemetry(ctx, reports, gpus)
	slices.SortFunc(reports, func(x, y suanli.InstanceReport) int { return cmp.Compare(x.ID, y.ID) })
	a.lastReports = reports
	return reports
}

// addGPUTelemetry fills the GPU fields of running instances' telemetry from
// a GPU sample at most gpuSampleEvery old: utilisation is the mean and
// memory the sum over the instance's GPUs, temperature the hottest of them,
// power their summed draw.
func (a *Agent) addGPUTelemetry(ctx context.Context, reports []suanli.InstanceReport, gpus map[int64][]int) {
	if a.cfg.GPUSampler == nil || len(gpus) == 0 {
		return
	}
	if now := a.now(); a.gpuAt.IsZero() || now.Sub(a.gpuAt) >= gpuSampleEvery {
		samples, err := a.cfg.GPUSampler(ctx)
		if err != nil {
			a.log.Warn("gpu sample failed", "err", err)
		}
		a.gpuSamples, a.gpuAt = samples, now
	}
	for i := range reports {
		idx := gpus[reports[i].ID]
		if len(idx) == 0 || reports[i].Status != suanli.StatusRunning {
			continue
		}
		var t suanli.Telemetry
		if reports[i].Telemetry != nil {
			t = *reports[i].Telemetry
		}
		var util float64
		n := 0
		for _, s := range a.gpuSamples {
			if slices.Contains(idx, s.Index) {
				util += s.UtilPercent
				t.GPUMemoryMB += s.MemoryUsedMB
				t.GPUTempC = max(t.GPUTempC, s.TemperatureC)
				t.GPUPowerW += s.PowerW
				n++
			}
		}
		if n == 0 {
			continue
		}
		t.GPUUtilPercent = util / float64(n)
		reports[i].Telemetry = &t
	}
}

// checkFence stops every running instance once the fence interval (see
// fenceAfter) has passed without a successful sync (DESIGN §4: the agent
// fences itself before the control plane declares the machine lost). It
// fences once per outage; the next successful sync lifts the fence and
// applies the desired state again, so an instance the server still wants
// running starts again then. The stop grace is cut to what is left before
// the control plane's lost_after, less a margin: past that, the workload may
// be running elsewhere.
func (a *Agent) checkFence(ctx context.Context) {
	fence := a.fenceAfter()
	if fence <= 0 || a.fenced {
		return
	}
	since := a.now().Sub(a.lastSuccess)
	if since < fence {
		return
	}
	a.fenced = true
	grace := time.Duration(-1) // the spec's own
	if a.lostAfter > 0 {
		grace = max(a.lostAfter-since-a.cfg.PollInterval-fenceMargin, time.Millisecond)
	}
	reports := a.reports(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range reports {
		if r.Status != suanli.StatusRunning && r.Status != suanli.StatusPulling {
			continue
		}
		st := a.insts[r.ID]
		if st == nil {
			st = &instState{}
			a.insts[r.ID] = st
		}
		spec := suanli.InstanceSpec{ID: r.ID}
		if st.spec != nil {
			spec = *st.spec
		}
		spec.Desired = suanli.DesiredStopped
		if grace > 0 {
			if spec.StopGrace <= 0 {
				spec.StopGrace = runtimeStopGrace
			}
			spec.StopGrace = min(spec.StopGrace, grace)
		}
		st.want = ensureOp(spec)
		st.ended = false
		a.kickLocked(ctx, r.ID, st)
		n++
	}
	a.log.Warn("control plane unreachable, fencing: stopping instances",
		"since_last_sync", since, "fence_after", fence, "instances", n, "stop_grace_max", grace)
}

// stopAndShipTail stops an instance that is about to be removed the way a
// stop does (SIGTERM, grace, SIGKILL), so the workload can say goodbye, and
// keeps its log's unsent tail for the next sync: Remove deletes the log.
func (a *Agent) stopAndShipTail(ctx context.Context, id int64, o *op) {
	if o.last != nil && o.last.Desired == suanli.DesiredRunning {
		stop := *o.last
		stop.Desired = suanli.DesiredStopped
		if err := a.rt.Ensure(ctx, stop); err != nil {
			a.log.Warn("stop before remove failed", "instance_id", id, "err", err)
		}
	}
	b, err := a.rt.ReadLog(ctx, id, o.logFrom, MaxLogChunk)
	if err != nil || len(b) == 0 {
		return
	}
	a.mu.Lock()
	a.finalLogs = append(a.finalLogs, suanli.LogChunk{InstanceID: id, Offset: o.logFrom, Data: b, Next: o.logFrom + int64(len(b))})
	a.mu.Unlock()
}

// release removes an instance through the runtime and queues what was done
// to its data for the control plane.
func (a *Agent) release(ctx context.Context, id int64) error {
	rr, ok := a.rt.(Releaser)
	if !ok {
		return a.rt.Remove(ctx, id)
	}
	rel, err := rr.Release(ctx, id)
	if err != nil {
		return err
	}
	a.addRelease(rel)
	return nil
}

// addRelease queues a release report for the next syncs.
func (a *Agent) addRelease(rel suanli.Release) {
	if rel.Method == "" {
		return // nothing was there
	}
	if rel.At.IsZero() {
		rel.At = a.now() // the agent's clock
	}
	a.mu.Lock()
	a.releases = append(a.releases, rel)
	a.mu.Unlock()
	a.nudge()
}
