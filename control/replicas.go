package control

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// SingletonLease is the lease whose holder runs the singleton loops (the
// hour close, host leases, reservations, bookings, schedules, budgets,
// guards, market samples, audit checkpoints). Every other part of the
// control plane runs on every replica.
const SingletonLease = "singleton"

// Why the singleton loops stop.
var (
	errShutdown  = errors.New("shutting down")
	errLeaseLost = errors.New("lease lost")
)

// leaseTimes derives the lease's timing from the TTL: the lease is written
// to last hold (so that a follower, which tries to take it the moment it
// expires, takes over within the TTL of the holder's death), renewed every
// ttl/3, and given up by its holder at hold − ttl/10 after its last
// renewal when renewals keep failing (a margin for clocks that disagree).
func leaseTimes(ttl time.Duration) (hold, renew, giveUp time.Duration) {
	hold = ttl - ttl/10
	return hold, ttl / 3, hold - ttl/10
}

// clusterState is what this replica knows of the lease and the change
// feed, for ClusterStatus and metrics.
type clusterState struct {
	mu        sync.Mutex
	lease     sqlstore.Lease // the lease as last seen (ours while leading)
	leading   bool
	since     time.Time // leading since
	takeovers int64     // times this replica took the lease
	feedSeq   int64     // the newest change applied
	feedLag   time.Duration
	feedSeen  int64 // changes read
	holes     int
	lastPoll  time.Time
}

// ClusterStatus is one replica's view of the replicas sharing its
// database: who runs the singleton loops, and how fresh its change feed is.
type ClusterStatus struct {
	Replica string `json:"replica"` // this replica (its store's origin)
	Leader  bool   `json:"leader"`  // this replica runs the singleton loops
	// LeaderSince is when this replica took the lease (leaders only).
	LeaderSince *time.Time   `json:"leader_since,omitempty"`
	Lease       LeaseStatus  `json:"lease"`
	Feed        FeedStatus   `json:"change_feed"`
	Closes      []CloseState `json:"closes,omitempty"` // the latest hour closes, newest last
}

// LeaseStatus is the singleton lease as stored.
type LeaseStatus struct {
	Name       string    `json:"name"`
	Holder     string    `json:"holder"`
	Term       int64     `json:"term"`
	ExpiresAt  time.Time `json:"expires_at"`
	AcquiredAt time.Time `json:"acquired_at"`
	TTL        float64   `json:"ttl_s"`
	Takeovers  int64     `json:"takeovers"` // by this replica since it started
}

// FeedStatus is the state of this replica's change feed reader.
type FeedStatus struct {
	Seq      int64     `json:"seq"`       // the newest change read
	LagMS    float64   `json:"lag_ms"`    // from the newest change's commit to its reading
	Seen     int64     `json:"seen"`      // changes read since start
	Holes    int       `json:"holes"`     // skipped sequence numbers still awaited
	LastPoll time.Time `json:"last_poll"` // the last successful poll
}

// CloseState is one hour close, with the lease term that made it.
type CloseState struct {
	ID      int64        `json:"id"`
	Through time.Time    `json:"through"`
	Term    int64        `json:"term"`
	Meters  int          `json:"meters"`
	Amount  suanli.Money `json:"amount"`
}

// Cluster returns this replica's view of the cluster (operators only).
func (s *Service) Cluster(ctx context.Context) (*ClusterStatus, error) {
	if _, err := operator(ctx, "see the cluster"); err != nil {
		return nil, err
	}
	l, err := s.Store.FindLease(ctx, SingletonLease)
	if err != nil {
		return nil, err
	}
	cs, err := s.Store.FindCloses(ctx)
	if err != nil {
		return nil, err
	}
	st := s.ClusterState()
	st.Lease = LeaseStatus{Name: l.Name, Holder: l.Holder, Term: l.Term, ExpiresAt: l.ExpiresAt, AcquiredAt: l.AcquiredAt,
		TTL: s.cfg.LeaseTTL.Seconds(), Takeovers: st.Lease.Takeovers}
	for _, c := range cs[max(0, len(cs)-24):] {
		st.Closes = append(st.Closes, CloseState{ID: c.ID, Through: c.Through, Term: c.Term, Meters: c.Meters, Amount: c.Amount})
	}
	return &st, nil
}

// ClusterState is what this replica knows without asking the store (for
// metrics): whether it leads, the lease as it last saw it, its feed.
func (s *Service) ClusterState() ClusterStatus {
	c := &s.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	st := ClusterStatus{Replica: s.Store.Origin(), Leader: c.leading,
		Lease: LeaseStatus{Name: SingletonLease, Holder: c.lease.Holder, Term: c.lease.Term, ExpiresAt: c.lease.ExpiresAt,
			AcquiredAt: c.lease.AcquiredAt, TTL: s.cfg.LeaseTTL.Seconds(), Takeovers: c.takeovers},
		Feed: FeedStatus{Seq: c.feedSeq, LagMS: float64(c.feedLag.Microseconds()) / 1000, Seen: c.feedSeen, Holes: c.holes, LastPoll: c.lastPoll}}
	if c.leading {
		t := c.since
		st.LeaderSince = &t
	}
	return st
}

func (s *Service) seeLease(l sqlstore.Lease, leading bool) {
	c := &s.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	if leading && !c.leading {
		c.since = time.Now()
		c.takeovers++
	}
	c.lease, c.leading = l, leading
}

// lead runs the singleton loops whenever this replica holds the singleton
// lease, until ctx ends: it tries to take the lease when it is free (at
// once when the change feed says it was released, else when it expires),
// renews it while it runs them, and stops them as soon as it is lost.
func (s *Service) lead(ctx context.Context) {
	hold, renew, _ := leaseTimes(s.cfg.LeaseTTL)
	reclaim := s.cfg.ReclaimLease
	me := s.Store.Origin()
	for {
		start := time.Now()
		// Read first: only a free lease is worth a writing transaction.
		l, err := s.Store.FindLease(ctx, SingletonLease)
		ok := false
		if err == nil && (!l.HeldAt(start) || l.Holder == me || (reclaim != "" && l.Holder == reclaim)) {
			l, ok, err = s.Store.AcquireLease(ctx, SingletonLease, me, start, hold, reclaim)
		}
		wait := renew
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.Logger.Error("acquire lease", "err", err)
		case ok:
			reclaim = ""
			s.holdLease(ctx, l, start)
			if ctx.Err() != nil {
				return
			}
			continue // lost it: see who has it now
		default:
			s.seeLease(l, false)
			// Try again the moment it expires (or sooner, to notice a holder
			// that changed), or when the feed says it was released.
			if d := l.ExpiresAt.Sub(time.Now()) + time.Millisecond; d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-s.leaseWake:
			t.Stop()
		}
	}
}

// holdLease runs the singleton loops under l, renewing it, until ctx ends
// (then it stops them, lets them close the books, and releases the lease)
// or the lease is lost (then it stops them at once: another replica runs
// them now). Renewals run beside the loop, so that a renewal stuck on the
// database cannot hold the loops past the point where they must stop.
func (s *Service) holdLease(ctx context.Context, l sqlstore.Lease, renewed time.Time) {
	hold, renew, giveUp := leaseTimes(s.cfg.LeaseTTL)
	s.seeLease(l, true)
	s.Logger.Info("lease taken: running the singleton loops", "lease", l.Name, "term", l.Term, "replica", l.Holder)
	lctx, stop := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.runSingletons(lctx, l)
	}()
	tick := time.NewTicker(renew)
	defer tick.Stop()
	deadline := time.NewTimer(time.Until(renewed.Add(giveUp)))
	defer deadline.Stop()
	type renewal struct {
		l     sqlstore.Lease
		start time.Time
		err   error
	}
	renewals := make(chan renewal, 1) // at most one in flight
	inFlight := false
	lose := func(why string, err error) {
		stop(errLeaseLost)
		s.seeLease(l, false) // stopping now; the loops end at their next step
		s.Logger.Warn("lease lost: singleton loops stopped", "lease", l.Name, "term", l.Term, "why", why, "err", err)
		<-done
	}
	for {
		select {
		case <-ctx.Done():
			stop(errShutdown)
			<-done
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := s.Store.ReleaseLease(rctx, l); err != nil {
				s.Logger.Error("release lease", "err", err)
			}
			cancel()
			s.seeLease(l, false)
			return
		case <-done:
			lose("the singleton loops ended", nil) // not expected: give the lease a chance to move
			return
		case <-deadline.C:
			lose("no renewal within the lease", nil)
			return
		case <-tick.C:
			if inFlight {
				continue
			}
			inFlight = true
			start, cur := time.Now(), l
			go func() {
				rctx, cancel := context.WithDeadline(lctx, start.Add(giveUp))
				defer cancel()
				nl, err := s.Store.RenewLease(rctx, cur, start, hold)
				renewals <- renewal{nl, start, err}
			}()
		case r := <-renewals:
			inFlight = false
			if suanli.ErrorCode(r.err) == suanli.ECONFLICT {
				lose("another replica holds it", r.err)
				return
			} else if r.err != nil {
				s.Logger.Error("renew lease", "term", l.Term, "err", r.err) // again at the next tick, until the deadline
				continue
			}
			l = r.l
			s.seeLease(l, true)
			deadline.Reset(time.Until(r.start.Add(giveUp)))
		}
	}
}

// follow reads the change feed until ctx ends: every FeedInterval it reads
// the changes other replicas committed and reloads the offers of the
// machines they name, wakes those machines' agents waiting here, hands over
// agent tasks and their results, drops the API keys it verified recently
// when one was revoked, and wakes the lease loop when the lease moved. Off the lease, it also applies the
// idle guard to the instances whose telemetry arrives here.
func (s *Service) follow(ctx context.Context) {
	t := time.NewTicker(s.cfg.FeedInterval)
	defer t.Stop()
	idle := time.NewTicker(max(time.Second, s.cfg.HeartbeatInterval/2))
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.pollChanges(ctx); err != nil && ctx.Err() == nil {
				s.Logger.Error("read change feed", "err", err)
			}
		case <-idle.C:
			if s.ClusterState().Leader {
				continue // CheckGuards does it
			}
			if err := s.checkIdle(ctx); err != nil && ctx.Err() == nil {
				s.Logger.Error("check idle instances", "err", err)
			}
		}
	}
}

// feed is the change feed reader's position. Sequence numbers are handed
// out when a change is written but become visible when its transaction
// commits, which on PostgreSQL can be after a higher one commits: a
// number skipped over is a hole, read again on every poll until it shows
// up or holeWait passes (its transaction rolled back, or is far older than
// any write here takes). SQLite commits in sequence order.
type feed struct {
	mu    sync.Mutex // one poll at a time
	last  int64
	holes map[int64]time.Time // skipped numbers, since when
}

const (
	holeWait  = 10 * time.Second
	maxHoles  = 1000
	feedBatch = 1000
	// changesKept is how long changes stay on the feed; a replica that
	// could not read it for longer reloads everything.
	changesKept = 10 * time.Minute
)

// startFeed positions the reader at the newest change, before the index
// is loaded: changes committed meanwhile are read again. Numbers missing
// just below it may belong to transactions still open: they are holes.
func (s *Service) startFeed(ctx context.Context) error {
	f := &s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	last, err := s.Store.LastChange(ctx)
	if err != nil {
		return err
	}
	recent, err := s.Store.Changes(ctx, max(0, last-64), nil, 64)
	if err != nil {
		return err
	}
	f.last, f.holes = last, map[int64]time.Time{}
	now := time.Now()
	for q := max(1, last-63); q <= last; q++ {
		if !slices.ContainsFunc(recent, func(c sqlstore.Change) bool { return c.Seq == q }) {
			f.holes[q] = now
		}
	}
	c := &s.cluster
	c.mu.Lock()
	c.feedSeq, c.lastPoll = last, now
	c.mu.Unlock()
	return nil
}

// pollChanges reads and applies the changes committed since the last poll.
func (s *Service) pollChanges(ctx context.Context) error {
	f := &s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holes == nil {
		f.holes = map[int64]time.Time{}
	}
	c := &s.cluster
	c.mu.Lock()
	stale := !c.lastPoll.IsZero() && time.Since(c.lastPoll) > changesKept/2
	c.mu.Unlock()
	if stale {
		// Changes this replica never read may have been pruned: reload all.
		if err := s.rebuildIndex(ctx); err != nil {
			return err
		}
	}
	for {
		also := make([]int64, 0, len(f.holes))
		for q := range f.holes {
			also = append(also, q)
		}
		slices.Sort(also)
		cs, err := s.Store.Changes(ctx, f.last, also, feedBatch)
		if err != nil {
			return err
		}
		now := time.Now()
		machines := map[int64]bool{}                         // offers to reload, agents to wake
		tasks, results := map[int64]bool{}, map[int64]bool{} // agent task relay
		all, lease := false, false
		var lag time.Duration
		for _, ch := range cs {
			if ch.Seq > f.last {
				for q := f.last + 1; q < ch.Seq && len(f.holes) < maxHoles; q++ {
					f.holes[q] = now
				}
				f.last = ch.Seq
			} else {
				delete(f.holes, ch.Seq)
			}
			lag = now.Sub(ch.At)
			if ch.Origin == s.Store.Origin() {
				continue // this replica applied it when it made it
			}
			switch {
			case ch.Kind == sqlstore.ChangeLease:
				lease = true
			case ch.Kind == sqlstore.ChangeKeys:
				s.keys.clear() // a key revoked elsewhere stops working here now

			case ch.Kind == sqlstore.ChangeAll:
				all = true
			case ch.Kind == sqlstore.ChangeTask:
				tasks[ch.MachineID] = true
			case ch.Kind == sqlstore.ChangeTaskResult:
				results[ch.MachineID] = true
			case ch.MachineID != 0:
				machines[ch.MachineID] = true
			}
		}
		for q, since := range f.holes {
			if now.Sub(since) > holeWait {
				delete(f.holes, q)
			}
		}
		if all {
			if err := s.rebuildIndex(ctx); err != nil {
				return err
			}
		}
		for id := range machines {
			if !all {
				if err := s.refreshOffer(ctx, id); err != nil {
					return err
				}
			}
			s.hub.wake(id)
		}
		for id := range tasks {
			ts, err := s.Store.PendingAgentTasks(ctx, id, now.Add(-taskKept))
			if err != nil {
				return err
			}
			s.tasks.setRemote(id, ts)
			s.hub.wake(id)
		}
		for id := range results {
			if ids := s.tasks.waiting(id); len(ids) > 0 {
				rs, err := s.Store.TaskResults(ctx, ids)
				if err != nil {
					return err
				}
				for _, r := range rs {
					s.tasks.deliver(id, []suanli.TaskResult{r})
				}
			}
		}
		if lease {
			select {
			case s.leaseWake <- struct{}{}:
			default:
			}
		}
		c.mu.Lock()
		c.feedSeq, c.holes, c.lastPoll = f.last, len(f.holes), now
		c.feedSeen += int64(len(cs))
		if len(cs) > 0 {
			c.feedLag = lag
		}
		c.mu.Unlock()
		if len(cs) < feedBatch {
			return nil
		}
	}
}
