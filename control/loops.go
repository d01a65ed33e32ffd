package control

import (
	"context"
	"fmt"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// Run runs the control plane's loops until ctx ends. On every replica it
// reads the change feed, keeping the offer index fresh with what other
// replicas change (follow). The singleton loops run only on the replica
// that holds the singleton lease (lead), which moves to another replica
// within Config.LeaseTTL when its holder dies; one server alone takes it at
// once.
func (s *Service) Run(ctx context.Context) error {
	followDone := make(chan struct{})
	go func() {
		defer close(followDone)
		s.follow(ctx)
	}()
	defer func() { <-followDone }()
	s.lead(ctx)
	return nil
}

// runSingletons runs the loops only one replica may run, under lease l,
// until ctx ends: the periodic close that settles running meters into the
// ledger (at multiples of SettleInterval, so hourly closes fall on the
// hour), host leases and reservations that ran out, bookings and scheduled
// runs, guards, budgets, sampling the market for price history, pruning the
// change feed, and the audit log's checkpoints and retention. It first
// loads the meters the close keeps in memory, and makes the close its
// predecessor may have missed. Every close is fenced by l: it commits only
// while l is current. When ctx ends because this replica shuts down (not
// because the lease was lost) it closes once more.
func (s *Service) runSingletons(ctx context.Context, l sqlstore.Lease) {
	fence := l.Fence()
	auditDone := make(chan struct{})
	go func() {
		defer close(auditDone)
		s.Audit.Run(ctx)
	}()
	defer func() { <-auditDone }()
	s.lastObserve = time.Time{} // reliability counts from this replica's first check
	s.leases.reset()            // and the lease checker reads every machine afresh
	start := time.Now()
	if n, err := s.Store.WarmBook(ctx); err != nil {
		s.Logger.Error("load billing book", "err", err) // the first close rebuilds it
	} else {
		s.Logger.Info("billing book loaded", "meters", n, "ms", time.Since(start).Milliseconds())
	}
	every := s.cfg.SettleInterval
	nextClose := func() time.Time { return s.now().Truncate(every).Add(every) }
	// The last boundary may have passed without its close (the previous
	// holder died before it): close up to it now. A close that was made
	// makes this one do nothing.
	s.closeBooks(ctx, s.now().Truncate(every), fence)
	due := nextClose()
	settle := time.NewTimer(due.Sub(s.now()))
	defer settle.Stop()
	sample := time.NewTicker(s.cfg.MarketSampleInterval)
	defer sample.Stop()
	if err := s.SampleMarket(ctx); err != nil && ctx.Err() == nil { // the price history starts now, not an interval later
		s.Logger.Error("sample market", "err", err)
	}
	lease := time.NewTicker(max(time.Second, s.cfg.HeartbeatInterval/2))
	defer lease.Stop()
	forward := time.NewTicker(time.Second) // bookings start within a second of their start
	defer forward.Stop()
	for {
		select {
		case <-forward.C:
			if err := s.RunBookings(ctx); err != nil && ctx.Err() == nil {
				s.Logger.Error("run bookings", "err", err)
			}
		case <-ctx.Done():
			if context.Cause(ctx) == errLeaseLost {
				return // another replica closes from here
			}
			// Close once more so a clean shutdown leaves nothing accrued unposted.
			if _, err := s.Store.CloseBooksFenced(context.WithoutCancel(ctx), s.now(), fence); err != nil {
				s.Logger.Error("close at shutdown", "err", err)
			}
			return
		case <-settle.C:
			at := due
			if now := s.now(); now.Before(at) {
				at = now
			}
			s.closeBooks(ctx, at, fence)
			due = nextClose()
			settle.Reset(due.Sub(s.now()))
		case <-sample.C:
			if err := s.SampleMarket(ctx); err != nil && ctx.Err() == nil {
				s.Logger.Error("sample market", "err", err)
			}
		case <-lease.C:
			s.periodic(ctx)
		}
	}
}

// periodic runs the singleton checks made every half heartbeat interval.
func (s *Service) periodic(ctx context.Context) {
	for _, step := range []struct {
		what string
		run  func(context.Context) error
	}{
		{"check leases", s.CheckLeases},
		// Reservations end on this tick, not at the hour close: an ended
		// one is billed on demand from its end either way, but its state
		// should not wait an hour.
		{"end reservations", s.EndReservations},
		{"check guards", s.CheckGuards},
		{"book scheduled runs", s.RunSchedules},
		{"check recoveries", s.CheckRecoveries},
		{"check budgets", s.CheckBudgets},
		{"purge idempotency keys", func(ctx context.Context) error {
			_, err := s.Store.PurgeIdempotent(ctx, s.now().Add(-48*time.Hour))
			return err
		}},
		{"prune change feed", func(ctx context.Context) error {
			_, err := s.Store.PruneChanges(ctx, time.Now().Add(-changesKept))
			return err
		}},
		{"prune agent tasks", func(ctx context.Context) error {
			_, err := s.Store.PruneAgentTasks(ctx, time.Now().Add(-taskKept))
			return err
		}},
	} {
		if ctx.Err() != nil {
			return
		}
		if err := step.run(ctx); err != nil && ctx.Err() == nil {
			s.Logger.Error(step.what, "err", err)
		}
	}
}

// closeBooks settles every running meter up to at, under fence, and logs
// the close.
func (s *Service) closeBooks(ctx context.Context, at time.Time, fence *sqlstore.Fence) {
	start := time.Now()
	c, err := s.Store.CloseBooksFenced(ctx, at, fence)
	if err != nil {
		if ctx.Err() == nil {
			s.Logger.Error("close", "err", err)
		}
		return
	}
	if c.ID == 0 {
		return
	}
	s.Logger.Info("close", "close_id", c.ID, "term", fence.Term, "through", at, "meters", c.Meters, "lines", c.Lines, "postings", c.Written,
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
