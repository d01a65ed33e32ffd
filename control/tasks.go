package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/suanli/suanli"
)

// taskBoard holds the agent tasks the control plane waits on: listed in
// the machine's sync replies until the agent reports their result.
type taskBoard struct {
	mu        sync.Mutex
	byMachine map[int64][]suanli.AgentTask
	waiters   map[string]chan suanli.TaskResult
}

func (b *taskBoard) add(machineID int64, t suanli.AgentTask) chan suanli.TaskResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byMachine == nil {
		b.byMachine, b.waiters = map[int64][]suanli.AgentTask{}, map[string]chan suanli.TaskResult{}
	}
	ch := make(chan suanli.TaskResult, 1)
	b.byMachine[machineID] = append(b.byMachine[machineID], t)
	b.waiters[t.ID] = ch
	return ch
}

func (b *taskBoard) remove(machineID int64, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ts := b.byMachine[machineID]
	for i, t := range ts {
		if t.ID == id {
			b.byMachine[machineID] = append(ts[:i:i], ts[i+1:]...)
			break
		}
	}
	delete(b.waiters, id)
}

// pending returns the machine's tasks still waiting for a result.
func (b *taskBoard) pending(machineID int64) []suanli.AgentTask {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]suanli.AgentTask(nil), b.byMachine[machineID]...)
}

// deliver hands results to their waiters and drops their tasks.
func (b *taskBoard) deliver(machineID int64, results []suanli.TaskResult) {
	for _, r := range results {
		b.mu.Lock()
		ch, ok := b.waiters[r.ID]
		b.mu.Unlock()
		if ok {
			select {
			case ch <- r:
			default:
			}
		}
		b.remove(machineID, r.ID)
	}
}

// runTask asks a machine's agent to run a task and waits for its result,
// up to wait. EUNAVAILABLE when the agent does not answer in time.
func (s *Service) runTask(ctx context.Context, machineID int64, t suanli.AgentTask, wait time.Duration) (*suanli.TaskResult, error) {
	b := make([]byte, 12)
	rand.Read(b)
	t.ID = t.Kind + "-" + hex.EncodeToString(b)
	ch := s.tasks.add(machineID, t)
	defer s.tasks.remove(machineID, t.ID)
	s.hub.wake(machineID)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case r := <-ch:
		return &r, nil
	case <-timer.C:
		return nil, suanli.Errorf(suanli.EUNAVAILABLE, "machine %d's agent did not answer the %s within %s: it may be offline or busy; try again", machineID, t.Kind, wait)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ExecResult is what `suanli exec` prints and exits with.
type ExecResult struct {
	ExitCode  int    `json:"exit_code"`
	Output    []byte `json:"output"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Exec runs a command inside one of the caller's running instances and
// returns its exit code and output (non-interactive; use SSH for a shell).
func (s *Service) Exec(ctx context.Context, id int64, cmd []string, timeout time.Duration) (*ExecResult, error) {
	_, in, err := s.ownInstance(ctx, suanli.ScopeInstanceWrite, id, false)
	if err != nil {
		return nil, err
	}
	if len(cmd) == 0 {
		return nil, suanli.FieldErrorf("cmd", "give the command to run after --")
	}
	if in.Status != suanli.StatusRunning {
		return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d is %s: exec needs it running (suanli start %d)", id, in.Status, id)
	}
	if timeout <= 0 {
		timeout = time.Minute
	}
	if timeout > 10*time.Minute {
		return nil, suanli.FieldErrorf("timeout", "at most 10 minutes; use SSH for long sessions")
	}
	r, err := s.runTask(ctx, in.MachineID, suanli.AgentTask{Kind: suanli.TaskExec, InstanceID: id, Cmd: cmd, Timeout: timeout}, timeout+30*time.Second)
	if err != nil {
		return nil, err
	}
	if r.Error != "" && r.ExitCode == 0 {
		return nil, suanli.Errorf(suanli.ECONFLICT, "exec in instance %d: %s", id, r.Error)
	}
	s.Logger.Info("exec", "instance_id", id, "exit_code", r.ExitCode)
	return &ExecResult{ExitCode: r.ExitCode, Output: r.Output, Truncated: r.Truncated}, nil
}
