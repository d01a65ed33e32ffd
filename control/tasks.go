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
// the machine's sync replies until the agent reports their result. With
// several replicas, a task is also posted to the store, and every other
// replica lists it too (remote: no waiter here), so that it reaches the
// agent whichever replica it syncs with; a result for a task this replica
// does not wait on goes back through the store (relay).
type taskBoard struct {
	mu        sync.Mutex
	byMachine map[int64][]suanli.AgentTask
	waiters   map[string]chan suanli.TaskResult
	remote    map[string]bool
	// relay posts a result this replica has no waiter for; nil drops it.
	relay func(machineID int64, r suanli.TaskResult)
}

func (b *taskBoard) initLocked() {
	if b.byMachine == nil {
		b.byMachine, b.waiters, b.remote = map[int64][]suanli.AgentTask{}, map[string]chan suanli.TaskResult{}, map[string]bool{}
	}
}

func (b *taskBoard) add(machineID int64, t suanli.AgentTask) chan suanli.TaskResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.initLocked()
	ch := make(chan suanli.TaskResult, 1)
	b.byMachine[machineID] = append(b.byMachine[machineID], t)
	b.waiters[t.ID] = ch
	return ch
}

func (b *taskBoard) remove(machineID int64, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.removeLocked(machineID, id)
}

func (b *taskBoard) removeLocked(machineID int64, id string) {
	ts := b.byMachine[machineID]
	for i, t := range ts {
		if t.ID == id {
			b.byMachine[machineID] = append(ts[:i:i], ts[i+1:]...)
			break
		}
	}
	if len(b.byMachine[machineID]) == 0 {
		delete(b.byMachine, machineID)
	}
	delete(b.waiters, id)
	delete(b.remote, id)
}

// setRemote makes ts the machine's tasks posted by other replicas.
func (b *taskBoard) setRemote(machineID int64, ts []suanli.AgentTask) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.initLocked()
	for _, t := range b.byMachine[machineID] {
		if b.remote[t.ID] {
			b.removeLocked(machineID, t.ID)
		}
	}
	for _, t := range ts {
		if _, local := b.waiters[t.ID]; !local {
			b.byMachine[machineID] = append(b.byMachine[machineID], t)
			b.remote[t.ID] = true
		}
	}
}

// waiting returns the ids of the machine's tasks this replica waits on.
func (b *taskBoard) waiting(machineID int64) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for _, t := range b.byMachine[machineID] {
		if _, ok := b.waiters[t.ID]; ok {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

// pending returns the machine's tasks still waiting for a result.
func (b *taskBoard) pending(machineID int64) []suanli.AgentTask {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]suanli.AgentTask(nil), b.byMachine[machineID]...)
}

// deliver hands results to their waiters and drops their tasks; a result
// nobody here waits for is relayed to the replica that does.
func (b *taskBoard) deliver(machineID int64, results []suanli.TaskResult) {
	for _, r := range results {
		b.mu.Lock()
		ch, ok := b.waiters[r.ID]
		relay := b.relay
		b.mu.Unlock()
		if ok {
			select {
			case ch <- r:
			default:
			}
		} else if relay != nil {
			relay(machineID, r)
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
	// Through the store, the task reaches the agent on whichever replica it
	// syncs with.
	if err := s.Store.PostAgentTask(ctx, machineID, t, time.Now()); err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.Store.DeleteAgentTask(dctx, machineID, t.ID); err != nil {
			s.Logger.Error("withdraw agent task", "machine_id", machineID, "task", t.ID, "err", err)
		}
	}()
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

// taskKept is how long a posted task stays listed: the longest exec
// (10 minutes) and its margin.
const taskKept = 11 * time.Minute

// relayResult posts a result for a task another replica waits on.
func (s *Service) relayResult(machineID int64, r suanli.TaskResult) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Store.PostTaskResult(ctx, machineID, r); err != nil {
		s.Logger.Error("relay agent task result", "machine_id", machineID, "task", r.ID, "err", err)
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
