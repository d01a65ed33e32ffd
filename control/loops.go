package control

import (
	"context"
	"fmt"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// Run runs the control plane's loops until ctx ends: settling meters into
// the ledger (and ending reservations that ran out), host leases, sampling
// the market for price history, and the audit log's checkpoints and
// retention.
func (s *Service) Run(ctx context.Context) error {
	auditDone := make(chan struct{})
	go func() {
		defer close(auditDone)
		s.Audit.Run(ctx)
	}()
	defer func() { <-auditDone }()
	settle := time.NewTicker(s.cfg.SettleInterval)
	defer settle.Stop()
	sample := time.NewTicker(s.cfg.MarketSampleInterval)
	defer sample.Stop()
	if err := s.SampleMarket(ctx); err != nil { // the price history starts now, not an interval later
		s.Logger.Error("sample market", "err", err)
	}
	lease := time.NewTicker(max(time.Second, s.cfg.HeartbeatInterval/2))
	defer lease.Stop()
	forward := time.NewTicker(time.Second) // bookings start within a second of their start
	defer forward.Stop()
	for {
		select {
		case <-forward.C:
			if err := s.RunBookings(ctx); err != nil {
				s.Logger.Error("run bookings", "err", err)
			}
		case <-ctx.Done():
			// Settle once more so a clean shutdown leaves nothing accrued unposted.
			if _, err := s.Store.Settle(context.WithoutCancel(ctx), s.now()); err != nil {
				s.Logger.Error("settle at shutdown", "err", err)
			}
			return nil
		case <-settle.C:
			if err := s.EndReservations(ctx); err != nil {
				s.Logger.Error("end reservations", "err", err)
			}
			if _, err := s.Store.Settle(ctx, s.now()); err != nil {
				s.Logger.Error("settle", "err", err)
			}
		case <-sample.C:
			if err := s.SampleMarket(ctx); err != nil {
				s.Logger.Error("sample market", "err", err)
			}
		case <-lease.C:
			if err := s.CheckLeases(ctx); err != nil {
				s.Logger.Error("check leases", "err", err)
			}
			if err := s.CheckGuards(ctx); err != nil {
				s.Logger.Error("check guards", "err", err)
			}
			if err := s.RunSchedules(ctx); err != nil {
				s.Logger.Error("book scheduled runs", "err", err)
			}
			if err := s.CheckRecoveries(ctx); err != nil {
				s.Logger.Error("check recoveries", "err", err)
			}
			if err := s.CheckBudgets(ctx); err != nil {
				s.Logger.Error("check budgets", "err", err)
			}
			if _, err := s.Store.PurgeIdempotent(ctx, s.now().Add(-48*time.Hour)); err != nil {
				s.Logger.Error("purge idempotency keys", "err", err)
			}
		}
	}
}

// CheckLeases moves machines that missed heartbeats to suspect, then to
// offline, and marks their instances lost with billing ended at the last
// heartbeat. After a control-plane restart nothing is declared lost within
// the failover grace.
func (s *Service) CheckLeases(ctx context.Context) error {
	now := s.now()
	ms, _, err := s.Store.FindMachines(ctx, suanli.MachineFilter{})
	if err != nil {
		return err
	}
	// Reliability: count the time since the last check as observed, and as
	// online for machines that are online now.
	if !s.lastObserve.IsZero() && now.After(s.lastObserve) {
		online := map[int64]bool{}
		for _, m := range ms {
			online[m.ID] = m.Status == suanli.MachineOnline && now.Sub(m.LastHeartbeat) <= s.cfg.SuspectAfter
		}
		changed, err := s.Store.ObserveHosts(ctx, online, now.Sub(s.lastObserve))
		if err != nil {
			return err
		}
		for _, id := range changed {
			if err := s.refreshOffer(ctx, id); err != nil {
				return err
			}
		}
	}
	s.lastObserve = now
	for _, m := range ms {
		silent := now.Sub(m.LastHeartbeat)
		next := m.Status
		switch {
		case silent > s.cfg.LostAfter && now.Sub(s.started) > s.cfg.FailoverGrace:
			next = suanli.MachineOffline
		case silent > s.cfg.SuspectAfter:
			if m.Status == suanli.MachineOnline {
				next = suanli.MachineSuspect
			}
		}
		if next == m.Status {
			continue
		}
		if err := s.Store.SetMachineStatus(ctx, m.ID, next); err != nil {
			return err
		}
		s.Logger.Warn("machine lease", "machine_id", m.ID, "status", next, "silent_s", int(silent.Seconds()))
		if next == suanli.MachineOffline {
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

func (s *Service) loseInstances(ctx context.Context, m *suanli.Machine) error {
	live := true
	ins, _, err := s.Store.FindInstances(ctx, suanli.InstanceFilter{MachineID: &m.ID, Live: &live, Limit: 100000}, s.now())
	if err != nil {
		return err
	}
	for _, in := range ins {
		if !in.HoldsGPUs() {
			continue
		}
		_, err := s.Store.UpdateInstance(ctx, in.ID, m.LastHeartbeat, s.now(), func(i *suanli.Instance) error {
			i.Status, i.StatusMessage = suanli.StatusLost, "host stopped answering at "+m.LastHeartbeat.Format(time.RFC3339)+"; billing ended then"
			return nil
		})
		if err != nil {
			return err
		}
		s.RecordAudit(ctx, suanli.AuditEvent{AccountID: in.AccountID, Action: "instance.lost", Target: fmt.Sprintf("instance %d", in.ID),
			Result: "ok", Detail: fmt.Sprintf("machine %d stopped answering; billing ended at %s", m.ID, m.LastHeartbeat.Format(time.RFC3339))})
		if err := s.Store.CountHostEvent(ctx, m.ID, sqlstore.HostLost); err != nil {
			return err
		}
	}
	return nil
}
