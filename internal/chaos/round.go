package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/suanli/suanli"
)

// Fault is a kind of host failure a Round injects.
type Fault string

// The faults. The first four last past lost_after: the control plane must
// declare the host's rentals lost and relaunch its managed jobs elsewhere.
// The last two must not be taken for a loss.
const (
	// Kill: SIGKILL to the whole host (the agent and its workloads); the
	// host is started again on heal.
	Kill Fault = "kill"
	// Freeze: the whole host frozen (docker pause); thawed on heal.
	Freeze Fault = "freeze"
	// Partition: the host cut off the network; reconnected on heal.
	Partition Fault = "partition"
	// StopAgent: SIGSTOP to the agent process alone; its workloads run on,
	// and no agent can fence them until SIGCONT on heal.
	StopAgent Fault = "sigstop-agent"
	// ShortPartition: cut off for longer than fence_after but healed
	// before lost_after: the agent fences; nothing is declared lost.
	ShortPartition Fault = "short-partition"
	// Loss: a lossy link (RoundOptions.LossPercent, and Delay where the
	// kernel has netem) for RoundOptions.LossFor.
	Loss Fault = "loss"
)

// Lost reports whether the fault lasts past lost_after.
func (f Fault) Lost() bool { return f == Kill || f == Freeze || f == Partition || f == StopAgent }

// RoundOptions tune a Round. Zero values mean the defaults.
type RoundOptions struct {
	// LossPercent is the share of packets the Loss fault drops in each
	// direction; default 20.
	LossPercent int
	// Delay is the Loss fault's added delay (where the kernel has netem);
	// default 100ms.
	Delay time.Duration
	// LossFor is how long the Loss fault lasts; default the detection
	// bound plus 5s, so that a false loss would have been declared.
	LossFor time.Duration
}

// Trial is what one fault on one host did to its two rentals: a managed job
// (--recover elsewhere) and a plain rental, each on one GPU, running the beat
// workload.
type Trial struct {
	Round int
	Fault Fault
	Agent string
	// Detected is the time from the fault to the control plane acting on
	// it (the managed job's relaunch); 0 when it was not detected.
	Detected time.Duration
	// SinceHeartbeat is the time from the host's last heartbeat (the lost
	// event) to the relaunch.
	SinceHeartbeat time.Duration
	// BilledAfterHeartbeat is the compute billed, in seconds, for the
	// host's rentals between its last heartbeat (their lost event) and
	// their next start: from the ledger and the histories, exactly.
	BilledAfterHeartbeat float64
	// BilledIdle is the compute billed, in seconds, while no copy of the
	// rental ran: from the ledger and the workloads' beats, to a sample.
	BilledIdle float64
	// BilledTwice is the compute billed twice (charges of one rental that
	// overlap in time), in seconds.
	BilledTwice float64
	// MaxCopies is the most copies of one rental seen running at once, and
	// Duplicate how long two ran at once.
	MaxCopies int
	Duplicate time.Duration
	// Relaunches is how often the managed job was moved to another host.
	Relaunches int
	// Interruptions counts the times a rental's copy on the faulted host
	// stopped (or froze) and ran again there: a fence and a restart, or a
	// freeze and a thaw. A lossy link must cause none.
	Interruptions int
	// Lost counts the rentals declared lost (false for Loss and
	// ShortPartition); Suspect, whether the host was seen suspect.
	Lost    int
	Suspect bool
	// Recovery is the time from the fault to the managed job running (seen
	// beating) on another host.
	Recovery time.Duration
	// Cleanup is the time from the heal to the healed host no longer
	// holding the moved job (the agent removed its copy).
	Cleanup time.Duration
	// Delayed: the Loss fault delayed packets too (the kernel has netem).
	Delayed bool
	// PlainAfter is the plain rental's status after the heal.
	PlainAfter string
	// Notes say what went wrong, if anything.
	Notes []string
	// Details explain figures worth a look that are within the bounds
	// (compute billed while no copy ran, over 100 ms): the benchmark
	// prints them with the notes; tests log them.
	Details []string
}

func (t *Trial) notef(format string, args ...any) {
	t.Notes = append(t.Notes, fmt.Sprintf(format, args...))
}

func (t *Trial) detailf(format string, args ...any) {
	t.Details = append(t.Details, fmt.Sprintf(format, args...))
}

type host struct {
	a            *Agent
	fault        Fault
	job, plain   int64
	faultAt      time.Time
	healAt       time.Time
	healed, done bool
	t            *Trial
}

// Round puts a managed job and a plain rental on each of the first
// len(faults) agents, injects faults[i] into agent i (all at once), heals
// each fault when it has had its effect, waits until the healed hosts have
// settled, measures, and destroys the rentals. The other agents are the
// spares the managed jobs move to: they need a free GPU for each host that
// is lost. An error means the round could not be run; what went wrong in the
// system under test is in the trials' Notes.
func (c *Cluster) Round(ctx context.Context, n int, faults []Fault, ro RoundOptions) ([]*Trial, error) {
	if len(faults) > len(c.Agents) {
		return nil, suanli.Errorf(suanli.EINVALID, "%d faults for %d agents", len(faults), len(c.Agents))
	}
	if ro.LossPercent <= 0 {
		ro.LossPercent = 20
	}
	if ro.Delay == 0 {
		ro.Delay = 100 * time.Millisecond
	}
	if ro.LossFor <= 0 {
		ro.LossFor = c.Opts.DetectionBound() + 5*time.Second
	}
	o := c.Opts
	w := c.Watch()
	defer w.Stop()
	var hosts []*host
	var ids []int64
	for i, f := range faults {
		h := &host{a: c.Agents[i], fault: f, t: &Trial{Round: n, Fault: f, Agent: c.Agents[i].Name}}
		var err error
		if h.job, err = c.rent(ctx, h.a, fmt.Sprintf("r%d-%s-job", n, f), true); err != nil {
			return nil, err
		}
		if h.plain, err = c.rent(ctx, h.a, fmt.Sprintf("r%d-%s-plain", n, f), false); err != nil {
			return nil, err
		}
		hosts = append(hosts, h)
		ids = append(ids, h.job, h.plain)
	}
	w.Add(ids...)
	defer c.destroy(context.WithoutCancel(ctx), ids)

	// Everything runs, and beats.
	err := poll(ctx, 30*time.Second, func() (bool, error) {
		for _, h := range hosts {
			for _, id := range []int64{h.job, h.plain} {
				in, err := c.Client.FindInstanceByID(ctx, id)
				if err != nil || in.Status != suanli.StatusRunning {
					return false, nil
				}
				if len(w.RunningNow(id)) == 0 {
					return false, nil
				}
			}
		}
		return true, nil
	}, func() string { return "every rental running" })
	if err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second) // steady state: heartbeats, settlements
	start := time.Now()
	o.Logf("round %d: injecting %v", n, faults)
	defer func() { // whatever happens, no host stays broken
		for _, h := range hosts {
			if !h.healed && !h.faultAt.IsZero() {
				c.heal(context.WithoutCancel(ctx), h, ro)
			}
		}
	}()
	if err := each(hosts, func(h *host) error { return c.inject(ctx, h, ro) }); err != nil {
		return nil, err
	}

	// Heal each fault once it had its effect; then wait for the healed hosts
	// to settle.
	deadline := start.Add(o.DetectionBound() + ro.LossFor + 40*time.Second)
	for {
		if time.Now().After(deadline) {
			for _, h := range hosts {
				if !h.done {
					h.t.notef("round timed out: healed %v, settled %v", h.healed, h.done)
				}
			}
			break
		}
		ms, _, err := c.Client.FindMachines(ctx, suanli.MachineFilter{})
		if err != nil {
			return nil, err
		}
		all := true
		for _, h := range hosts {
			for _, m := range ms {
				if m.ID == h.a.MachineID && m.Status == suanli.MachineSuspect && !h.healed {
					h.t.Suspect = true
				}
			}
			if err := c.step(ctx, h, w, ro); err != nil {
				return nil, err
			}
			all = all && h.done
		}
		if all {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(o.Heartbeat + 2*o.Settle) // the last heartbeats settled
	end := time.Now()
	for _, h := range hosts {
		if err := c.measure(ctx, h, w, start, end); err != nil {
			return nil, err
		}
	}
	out := make([]*Trial, len(hosts))
	for i, h := range hosts {
		out[i] = h.t
	}
	return out, nil
}

// each runs fn for every host at once.
func each(hosts []*host, fn func(*host) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(hosts))
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(h)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Cluster) rent(ctx context.Context, a *Agent, label string, managed bool) (int64, error) {
	cr := suanli.InstanceCreate{OfferID: a.MachineID, Image: "beat", GPUCount: 1, Cmd: []string{"/beat", "-every", beatEvery.String(), "-log", "/home/beats"}, Label: label,
		Guards: suanli.Guards{IdleStopMinutes: -1}}
	if managed {
		cr.Restart = suanli.RestartPolicy{Recover: "elsewhere"}
	}
	in, err := c.Client.CreateInstance(ctx, cr)
	if err != nil {
		return 0, fmt.Errorf("rent on %s (machine %d): %w", a.Name, a.MachineID, err)
	}
	return in.ID, nil
}

func (c *Cluster) destroy(ctx context.Context, ids []int64) {
	for _, id := range ids {
		c.Client.DestroyInstance(ctx, id)
	}
	poll(ctx, 30*time.Second, func() (bool, error) {
		for _, id := range ids {
			for _, a := range c.Agents {
				if a.Holds(id) {
					return false, nil
				}
			}
		}
		return true, nil
	}, func() string { return "destroyed rentals removed" })
}

func (c *Cluster) inject(ctx context.Context, h *host, ro RoundOptions) error {
	var err error
	switch h.fault {
	case Kill:
		err = h.a.Kill(ctx)
	case Freeze:
		err = h.a.Freeze(ctx)
	case Partition, ShortPartition:
		err = h.a.Disconnect(ctx)
	case StopAgent:
		err = h.a.StopAgent(ctx)
	case Loss:
		h.t.Delayed, err = h.a.Lossy(ctx, ro.LossPercent, ro.Delay)
	default:
		err = suanli.Errorf(suanli.EINVALID, "unknown fault %q", h.fault)
	}
	h.faultAt = time.Now()
	return err
}

func (c *Cluster) heal(ctx context.Context, h *host, ro RoundOptions) error {
	var err error
	switch h.fault {
	case Kill:
		err = h.a.Restart(ctx)
	case Freeze:
		err = h.a.Thaw(ctx)
	case Partition, ShortPartition:
		err = h.a.Connect(ctx)
	case StopAgent:
		err = h.a.ContAgent(ctx)
	case Loss:
		err = h.a.Clear(ctx, ro.LossPercent)
	}
	h.healAt, h.healed = time.Now(), true
	c.Opts.Logf("%s on %s healed after %s", h.fault, h.a.Name, h.healAt.Sub(h.faultAt).Round(time.Millisecond))
	return err
}

// step advances one host: heals its fault when due, and marks it done once
// the healed host has settled.
func (c *Cluster) step(ctx context.Context, h *host, w *Watch, ro RoundOptions) error {
	o := c.Opts
	now := time.Now()
	if !h.healed {
		due := false
		switch h.fault {
		case ShortPartition:
			due = now.Sub(h.faultAt) >= o.FenceAfter+(o.LostAfter-o.FenceAfter)/4
		case Loss:
			due = now.Sub(h.faultAt) >= ro.LossFor
		default:
			job, err := c.Client.FindInstanceByID(ctx, h.job)
			if err != nil {
				return err
			}
			due = job.MachineID != h.a.MachineID && w.MovedAway(h.job, h.faultAt, h.a.Index)
			if !due && now.Sub(h.faultAt) > o.DetectionBound()+15*time.Second {
				h.t.notef("the managed job was not running elsewhere %s after the fault (machine %d, %s)", now.Sub(h.faultAt).Round(time.Second), job.MachineID, job.Status)
				due = true
			}
		}
		if due {
			return c.heal(ctx, h, ro)
		}
		return nil
	}
	if h.done {
		return nil
	}
	m, err := c.Client.FindMachineByID(ctx, h.a.MachineID)
	if err != nil {
		return err
	}
	job, err := c.Client.FindInstanceByID(ctx, h.job)
	if err != nil {
		return err
	}
	plain, err := c.Client.FindInstanceByID(ctx, h.plain)
	if err != nil {
		return err
	}
	settled := m.Status == suanli.MachineOnline
	if job.MachineID == h.a.MachineID {
		settled = settled && job.Status == suanli.StatusRunning && len(w.RunningNow(h.job)) > 0
	} else {
		settled = settled && !h.a.Holds(h.job)
	}
	switch plain.Status {
	case suanli.StatusRunning:
		settled = settled && len(w.RunningNow(h.plain)) > 0
	case suanli.StatusExited, suanli.StatusFailed:
	default:
		settled = false
	}
	if settled {
		h.done = true
		if job.MachineID != h.a.MachineID {
			h.t.Cleanup = now.Sub(h.healAt)
		}
		h.t.PlainAfter = plain.Status
	} else if now.Sub(h.healAt) > 30*time.Second {
		h.done = true
		h.t.notef("not settled 30s after the heal: machine %s, job on machine %d %s (held here: %v), plain %s",
			m.Status, job.MachineID, job.Status, h.a.Holds(h.job), plain.Status)
	}
	return nil
}

// measure fills h's trial from the rentals' histories and charges and the
// watch's samples between start and end.
func (c *Cluster) measure(ctx context.Context, h *host, w *Watch, start, end time.Time) error {
	t := h.t
	job, err := c.Client.FindInstanceByID(ctx, h.job)
	if err != nil {
		return err
	}
	t.Relaunches = job.Moves
	for _, id := range []int64{h.job, h.plain} {
		evs, err := c.Client.InstanceEvents(ctx, id)
		if err != nil {
			return err
		}
		sum, err := c.Client.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &id, Limit: 100000})
		if err != nil {
			return err
		}
		var compute []span
		for _, ch := range sum.Charges {
			if ch.Kind == suanli.MeterCompute && ch.To.After(ch.From) {
				compute = append(compute, span{ch.From, ch.To})
			}
		}
		sortSpans(compute)
		for i := 1; i < len(compute); i++ {
			for j := 0; j < i; j++ {
				if d := overlap(compute[j:j+1], compute[i].from, compute[i].to); d > 0 {
					t.BilledTwice += d.Seconds()
				}
			}
		}
		// Billed after the last heartbeat: from each lost event to the
		// next start.
		for i, e := range evs {
			if e.Status != suanli.StatusLost || e.At.Before(start.Add(-time.Minute)) {
				continue
			}
			t.Lost++
			next := end
			for _, f := range evs[i+1:] {
				if f.Status == suanli.StatusRunning {
					next = f.At
					break
				}
			}
			t.BilledAfterHeartbeat += overlap(compute, e.At, next).Seconds()
			if id == h.job {
				for _, f := range evs[i:] {
					if f.Status == suanli.StatusPending && strings.Contains(f.Message, "relaunching") {
						t.Detected, t.SinceHeartbeat = f.At.Sub(h.faultAt), f.At.Sub(e.At)
						break
					}
				}
			}
		}
		// Billed while no copy ran, over the trial.
		running := w.running(id)
		for _, s := range compute {
			a, b := maxTime(s.from, start), minTime(s.to, end)
			if !b.After(a) {
				continue
			}
			idle := b.Sub(a) - overlap(running, a, b)
			t.BilledIdle += idle.Seconds()
			if idle > 100*time.Millisecond {
				var hist []string
				for _, e := range evs {
					if e.At.After(a.Add(-10*time.Second)) && e.At.Before(b.Add(10*time.Second)) {
						hist = append(hist, e.At.Format("15:04:05.000")+" "+e.Status)
					}
				}
				t.detailf("rental %d: %.3fs of the compute charge %s–%s billed while no copy ran (copies ran %s; history %s; agent: %s)", id, idle.Seconds(),
					s.from.Format("15:04:05.000"), s.to.Format("15:04:05.000"), fmtSpans(running, a.Add(-10*time.Second), b.Add(10*time.Second)),
					strings.Join(hist, ", "), h.a.logLines(fmt.Sprintf("instance_id=%d", id), "fencing", "sync"))
			}
		}
		n := 0
		for _, sp := range w.lives(id)[h.a.Index] {
			if sp.to.After(start) && sp.from.Before(end) {
				n++
			}
		}
		t.Interruptions += max(n-1, 0)
		most, dup := w.Copies(id, start, end)
		t.MaxCopies = max(t.MaxCopies, most)
		t.Duplicate += dup
	}
	if h.fault.Lost() {
		if at, _, ok := w.FirstRunning(h.job, h.faultAt, h.a.Index); ok {
			t.Recovery = at.Sub(h.faultAt)
		}
	}
	return nil
}

// fmtSpans formats the spans that meet [from, to), for a note.
func fmtSpans(spans []span, from, to time.Time) string {
	var parts []string
	for _, s := range spans {
		if s.to.After(from) && s.from.Before(to) {
			parts = append(parts, s.from.Format("15:04:05.000")+"–"+s.to.Format("15:04:05.000"))
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
