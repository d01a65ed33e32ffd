package control

import (
	"context"
	"time"

	"github.com/suanli/suanli"
)

// Heartbeat fan-in (issue 12). A beat that changes nothing — a light
// channel datagram (package heartbeat), or a sync whose machine status,
// hardware, agent version and instance reports are as before — is recorded
// only in the in-memory table s.Beats; RunHeartbeats writes every beat
// heard since the last flush to the store in one batch per
// BeatFlushInterval. A sync that does change something writes its
// heartbeat at once, as before. Every replica flushes its own table; the
// lease checker (on one replica) reads the persisted times, so it sees a
// beat at most one flush interval late wherever the agent beat. Reads of a
// machine (FindMachines, the sync path) take the later of the store's and
// this replica's table's; the hour close and the lease check flush first.

// SetHeartbeatAddr sets the light channel's address that sync responses
// advertise (HOST:PORT, or :PORT on the host the agent syncs with); ""
// advertises none, and agents long-poll as before. Safe at any time.
func (s *Service) SetHeartbeatAddr(addr string) {
	s.beatAddr.Store(&addr)
}

// heartbeatChannel returns what a sync response tells machine id about the
// light channel, or nil when there is none.
func (s *Service) heartbeatChannel(id int64) *suanli.HeartbeatChannel {
	addr := s.beatAddr.Load()
	if addr == nil || *addr == "" {
		return nil
	}
	return s.Beats.Keys().Channel(id, *addr, s.now())
}

// RunHeartbeats writes the heartbeat table to the store every
// BeatFlushInterval and reads every machine's status and desired-state
// version into it every BeatRefreshInterval, until ctx ends; then it
// flushes once more. Unlike Run's loops, it runs on every replica. Call
// RefreshBeats once before the light channel opens, so that after a restart
// agents keep beating without a full sync each.
func (s *Service) RunHeartbeats(ctx context.Context) {
	s.flusher.Add(1)
	defer s.flusher.Add(-1)
	flush := time.NewTicker(s.cfg.BeatFlushInterval)
	defer flush.Stop()
	refresh := time.NewTicker(s.cfg.BeatRefreshInterval)
	defer refresh.Stop()
	for {
		select {
		case <-ctx.Done():
			if _, err := s.FlushBeats(context.WithoutCancel(ctx)); err != nil {
				s.Logger.Error("flush heartbeats at shutdown", "err", err)
			}
			return
		case <-flush.C:
			if _, err := s.FlushBeats(ctx); err != nil {
				s.Logger.Error("flush heartbeats", "err", err)
			}
		case <-refresh.C:
			if err := s.RefreshBeats(ctx); err != nil {
				s.Logger.Error("refresh heartbeat table", "err", err)
			}
		}
	}
}

// FlushBeats writes the beats heard since the last flush to the store in
// one transaction and returns how many machines' beats it wrote.
func (s *Service) FlushBeats(ctx context.Context) (int, error) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.flushedAt = s.now()
	return s.Beats.Flush(ctx, s.Store.RecordBeats)
}

// flushStale flushes unless RunHeartbeats does, and did within two flush
// intervals: the lease check wants this replica's beats in the store, but
// every flush rewrites the index pages of every machine that beat, so a
// second flusher would double the cost.
func (s *Service) flushStale(ctx context.Context) error {
	s.flushMu.Lock()
	recent := s.flusher.Load() > 0 && s.now().Sub(s.flushedAt) < 2*s.cfg.BeatFlushInterval
	s.flushMu.Unlock()
	if recent {
		return nil
	}
	_, err := s.FlushBeats(ctx)
	return err
}

// RefreshBeats reads every machine's lease fields into the heartbeat table
// (heartbeat.Table.Refresh).
func (s *Service) RefreshBeats(ctx context.Context) error {
	ls, err := s.Store.MachineLeases(ctx)
	if err != nil {
		return err
	}
	s.Beats.Refresh(ls)
	return nil
}

// withBeats sets each machine's LastHeartbeat to the later of the store's
// and this replica's heartbeat table's.
func (s *Service) withBeats(ms ...*suanli.Machine) {
	for _, m := range ms {
		if t, ok := s.Beats.LastBeat(m.ID); ok && t.After(m.LastHeartbeat) {
			m.LastHeartbeat = t
		}
	}
}
