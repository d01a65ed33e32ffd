package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// The agent fences its own workloads when it cannot reach the control
// plane (checkFence), but only while it runs: an agent process that is
// stopped (SIGSTOP, a debugger, a deadlock) or dies leaves them running
// while the control plane declares the host lost and relaunches its jobs
// elsewhere. The Watchdog, a small process of its own, closes that gap: the
// agent renews a lease file with every successful sync, and when the lease
// runs out the watchdog stops the workloads itself, a little after the
// agent would have and before the control plane declares them lost.

// Lease is the agent's fence state as the watchdog reads it.
type Lease struct {
	AgentPID int `json:"agent_pid"`
	// Renewed is when the last answered sync was sent (the agent's clock,
	// the host's wall clock in production).
	Renewed time.Time `json:"renewed"`
	// FenceAfter is the agent's fence interval in force; 0 disables the
	// watchdog's fence too.
	FenceAfter time.Duration `json:"fence_after"`
	// LostAfter and Heartbeat are the control plane's, as last announced
	// (0 until the first answer).
	LostAfter time.Duration `json:"lost_after"`
	Heartbeat time.Duration `json:"heartbeat"`
}

// Deadline is when the watchdog fences: a margin after the agent's own
// fence (half the room left before lost_after, at most a heartbeat), so
// that a running agent always fences first.
func (l Lease) Deadline() time.Time {
	margin := time.Second
	if l.Heartbeat > 0 {
		margin = l.Heartbeat
	}
	if l.LostAfter > l.FenceAfter {
		margin = min(margin, (l.LostAfter-l.FenceAfter)/2)
	}
	return l.Renewed.Add(l.FenceAfter + margin)
}

// WriteLease replaces path with l atomically.
func WriteLease(path string, l Lease) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadLease reads the lease at path.
func ReadLease(path string) (Lease, error) {
	var l Lease
	b, err := os.ReadFile(path)
	if err != nil {
		return l, err
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("lease %s: %w", path, err)
	}
	return l, nil
}

// renewLease writes the lease file, if there is one, after lastSuccess
// moved. A failure is logged: the agent's own fence does not depend on it.
func (a *Agent) renewLease() {
	if a.cfg.LeaseFile == "" {
		return
	}
	l := Lease{AgentPID: os.Getpid(), Renewed: a.lastSuccess, FenceAfter: a.fenceAfter(), LostAfter: a.lostAfter, Heartbeat: a.heartbeat}
	if err := WriteLease(a.cfg.LeaseFile, l); err != nil {
		a.log.Warn("renew lease file failed", "path", a.cfg.LeaseFile, "err", err)
	}
}

// Watchdog stops a machine's workloads when the agent's lease runs out.
type Watchdog struct {
	// Lease is the agent's lease file (Config.LeaseFile).
	Lease string
	// Fence stops every running workload, each within grace, and returns
	// how many it stopped.
	Fence func(ctx context.Context, grace time.Duration) (int, error)
	// Logger receives its events; nil discards them.
	Logger *slog.Logger
	// Now is the clock (time.Now when nil); Poll how often it looks (one
	// second when 0).
	Now  func() time.Time
	Poll time.Duration
}

// Run watches the lease until ctx ends, the lease file is removed (the
// agent left the marketplace, or its data directory went), or the agent
// process is gone and nothing runs any more (a new agent starts its own
// watchdog). While the lease is out it fences on every look, so that a
// workload the fence raced with is stopped too.
func (w *Watchdog) Run(ctx context.Context) error {
	log, now, poll := w.Logger, w.Now, w.Poll
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	if poll <= 0 {
		poll = time.Second
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var fencedFor time.Time
	for {
		l, err := ReadLease(w.Lease)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			log.Info("watchdog stopping: the lease file is gone", "lease", w.Lease)
			return nil
		case err != nil:
			log.Warn("watchdog: read lease failed", "err", err)
		case l.FenceAfter > 0 && now().After(l.Deadline()):
			since := now().Sub(l.Renewed)
			grace := time.Second
			if l.LostAfter > 0 {
				grace = max(l.LostAfter-since-poll, 100*time.Millisecond)
			}
			n, err := w.Fence(ctx, grace)
			if err != nil {
				log.Error("watchdog fence failed", "err", err)
			} else if n > 0 || !fencedFor.Equal(l.Renewed) {
				log.Warn("watchdog fenced the agent's workloads: its lease ran out", "stopped", n, "agent_pid", l.AgentPID,
					"renewed", l.Renewed.Format(time.RFC3339Nano), "since", since.Round(time.Millisecond), "agent_alive", processAlive(l.AgentPID))
			}
			fencedFor = l.Renewed
			if err == nil && n == 0 && !processAlive(l.AgentPID) {
				log.Info("watchdog stopping: the agent is gone and nothing runs", "agent_pid", l.AgentPID)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// processAlive reports whether pid exists (a stopped process does).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// LeasePath is the lease file's conventional place in an agent's data
// directory.
func LeasePath(dataDir string) string { return filepath.Join(dataDir, "agent.lease") }
