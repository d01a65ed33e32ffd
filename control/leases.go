package control

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/suanli/suanli"
)

// leaseView is the lease checker's memory of every machine: its status as
// last read or set, and the machine's last heartbeat at that moment. Only
// a sync (a heartbeat) brings a machine back online, so the status holds
// as long as the machine has not beaten since; the checker reads a machine
// again only when it has, or when its status must change. Every
// LeaseRescanInterval it reads them all again (machines joined meanwhile,
// changes through other replicas) and writes the reliability time it
// counted. Guarded by mu; CheckLeases holds it throughout.
type leaseView struct {
	mu      sync.Mutex
	byID    map[int64]*leaseState
	down    map[int64]bool // machines whose status is not online
	scanned time.Time      // the last full read; zero: none yet
	// Reliability time counted since the last ObserveHosts: in all, and
	// for each machine the part it was not online.
	observed time.Duration
	offline  map[int64]time.Duration

	omu    sync.Mutex          // guards synced: syncs do not wait for a lease check
	synced map[int64]time.Time // machines a sync brought online, and when
}

type leaseState struct {
	status string
	beat   time.Time // the machine's last heartbeat when status was read or set
}

// set records a machine's status and last heartbeat.
func (v *leaseView) setLocked(id int64, status string, beat time.Time) {
	if v.byID == nil {
		return // no view yet: the first check reads everything
	}
	v.byID[id] = &leaseState{status: status, beat: beat}
	if status == suanli.MachineOnline {
		delete(v.down, id)
	} else {
		v.down[id] = true
	}
}

// reset forgets everything: the next check reads every machine (a replica
// that just took the lease over; another ran the checks meanwhile).
func (v *leaseView) reset() {
	v.mu.Lock()
	v.byID, v.down, v.observed, v.offline = nil, nil, 0, nil
	v.mu.Unlock()
}

// online records that a sync brought machine id online at at; the next
// lease check takes it in.
func (v *leaseView) online(id int64, at time.Time) {
	v.omu.Lock()
	if v.synced == nil {
		v.synced = map[int64]time.Time{}
	}
	v.synced[id] = at
	v.omu.Unlock()
}

// takeSyncedLocked folds in the machines syncs brought online.
func (v *leaseView) takeSyncedLocked() {
	v.omu.Lock()
	synced := v.synced
	v.synced = nil
	v.omu.Unlock()
	for id, at := range synced {
		if st := v.byID[id]; st != nil && at.After(st.beat) {
			v.setLocked(id, suanli.MachineOnline, at)
		}
	}
}

// leaseStatus is the status a machine last heard at beat should have:
// past lost_after (and the failover grace after a start) offline; past
// suspect_after, suspect when it was online; else unchanged (only a sync
// brings it back online). Silence is counted from the control plane's
// start at the earliest: a machine is not blamed for the time it could not
// reach us, so a restart does not mark every host suspect at once.
func (s *Service) leaseStatus(status string, beat, now time.Time) string {
	silent := now.Sub(beat)
	if s.started.After(beat) && !now.Before(s.started) {
		silent = now.Sub(s.started)
	}
	switch {
	case silent > s.cfg.LostAfter && now.Sub(s.started) > s.cfg.FailoverGrace:
		return suanli.MachineOffline
	case silent > s.cfg.SuspectAfter && status == suanli.MachineOnline:
		return suanli.MachineSuspect
	}
	return status
}

// CheckLeases moves machines that missed heartbeats to suspect, then to
// offline, and marks their instances lost with billing ended at the last
// heartbeat. After a control-plane restart nothing is declared lost within
// the failover grace.
//
// It reads the persisted heartbeats (this replica's are flushed first), so
// it sees every replica's agents, each at most a flush interval late. At
// scale it stays cheap: between full reads (LeaseRescanInterval) it asks
// the store only for machines silent past suspect_after (one scan of the
// narrow heartbeat table that returns only them) and reads a machine's row
// only when its status must change or it beat since the view last read it.
func (s *Service) CheckLeases(ctx context.Context) error {
	now := s.now()
	if err := s.flushStale(ctx); err != nil {
		s.Logger.Error("flush heartbeats before the lease check", "err", err)
	}
	v := &s.leases
	v.mu.Lock()
	defer v.mu.Unlock()
	v.takeSyncedLocked()
	var cands []suanli.MachineBeat
	full := v.byID == nil || now.Sub(v.scanned) >= s.cfg.LeaseRescanInterval || now.Before(v.scanned)
	if full {
		ls, err := s.Store.MachineLeases(ctx)
		if err != nil {
			return err
		}
		v.byID, v.down = make(map[int64]*leaseState, len(ls)), map[int64]bool{}
		for _, l := range ls {
			v.setLocked(l.ID, l.Status, l.LastHeartbeat)
			if now.Sub(l.LastHeartbeat) > s.cfg.SuspectAfter {
				cands = append(cands, suanli.MachineBeat{MachineID: l.ID, At: l.LastHeartbeat})
			}
		}
		v.scanned = now
	} else {
		var err error
		if cands, err = s.Store.SilentMachines(ctx, now.Add(-s.cfg.SuspectAfter).UnixMicro()); err != nil {
			return err
		}
	}
	silent := make(map[int64]bool, len(cands))
	var check []int64
	for _, c := range cands {
		beat := c.At
		if t, ok := s.Beats.LastBeat(c.MachineID); ok && t.After(beat) {
			beat = t // heard here, not yet flushed (a failed flush)
		}
		if now.Sub(beat) <= s.cfg.SuspectAfter {
			continue
		}
		silent[c.MachineID] = true
		if st := v.byID[c.MachineID]; st != nil && !beat.After(st.beat) && s.leaseStatus(st.status, beat, now) == st.status {
			continue // nothing to do, and nothing changed since the view read it
		}
		check = append(check, c.MachineID)
	}
	if err := s.checkLeases(ctx, check, now); err != nil {
		return err
	}
	// Reliability: the time since the last check counts as observed, and as
	// online for machines that are online and not silent now. It is written
	// at each full read.
	if !s.lastObserve.IsZero() && now.After(s.lastObserve) {
		d := now.Sub(s.lastObserve)
		if v.offline == nil {
			v.offline = map[int64]time.Duration{}
		}
		v.observed += d
		for id := range v.down {
			v.offline[id] += d
		}
		for id := range silent {
			if !v.down[id] {
				v.offline[id] += d
			}
		}
	}
	s.lastObserve = now
	if full && v.observed > 0 {
		changed, err := s.Store.ObserveHosts(ctx, v.offline, v.observed)
		if err != nil {
			return err
		}
		v.observed, v.offline = 0, nil
		for _, id := range changed {
			if err := s.refreshOffer(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkLeases reads the machines in ids and moves each to the status its
// silence calls for, losing the instances of those that go offline. The
// status changes are written in one transaction per status, so that many
// hosts gone at once (a rack, a network) are marked together.
func (s *Service) checkLeases(ctx context.Context, ids []int64, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	v := &s.leases
	ls, err := s.Store.MachineLeasesByID(ctx, ids)
	if err != nil {
		return err
	}
	type change struct {
		l    suanli.MachineLease
		next string
	}
	var changes []change
	byStatus := map[string][]int64{}
	found := map[int64]bool{}
	for _, l := range ls {
		found[l.ID] = true
		if t, ok := s.Beats.LastBeat(l.ID); ok && t.After(l.LastHeartbeat) {
			l.LastHeartbeat = t
		}
		v.setLocked(l.ID, l.Status, l.LastHeartbeat)
		if next := s.leaseStatus(l.Status, l.LastHeartbeat, now); next != l.Status {
			changes = append(changes, change{l, next})
			byStatus[next] = append(byStatus[next], l.ID)
		}
	}
	for _, id := range ids {
		if !found[id] { // gone
			delete(v.byID, id)
			delete(v.down, id)
		}
	}
	for _, st := range []string{suanli.MachineSuspect, suanli.MachineOffline} {
		if err := s.Store.SetMachinesStatus(ctx, byStatus[st], st); err != nil {
			return err
		}
	}
	for _, c := range changes {
		m := &suanli.Machine{ID: c.l.ID, OwnerID: c.l.OwnerID, Status: c.next, LastHeartbeat: c.l.LastHeartbeat}
		silent := now.Sub(m.LastHeartbeat)
		v.setLocked(m.ID, c.next, m.LastHeartbeat)
		// An agent that only beats over the light channel learns at its
		// next beat (or at once, poked) that it must sync, which brings it
		// back.
		s.Beats.Wake(m.ID)
		s.Logger.Warn("machine lease", "machine_id", m.ID, "status", c.next, "silent_s", int(silent.Seconds()))
		if c.next == suanli.MachineOffline {
			s.RecordAudit(ctx, suanli.AuditEvent{AccountID: m.OwnerID, Action: "machine.lease_lost", Target: fmt.Sprintf("machine %d", m.ID),
				Result: "ok", Detail: fmt.Sprintf("silent for %ds after its last heartbeat at %s", int(silent.Seconds()), m.LastHeartbeat.Format(time.RFC3339))})
			if err := s.loseInstances(ctx, m); err != nil {
				return err
			}
		}
		if err := s.refreshOffer(ctx, m.ID); err != nil {
			return err
		}
	}
	return nil
}
