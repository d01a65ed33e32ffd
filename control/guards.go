package control

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/suanli/suanli"
)

// usageTracker remembers, per running instance, the latest telemetry, when
// it was last busy, and GPU utilisation samples for hints. It lives in
// memory: after a restart idle timers start again, which errs on the side
// of not stopping anything.
type usageTracker struct {
	mu   sync.Mutex
	byID map[int64]*instanceUsage
}

type instanceUsage struct {
	latest   suanli.Telemetry
	reported time.Time
	lastBusy time.Time
	gpu      []gpuSample // the last hour
}

type gpuSample struct {
	at   time.Time
	util float64
}

func (u *usageTracker) record(id int64, t *suanli.Telemetry, idlePercent int, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byID == nil {
		u.byID = map[int64]*instanceUsage{}
	}
	iu := u.byID[id]
	if iu == nil {
		iu = &instanceUsage{lastBusy: now}
		u.byID[id] = iu
	}
	iu.latest, iu.reported = *t, now
	if t.CPUPercent >= float64(idlePercent) || t.GPUUtilPercent >= float64(idlePercent) {
		iu.lastBusy = now
	}
	iu.gpu = append(iu.gpu, gpuSample{now, t.GPUUtilPercent})
	cut := 0
	for cut < len(iu.gpu) && now.Sub(iu.gpu[cut].at) > time.Hour {
		cut++
	}
	iu.gpu = iu.gpu[cut:]
}

func (u *usageTracker) get(id int64) (instanceUsage, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	iu, ok := u.byID[id]
	if !ok {
		return instanceUsage{}, false
	}
	c := *iu
	c.gpu = append([]gpuSample(nil), iu.gpu...)
	return c, true
}

func (u *usageTracker) forget(id int64) {
	u.mu.Lock()
	delete(u.byID, id)
	u.mu.Unlock()
}

// hint returns a utilisation hint for an instance whose real GPUs stayed
// under 70% for the last hour, or "".
func (iu instanceUsage) hint(now time.Time) string {
	if len(iu.gpu) < 2 || now.Sub(iu.gpu[0].at) < 55*time.Minute {
		return ""
	}
	var sum float64
	for _, s := range iu.gpu {
		sum += s.util
	}
	mean := sum / float64(len(iu.gpu))
	if mean >= 70 {
		return ""
	}
	return fmt.Sprintf("GPU utilisation averaged %.0f%% over the last hour: the job may be I/O- or CPU-bound (data loading?) or its batch too small; a smaller or cheaper GPU may do", mean)
}

// decorate adds live telemetry and hints to instances read from the store.
func (s *Service) decorate(ins ...*suanli.Instance) {
	now := s.now()
	for _, in := range ins {
		iu, ok := s.usage.get(in.ID)
		if !ok || in.Status != suanli.StatusRunning {
			continue
		}
		t := iu.latest
		in.Telemetry = &t
		if h := iu.hint(now); h != "" && !in.Simulated {
			in.Hints = append(in.Hints, h)
		}
	}
}

// CheckGuards applies every running instance's ghost-spend guards: max
// runtime, idle auto-stop, stop windows; and destroys instances stopped past
// their opt-in limit. Each action is recorded in the instance's history and
// as an alert.
func (s *Service) CheckGuards(ctx context.Context) error {
	now := s.now()
	live := true
	ins, _, err := s.Store.FindInstances(ctx, suanli.InstanceFilter{Live: &live, Limit: 1 << 30}, now)
	if err != nil {
		return err
	}
	for _, in := range ins {
		g := in.Guards.Effective()
		var reason string
		switch in.Status {
		case suanli.StatusRunning:
			reason = s.guardReason(in, g, now)
			if reason != "" {
				err = s.stopByGuard(ctx, in, reason)
			}
		case suanli.StatusStopped, suanli.StatusExited, suanli.StatusFailed:
			if g.DestroyAfterStoppedDays > 0 && in.StoppedAt != nil && now.Sub(*in.StoppedAt) >= time.Duration(g.DestroyAfterStoppedDays)*24*time.Hour {
				reason = fmt.Sprintf("auto-destroyed: stopped for %d days (destroy_after_stopped_days)", g.DestroyAfterStoppedDays)
				err = s.destroyByGuard(ctx, in, reason)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) guardReason(in *suanli.Instance, g suanli.Guards, now time.Time) string {
	if g.MaxRuntime > 0 && in.StartedAt != nil && now.Sub(*in.StartedAt) >= time.Duration(g.MaxRuntime) {
		return fmt.Sprintf("auto-stopped: reached its max runtime of %s (--ttl); `suanli start %d` runs it again", time.Duration(g.MaxRuntime), in.ID)
	}
	for _, w := range g.StopWindows {
		if sw, err := suanli.ParseStopWindow(w); err == nil && sw.Contains(now) {
			return fmt.Sprintf("auto-stopped: scheduled stop window %q (UTC)", w)
		}
	}
	return s.idleReason(in, g, now)
}

// idleReason says why an instance is stopped as idle, or "". Telemetry is
// kept by the replica that receives it, so each replica judges the
// instances whose agents sync with it (checkIdle).
func (s *Service) idleReason(in *suanli.Instance, g suanli.Guards, now time.Time) string {
	if g.IdleStopMinutes > 0 {
		if iu, ok := s.usage.get(in.ID); ok {
			since := iu.lastBusy
			if in.StartedAt != nil && in.StartedAt.After(since) {
				since = *in.StartedAt
			}
			if s.started.After(since) {
				since = s.started
			}
			if now.Sub(since) >= time.Duration(g.IdleStopMinutes)*time.Minute && now.Sub(iu.reported) < 2*time.Minute {
				return fmt.Sprintf("auto-stopped: idle (CPU and GPU under %d%%) for %d minutes; `suanli start %d` runs it again", g.IdlePercent, g.IdleStopMinutes, in.ID)
			}
		}
	}
	return ""
}

// checkIdle applies the idle guard to the running instances whose
// telemetry this replica received: on a replica that does not run the
// singleton loops, CheckGuards never sees it.
func (s *Service) checkIdle(ctx context.Context) error {
	now := s.now()
	s.usage.mu.Lock()
	var ids []int64
	for id, iu := range s.usage.byID {
		// Only instances idle for a minute at least (the shortest idle
		// guard) are read from the store.
		if now.Sub(iu.reported) < 2*time.Minute && now.Sub(iu.lastBusy) >= time.Minute && now.Sub(s.started) >= time.Minute {
			ids = append(ids, id)
		}
	}
	s.usage.mu.Unlock()
	for _, id := range ids {
		in, err := s.Store.FindInstanceByID(ctx, id, now)
		if suanli.ErrorCode(err) == suanli.ENOTFOUND {
			s.usage.forget(id)
			continue
		} else if err != nil {
			return err
		}
		if in.Status != suanli.StatusRunning {
			continue
		}
		if reason := s.idleReason(in, in.Guards.Effective(), now); reason != "" {
			if err := s.stopByGuard(ctx, in, reason); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Service) stopByGuard(ctx context.Context, in *suanli.Instance, reason string) error {
	now := s.now()
	out, err := s.Store.UpdateInstance(ctx, in.ID, now, now, func(i *suanli.Instance) error {
		if i.Status != suanli.StatusRunning {
			return errIgnore
		}
		i.Desired, i.Status, i.StatusMessage = suanli.DesiredStopped, suanli.StatusStopping, reason
		return nil
	})
	if err == errIgnore {
		return nil
	} else if err != nil {
		return err
	}
	s.afterChange(ctx, out.MachineID)
	s.usage.forget(in.ID)
	s.Logger.Info("instance stopped by guard", "instance_id", in.ID, "reason", reason)
	s.RecordAudit(ctx, suanli.AuditEvent{AccountID: in.AccountID, Action: "instance.stopped_by_guard", Target: fmt.Sprintf("instance %d", in.ID),
		Result: "ok", Detail: reason})
	s.alert(ctx, &suanli.Alert{AccountID: in.AccountID, Kind: "guard", InstanceID: in.ID, Message: fmt.Sprintf("instance %d %s", in.ID, reason)}, "", "", "")
	return nil
}

func (s *Service) destroyByGuard(ctx context.Context, in *suanli.Instance, reason string) error {
	now := s.now()
	out, err := s.Store.UpdateInstance(ctx, in.ID, now, now, func(i *suanli.Instance) error {
		i.Desired, i.Status, i.StatusMessage = suanli.DesiredDestroyed, suanli.StatusDestroyed, reason
		return nil
	})
	if err != nil {
		return err
	}
	s.afterChange(ctx, out.MachineID)
	s.RecordAudit(ctx, suanli.AuditEvent{AccountID: in.AccountID, Action: "instance.destroyed_by_guard", Target: fmt.Sprintf("instance %d", in.ID),
		Result: "ok", Detail: reason})
	s.alert(ctx, &suanli.Alert{AccountID: in.AccountID, Kind: "guard", InstanceID: in.ID, Message: fmt.Sprintf("instance %d %s", in.ID, reason)}, "", "", "")
	return nil
}

// afterChange follows any change to a machine's instances: whoever waits
// for units the change freed (or that a changed bid now wins) gets them, and
// owners that now lose them are preempted (rebalance); then the machine's
// agent is woken and its offer refreshed. A failed rebalance is logged: the
// change itself stands, and the next change or sync arbitrates again.
func (s *Service) afterChange(ctx context.Context, machineID int64) {
	if err := s.rebalance(ctx, machineID); err != nil {
		s.Logger.Error("rebalance", "machine_id", machineID, "err", err)
	}
	s.hub.wake(machineID)
	if err := s.refreshOffer(ctx, machineID); err != nil {
		s.Logger.Error("refresh offer", "machine_id", machineID, "err", err)
	}
}
