package agent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
)

// TestAgentFenceFollowsServerLease: an agent configured to fence after 100s
// against a control plane whose lost_after is 12s fences after 10s (two
// heartbeats before lost_after), measured from when its last answered sync
// was sent, with a stop grace that ends before lost_after.
func TestAgentFenceFollowsServerLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, time.Second), newTestRuntime(t) // lost_after 12s
		srv.set(suanli.InstanceSpec{ID: 1, Desired: suanli.DesiredRunning, Image: "img", StopGrace: 30 * time.Second})
		stop := startAgent(t, srv, rt, func(c *agent.Config) { c.FenceAfter = 100 * time.Second })
		defer stop()
		time.Sleep(3500 * time.Millisecond)
		srv.setDown(errors.New("connection refused"))
		// The last answered sync went out at 3s (a long poll, answered at 4s).
		time.Sleep(9 * time.Second) // 12.5s: 9.5s since it was sent
		if in, _ := rt.inst(1); in.status != suanli.StatusRunning {
			t.Fatalf("instance 1 = %s before the fence, want running", in.status)
		}
		time.Sleep(1500 * time.Millisecond) // 14s: 11s since (the fence is checked every PollInterval)
		in, _ := rt.inst(1)
		if in.status != suanli.StatusStopped {
			t.Fatalf("instance 1 = %s 11s after the last answered sync went out, want fenced (lost_after 12s)", in.status)
		}
		if g := in.spec.StopGrace; g <= 0 || g > 1500*time.Millisecond {
			t.Errorf("fence stop grace %s, want what is left before lost_after (at most 1.5s), not the spec's 30s", g)
		}
	})
}

// lateServer answers some syncs late, whatever the call's deadline (the
// agent frozen, and thawed with the answer waiting), with the desired state
// of before the delay: delays maps a call's number (from 1) to its delay.
type lateServer struct {
	*testServer
	delays map[int]time.Duration
	mu     sync.Mutex
	calls  int
}

func (s *lateServer) Sync(ctx context.Context, req *suanli.SyncRequest) (*suanli.SyncResponse, error) {
	s.mu.Lock()
	s.calls++
	d := s.delays[s.calls]
	s.mu.Unlock()
	resp, err := s.testServer.Sync(ctx, req)
	time.Sleep(d)
	return resp, err
}

// TestAgentDistrustsLateAnswer: an answer that arrives after the fence
// interval (the control plane may have moved the instance meanwhile) must not
// keep the instance running: the agent fences, then follows the next, fresh
// answer, which no longer lists it.
func TestAgentDistrustsLateAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newTestServer(t, time.Second)
		// The third sync (the first long poll once the instance runs) is
		// answered 20s late; the next, 2s late (a slow network after a thaw).
		srv, rt := &lateServer{testServer: base, delays: map[int]time.Duration{3: 20 * time.Second, 4: 2 * time.Second}}, newTestRuntime(t)
		base.set(running(1))
		stop := startAgent(t, srv, rt, func(c *agent.Config) { c.FenceAfter = 5 * time.Second })
		defer stop()
		time.Sleep(4 * time.Second)
		if in, _ := rt.inst(1); in.status != suanli.StatusRunning {
			t.Fatalf("instance 1 = %s before the fence, want running", in.status)
		}
		base.set() // lost and relaunched elsewhere meanwhile
		time.Sleep(4 * time.Second)
		if in, _ := rt.inst(1); in.status != suanli.StatusStopped {
			t.Fatalf("instance 1 = %s 8s into an unanswered sync, want fenced", in.status)
		}
		time.Sleep(20 * time.Second) // the late answer (still listing it running), then a fresh one
		if in, ok := rt.inst(1); ok {
			t.Errorf("instance 1 still on the machine (%s) after a late answer and a fresh one without it", in.status)
		}
		starts := 0
		rt.mu.Lock()
		for _, e := range rt.ensures {
			if e.Desired == suanli.DesiredRunning {
				starts++
			}
		}
		rt.mu.Unlock()
		if _, removes := rt.counts(); starts != 1 || removes != 1 {
			t.Errorf("%d starts, %d removes; want the first start only, then the removal: a late answer must not restart it", starts, removes)
		}
	})
}

// TestAgentBackoffBeforeFence: with a short fence interval, retries come
// often enough that a control plane back before the fence is found in time.
func TestAgentBackoffBeforeFence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, time.Second), newTestRuntime(t)
		srv.set(running(1))
		stop := startAgent(t, srv, rt, func(c *agent.Config) { c.FenceAfter = 8 * time.Second })
		defer stop()
		time.Sleep(2 * time.Second)
		srv.setDown(errors.New("connection refused"))
		time.Sleep(5 * time.Second)
		srv.setDown(nil)
		time.Sleep(2500 * time.Millisecond)
		if in, _ := rt.inst(1); in.status != suanli.StatusRunning {
			t.Errorf("instance 1 = %s: the control plane was back 3s before the fence, want the agent to have found it", in.status)
		}
	})
}

// TestAgentReportsEndOnServerClock: a workload's end goes to the control
// plane on the control plane's clock, reckoned from the last answer's
// ServerTime, whatever the agent's own clock says.
func TestAgentReportsEndOnServerClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, time.Second), newTestRuntime(t)
		srv.set(running(1))
		skew := 90 * time.Minute // the agent's clock is 90 minutes ahead
		stop := startAgent(t, srv, rt, func(c *agent.Config) { c.Now = func() time.Time { return time.Now().Add(skew) } })
		defer stop()
		time.Sleep(3 * time.Second)
		ended := time.Now().Add(-500 * time.Millisecond)
		rt.exitAt(1, 0, ended.Add(skew)) // the runtime speaks the agent's clock
		time.Sleep(2 * time.Second)
		rep, ok := srv.report(1)
		if !ok || rep.Status != suanli.StatusExited || rep.EndedAt == nil {
			t.Fatalf("report = %+v, want exited with EndedAt", rep)
		}
		if d := rep.EndedAt.Sub(ended); d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("EndedAt %v, want %v on the server's clock (off by %s)", rep.EndedAt, ended, d)
		}
	})
}
