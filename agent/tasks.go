package agent

import (
	"bytes"
	"context"
	"io"
	"time"

	"github.com/suanli/suanli"
)

// Preflighter is implemented by runtimes that can check, before anything
// is reserved, that an instance can run here (image architecture, image
// present or pullable, disk, ports).
type Preflighter interface {
	Preflight(ctx context.Context, spec suanli.InstanceSpec) error
}

// Execer is implemented by runtimes that can run a command inside an
// instance (suanli exec, SSH).
type Execer interface {
	Exec(ctx context.Context, id int64, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
}

// taskState is one agent task the agent has started.
type taskState struct {
	done   bool
	sent   bool // its result went out in an acknowledged sync
	result suanli.TaskResult
}

// capped keeps the first n bytes written to it.
type capped struct {
	buf       bytes.Buffer
	n         int
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.n - c.buf.Len(); room < len(p) {
		c.truncated = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

// startTasks runs the tasks the server lists that the agent has not started,
// each in its own goroutine, and forgets the tasks the server stopped listing.
func (a *Agent) startTasks(ctx context.Context, tasks []suanli.AgentTask) {
	a.mu.Lock()
	defer a.mu.Unlock()
	listed := map[string]bool{}
	for _, t := range tasks {
		listed[t.ID] = true
		if _, ok := a.tasks[t.ID]; ok {
			continue
		}
		st := &taskState{}
		a.tasks[t.ID] = st
		a.wg.Add(1)
		go func(t suanli.AgentTask) {
			defer a.wg.Done()
			res := a.runTask(ctx, t)
			a.mu.Lock()
			st.done, st.result = true, res
			a.mu.Unlock()
			a.nudge()
		}(t)
	}
	for id, st := range a.tasks {
		if !listed[id] && st.done {
			delete(a.tasks, id)
		}
	}
}

func (a *Agent) runTask(ctx context.Context, t suanli.AgentTask) suanli.TaskResult {
	res := suanli.TaskResult{ID: t.ID}
	timeout := t.Timeout
	if timeout <= 0 || timeout > 10*time.Minute {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch t.Kind {
	case suanli.TaskPreflight:
		if p, ok := a.rt.(Preflighter); ok && t.Spec != nil {
			if err := p.Preflight(ctx, *t.Spec); err != nil {
				res.Error = suanli.ErrorMessage(err)
				if suanli.ErrorCode(err) == suanli.EINTERNAL {
					res.Error = err.Error()
				}
			}
		}
	case suanli.TaskExec:
		e, ok := a.rt.(Execer)
		if !ok {
			res.Error = "the " + a.rt.Name() + " runtime cannot run commands in instances"
			break
		}
		out := &capped{n: suanli.MaxTaskOutput}
		code, err := e.Exec(ctx, t.InstanceID, t.Cmd, nil, out, out)
		res.ExitCode, res.Output, res.Truncated = code, out.buf.Bytes(), out.truncated
		if err != nil {
			res.Error = err.Error()
			if ctx.Err() == context.DeadlineExceeded {
				res.Error = "timed out after " + timeout.String()
			}
		}
	default:
		res.Error = "unknown task kind " + t.Kind + ": upgrade the agent"
	}
	a.log.Info("task done", "task_id", t.ID, "kind", t.Kind, "err", res.Error)
	return res
}

// taskResults returns the finished tasks' results that still need saying.
func (a *Agent) taskResults() []suanli.TaskResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []suanli.TaskResult
	for _, st := range a.tasks {
		if st.done {
			out = append(out, st.result)
		}
	}
	return out
}

// unsentResults reports whether a finished task's result has not yet gone
// out in an acknowledged sync.
func (a *Agent) unsentResults() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, st := range a.tasks {
		if st.done && !st.sent {
			return true
		}
	}
	return false
}

func (a *Agent) markSent(results []suanli.TaskResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range results {
		if st, ok := a.tasks[r.ID]; ok {
			st.sent = true
		}
	}
}
