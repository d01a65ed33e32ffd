package control

import (
	"context"
	"fmt"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
	"github.com/suanli/suanli/sqlstore"
)

// Join registers a machine with a one-time token and returns the agent's
// own credential, scoped to syncing that machine.
func (s *Service) Join(ctx context.Context, r suanli.JoinRequest) (*suanli.JoinResponse, error) {
	if !auth.WellFormed(r.Token, auth.PrefixJoin) {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "join token is malformed (expected sl_join_…): print one with `suanli host join-token`")
	}
	now := s.now()
	sim := false
	for _, g := range r.Hardware.GPUs {
		sim = sim || g.Simulated
	}
	m := &suanli.Machine{Hardware: r.Hardware, Simulated: sim, Status: suanli.MachineOnline, LastHeartbeat: now,
		Runtime: r.Runtime, Reliability: 0.6, CreatedAt: now, Listing: suanli.Listing{PreemptGraceS: 30}}
	secret := auth.NewSecret(auth.PrefixKey)
	key := &suanli.APIKey{Name: "agent", Prefix: auth.DisplayPrefix(secret), Scopes: []string{suanli.ScopeAgent},
		CreatedAt: now, ExpiresAt: now.Add(auth.MaxKeyLifetime)}
	if err := s.Store.JoinMachine(ctx, auth.Hash(r.Token), m, key, auth.Hash(secret), now); err != nil {
		return nil, err
	}
	s.Logger.Info("machine joined", "machine_id", m.ID, "owner_id", m.OwnerID, "gpus", len(r.Hardware.GPUs), "simulated", sim)
	return &suanli.JoinResponse{MachineID: m.ID, APIKey: secret}, nil
}

// Sync records an agent's heartbeat, reports, logs and usage, then returns
// its machine's desired state, waiting (long poll) when the agent already
// has the current version.
func (s *Service) Sync(ctx context.Context, r *suanli.SyncRequest) (*suanli.SyncResponse, error) {
	p, err := principal(ctx, suanli.ScopeAgent)
	if err != nil {
		return nil, err
	}
	if r.MachineID == 0 {
		r.MachineID = p.MachineID
	}
	if r.MachineID != p.MachineID {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "this agent credential belongs to machine %d, not %d", p.MachineID, r.MachineID)
	}
	now := s.now()
	m, err := s.Store.FindMachineByID(ctx, r.MachineID)
	if err != nil {
		return nil, err
	}
	s.withBeats(m)
	// Reports go in before the heartbeat: the settlement loop bills compute
	// up to the last heartbeat, and a workload that ended during an outage
	// (a fence) must have its billing ended first, where it ended.
	changed := m.Status != suanli.MachineOnline || r.Hardware != nil
	for _, rep := range r.Instances {
		c, err := s.applyReport(ctx, m.ID, rep, endedAt(rep, m.LastHeartbeat, now), now)
		if err != nil {
			return nil, err
		}
		changed = changed || c
	}
	// A sync that changes something writes its heartbeat now; one that
	// changes nothing is a beat, recorded in memory and written with the
	// next batch (RunHeartbeats).
	if changed || r.AgentVersion != m.AgentVersion || r.Runtime != m.Runtime {
		if err := s.Store.RecordHeartbeat(ctx, m.ID, sqlstore.Heartbeat{At: now, Status: suanli.MachineOnline,
			AgentVersion: r.AgentVersion, Runtime: r.Runtime, Hardware: r.Hardware}); err != nil {
			return nil, err
		}
		s.Beats.Persisted(m.ID, now)
		s.leases.online(m.ID, now)
	} else {
		s.Beats.Seen(m.ID, now)
	}
	if r.SSH != nil {
		if err := s.Store.SetMachineSSH(ctx, m.ID, *r.SSH, now); err != nil {
			return nil, err
		}
	}
	for _, l := range r.Logs {
		if err := s.ingestLog(ctx, m.ID, l); err != nil {
			return nil, err
		}
	}
	if err := s.Store.RecordUsage(ctx, m.ID, r.Usage, now); err != nil {
		return nil, err
	}
	s.tasks.deliver(m.ID, r.TaskResults)
	if err := s.recordReleases(ctx, m, r.Releases); err != nil {
		return nil, err
	}
	if changed {
		// GPUs may have been freed (a stop, an exit, a notice that ended):
		// whoever waits for them may win them now.
		if err := s.rebalance(ctx, m.ID); err != nil {
			s.Logger.Error("rebalance", "machine_id", m.ID, "err", err)
		}
		if err := s.refreshOffer(ctx, m.ID); err != nil {
			return nil, err
		}
	}
	return s.desired(ctx, m.ID, r)
}

func (s *Service) ingestLog(ctx context.Context, machineID int64, l suanli.LogChunk) error {
	in, err := s.Store.FindInstanceByID(ctx, l.InstanceID, s.now())
	if suanli.ErrorCode(err) == suanli.ENOTFOUND || (err == nil && in.MachineID != machineID) {
		return nil // not this machine's: drop it
	} else if err != nil {
		return err
	}
	_, err = s.Store.AppendLog(ctx, l.InstanceID, l.Offset, l.Data)
	return err
}

// endedAt is when a report's change takes effect: its EndedAt (on our
// clock, as the agent reckons it), no earlier than the machine's previous
// heartbeat (which reported the workload still running) and no later than
// now. Reports without it, and reports of a running workload, take effect
// now.
func endedAt(rep suanli.InstanceReport, prevBeat, now time.Time) time.Time {
	if rep.EndedAt == nil || rep.Status == suanli.StatusRunning || rep.Status == suanli.StatusPulling {
		return now
	}
	at := *rep.EndedAt
	if at.Before(prevBeat) {
		at = prevBeat
	}
	if at.After(now) {
		at = now
	}
	return at
}

// applyReport folds an agent's view of one instance into its status; a
// change takes effect (for billing and the history) at at. It returns
// whether the status changed.
func (s *Service) applyReport(ctx context.Context, machineID int64, rep suanli.InstanceReport, at, now time.Time) (bool, error) {
	changed := false
	_, err := s.Store.UpdateInstance(ctx, rep.ID, at, now, func(in *suanli.Instance) error {
		if in.MachineID != machineID {
			return errIgnore
		}
		before := in.Status
		next, msg := in.Status, rep.Message
		switch rep.Status {
		case suanli.StatusPulling:
			if runnable(in) {
				next = suanli.StatusPulling
			}
		case suanli.StatusRunning:
			if runnable(in) {
				next, msg = suanli.StatusRunning, ""
			}
		case suanli.StatusStopped, suanli.StatusExited, suanli.StatusFailed:
			if in.Status == suanli.StatusPreempting {
				// The notice is over: compute billing ends; it waits for GPUs.
				next, msg = suanli.StatusStopped, "stopped by the renter while preempted"
				if in.Desired == suanli.DesiredRunning {
					next, msg = suanli.StatusPreempted, "preempted: stopped after its notice; the disk stays and it resumes by itself when it wins GPUs again"
					t := now
					in.WaitingSince = &t
				}
				break
			}
			switch rep.Status {
			case suanli.StatusStopped:
				// An exit or failure already explains why it is not running,
				// a new or resumed instance is held back while another one
				// stops, and a preempted or queued one waits: keep them.
				switch in.Status {
				case suanli.StatusPending, suanli.StatusScheduling, suanli.StatusExited, suanli.StatusFailed, suanli.StatusPreempted, suanli.StatusStopped:
				default:
					next = suanli.StatusStopped
				}
				if in.RestartPending {
					restartIfPending(in)
					next, msg = in.Status, in.StatusMessage
				}
			case suanli.StatusExited:
				if in.Status == suanli.StatusExited || in.RestartPending {
					break // already handled
				}
				next, in.Desired = suanli.StatusExited, suanli.DesiredStopped
				in.WaitingSince = nil
				if rep.ExitCode != nil {
					c := *rep.ExitCode
					in.ExitCode = &c
					if msg == "" {
						msg = fmt.Sprintf("the command exited with code %d", c)
					}
				}
				prev := in.StatusMessage
				if restartAfterExit(in, in.ExitCode); in.StatusMessage != prev {
					// Keep the agent's reason (a disk over its size, …)
					// ahead of what the restart policy decided.
					if rep.Message != "" {
						msg = rep.Message + "; " + in.StatusMessage
					} else {
						msg = in.StatusMessage
					}
				}
			case suanli.StatusFailed:
				if in.Status == suanli.StatusFailed || in.RestartPending {
					break
				}
				next, in.Desired = suanli.StatusFailed, suanli.DesiredStopped
				in.WaitingSince = nil
				prev := in.StatusMessage
				if restartAfterExit(in, nil); in.StatusMessage != prev {
					msg = rep.Message + "; " + in.StatusMessage
				}
			}
		}
		if in.Status == suanli.StatusDestroyed {
			return errIgnore
		}
		in.Status = next
		if len(rep.Ports) > 0 {
			in.PortMap = rep.Ports
		}
		if rep.Telemetry != nil && next == suanli.StatusRunning {
			s.usage.record(in.ID, rep.Telemetry, in.Guards.Effective().IdlePercent, now)
		}
		// A report's message replaces ours; a stop keeps the reason it was
		// asked for ("stopped by budget …"); running clears it.
		if next == suanli.StatusRunning && next != before {
			in.StatusMessage = ""
		} else if msg != "" && (next != before || rep.Status == suanli.StatusPulling || rep.Status == suanli.StatusFailed) {
			in.StatusMessage = msg
		}
		changed = next != before
		return nil
	})
	if err == errIgnore || suanli.ErrorCode(err) == suanli.ENOTFOUND {
		return false, nil
	}
	if err == nil && changed {
		switch rep.Status {
		case suanli.StatusRunning:
			err = s.Store.CountHostEvent(ctx, machineID, sqlstore.HostStarted)
		case suanli.StatusFailed:
			err = s.Store.CountHostEvent(ctx, machineID, sqlstore.HostFailedStart)
		}
	}
	return changed, err
}

var errIgnore = fmt.Errorf("ignore")

// runnable reports whether the control plane wants in running now and it
// owns its GPUs: a report that it runs (or pulls) then moves its status.
func runnable(in *suanli.Instance) bool {
	switch in.Status {
	case suanli.StatusPending, suanli.StatusScheduling, suanli.StatusPulling, suanli.StatusRunning, suanli.StatusLost:
		return in.Desired == suanli.DesiredRunning
	}
	return false
}

// specDesired is what the agent is asked for one instance: running only
// while the instance owns its GPUs (not lost, preempting, preempted or
// queued) and, until it runs, no preempted workload still occupies any of
// them (on a CPU-only machine: none is still stopping), so that two
// workloads never share a GPU.
func specDesired(in *suanli.Instance, m *suanli.Machine, draining map[int]bool, cpuDraining bool) string {
	if in.Desired != suanli.DesiredRunning {
		return in.Desired
	}
	if !in.OwnsGPUs() || in.Status == suanli.StatusLost {
		return suanli.DesiredStopped
	}
	if in.Status == suanli.StatusRunning {
		return suanli.DesiredRunning
	}
	if !m.IsGPU() && cpuDraining {
		return suanli.DesiredStopped
	}
	for _, g := range in.GPUIndexes {
		if draining[g] {
			return suanli.DesiredStopped
		}
	}
	return suanli.DesiredRunning
}

func (s *Service) desired(ctx context.Context, machineID int64, r *suanli.SyncRequest) (_ *suanli.SyncResponse, err error) {
	if r.Wait {
		wake := s.hub.wait(machineID)
		v, err := s.Store.DesiredVersion(ctx, machineID)
		if err != nil {
			return nil, err
		}
		if v == r.KnownVersion && len(s.tasks.pending(machineID)) == 0 {
			t := time.NewTimer(s.cfg.HeartbeatInterval)
			select {
			case <-wake:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
	// The agent will have version v: its beats are acknowledged from now
	// on, unless the desired state changes again (a wake) meanwhile.
	wakes := s.Beats.Wakes(machineID)
	v, err := s.Store.DesiredVersion(ctx, machineID)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err == nil {
			s.Beats.Synced(machineID, v, wakes)
		}
	}()
	live := true
	ins, _, err := s.Store.FindInstances(ctx, suanli.InstanceFilter{MachineID: &machineID, Live: &live, Limit: 100000}, s.now())
	if err != nil {
		return nil, err
	}
	m, err := s.Store.FindMachineByID(ctx, machineID)
	if err != nil {
		return nil, err
	}
	resp := &suanli.SyncResponse{MachineID: machineID, Version: v, HeartbeatInterval: s.cfg.HeartbeatInterval,
		LostAfter: s.cfg.LostAfter, ServerTime: s.now(), Instances: []suanli.InstanceSpec{}, Tasks: s.tasks.pending(machineID),
		SSHCAKeys: s.sshCAKeys(), Heartbeat: s.heartbeatChannel(machineID)}
	vols, err := s.Store.FindVolumes(ctx, 0, machineID, false, s.now())
	if err != nil {
		return nil, err
	}
	for _, v := range vols {
		resp.Volumes = append(resp.Volumes, suanli.VolumeSpec{ID: v.ID, Name: v.Name, SizeGB: v.SizeGB})
	}
	resp.LogOffsets, err = s.Store.LogEnds(ctx, machineID)
	if err != nil {
		return nil, err
	}
	draining, cpuDraining := map[int]bool{}, false
	for _, in := range ins {
		if in.Status == suanli.StatusPreempting {
			cpuDraining = true
			for _, g := range in.GPUIndexes {
				draining[g] = true
			}
		}
	}
	for _, in := range ins {
		spec := suanli.InstanceSpec{ID: in.ID, Desired: specDesired(in, m, draining, cpuDraining), Image: in.Image, Cmd: in.Cmd, Env: in.Env,
			DiskGB: in.DiskGB, Ports: in.Ports, Volumes: in.Volumes, GPUIndexes: in.GPUIndexes, Simulated: in.Simulated, CPUCores: in.CPUCores,
			RAMMB: int64(in.RAMGB * 1024), StopGrace: time.Duration(m.Listing.PreemptGraceS) * time.Second}
		if spec.Desired != suanli.DesiredDestroyed {
			spec.Token = auth.InstanceToken(s.tokenKey, in.ID, auth.InstanceTokenExpiry(s.now()))
		}
		sec, err := s.openSecrets(in)
		if err != nil {
			// The workload would run without its secrets: keep it (and its
			// disk), stopped, rather than run it wrong or remove it.
			s.Logger.Error("open instance secrets", "instance_id", in.ID, "err", err)
			spec.Desired = suanli.DesiredStopped
		}
		if in.Restarts+in.Moves > 0 || sec != nil {
			env := make(map[string]string, len(in.Env)+2)
			for k, v := range in.Env {
				env[k] = v
			}
			if in.Restarts+in.Moves > 0 {
				env["SUANLI_ATTEMPT"] = fmt.Sprint(in.Restarts + in.Moves + 1)
				if in.Moves > 0 {
					env["SUANLI_RECOVERED"] = "1" // relaunched elsewhere: resume from your own checkpoint
				}
			}
			if sec != nil {
				for k, v := range sec.Env {
					env[k] = v
				}
				spec.RegistryAuth = sec.RegistryAuth
			}
			spec.Env = env
		}
		for _, idx := range in.GPUIndexes {
			for _, g := range m.Hardware.GPUs {
				if g.Index == idx {
					spec.GPUUUIDs = append(spec.GPUUUIDs, g.UUID)
				}
			}
		}
		resp.Instances = append(resp.Instances, spec)
	}
	if err := s.addDiskKeys(ctx, m, resp); err != nil {
		return nil, err
	}
	return resp, nil
}
