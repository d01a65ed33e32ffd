package control

import (
	"context"
	"fmt"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// Run runs the control plane's loops until ctx ends: the periodic close
// that settles running meters into the ledger (at multiples of
// SettleInterval, so hourly closes fall on the hour), host leases and
// reservations that ran out, sampling the market for price history, and the
// audit log's checkpoints and retention. It first loads the meters the
// close keeps in memory.
func (s *Service) Run(ctx context.Context) error {
	auditDone := make(chan struct{})
	go func() {
		defer close(auditDone)
		s.Audit.Run(ctx)
	}()
	defer func() { <-auditDone }()
	start := time.Now()
	if n, err := s.Store.WarmBook(ctx); err != nil {
		s.Logger.Error("load billing book", "err", err) // the first close rebuilds it
	} else {
		s.Logger.Info("billing book loaded", "meters", n, "ms", time.Since(start).Milliseconds())
	}
	every := s.cfg.SettleInterval
	nextClose := func() time.Time { return s.now().Truncate(every).Add(every) }
	due := nextClose()
	settle := time.NewTimer(due.Sub(s.now()))
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
			// Close once more so a clean shutdown leaves nothing accrued unposted.
			if _, err := s.Store.Settle(context.WithoutCancel(ctx), s.now()); err != nil {
				s.Logger.Error("close at shutdown", "err", err)
			}
			return nil
		case <-settle.C:
			at := due
			if now := s.now(); now.Before(at) {
				at = now
			}
			s.closeBooks(ctx, at)
			due = nextClose()
			settle.Reset(due.Sub(s.now()))
		case <-sample.C:
			if err := s.SampleMarket(ctx); err != nil {
				s.Logger.Error("sample market", "err", err)
			}
		case <-lease.C:
			if err := s.CheckLeases(ctx); err != nil {
				s.Logger.Error("check leases", "err", err)
			}
			// Reservations end on this tick, not at the hour close: an ended
			// one is billed on demand from its end either way, but its state
			// should not wait an hour.
			if err := s.EndReservations(ctx); err != nil {
				s.Logger.Error("end reservations", "err", err)
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

// closeBooks settles every running meter up to at and logs the close.
func (s *Service) closeBooks(ctx context.Context, at time.Time) {
	start := time.Now()
	c, err := s.Store.CloseBooks(ctx, at)
	if err != nil {
		s.Logger.Error("close", "err", err)
		return
	}
	if c.ID == 0 {
		return
	}
	s.Logger.Info("close", "close_id", c.ID, "through", at, "meters", c.Meters, "lines", c.Lines, "postings", c.Written,
		"amount", c.Amount.String(), "rebuilt", c.Rebuilt, "ms", time.Since(start).Milliseconds())
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
