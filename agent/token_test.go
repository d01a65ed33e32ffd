package agent_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/suanli/suanli"
)

// tokenRuntime is a testRuntime that takes fresh instance tokens.
type tokenRuntime struct {
	*testRuntime
	mu     sync.Mutex
	tokens map[int64][]string
}

func (r *tokenRuntime) WriteToken(ctx context.Context, id int64, token string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens[id] = append(r.tokens[id], token)
	return nil
}

func (r *tokenRuntime) written(id int64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.tokens[id]...)
}

// A new instance token alone never re-runs Ensure (it would restart an
// exited workload); it reaches the runtime through WriteToken, once.
func TestAgentRefreshesTokenWithoutRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newTestServer(t, 10*time.Second)
		rt := &tokenRuntime{testRuntime: newTestRuntime(t), tokens: map[int64][]string{}}
		spec := running(1)
		spec.Token = "sl_inst_a"
		srv.set(spec)
		stop := startAgent(t, srv, rt, nil)
		defer stop()
		time.Sleep(3 * time.Second)
		rt.exit(1, 0)
		time.Sleep(time.Second)

		spec.Token = "sl_inst_b"
		srv.set(spec)
		time.Sleep(30 * time.Second) // several syncs with the same token
		if e, _ := rt.counts(); e != 1 {
			t.Errorf("%d Ensure calls, want 1: a new token must not restart the workload", e)
		}
		if in, _ := rt.inst(1); in.status != suanli.StatusExited || in.spec.Token != "sl_inst_a" {
			t.Errorf("instance %s with token %q, want exited with the first token", in.status, in.spec.Token)
		}
		got := rt.written(1)
		if len(got) == 0 || got[len(got)-1] != "sl_inst_b" || len(got) > 2 {
			t.Errorf("tokens written %q, want the new one once (after the first)", got)
		}
	})
}
