package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
)

// startAgent runs an agent against srv and rt until the returned function is
// called.
func startAgent(t *testing.T, srv agent.Server, rt agent.Runtime, mod func(*agent.Config)) (stop func()) {
	t.Helper()
	cfg := agent.Config{
		Server: srv, Runtime: rt, MachineID: 42, Version: "v-test",
		Hardware: suanli.Hardware{Hostname: "rig", OS: "linux", CPUCores: 8},
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func running(id int64) suanli.InstanceSpec {
	return suanli.InstanceSpec{ID: id, Desired: suanli.DesiredRunning, Image: "img", Cmd: []string{"train"}}
}

func stopped(id int64) suanli.InstanceSpec {
	s := running(id)
	s.Desired = suanli.DesiredStopped
	return s
}

func TestAgentNew(t *testing.T) {
	srv, rt := newTestServer(t, time.Second), newTestRuntime(t)
	for _, cfg := range []agent.Config{{Runtime: rt, MachineID: 1}, {Server: srv, MachineID: 1}, {Server: srv, Runtime: rt}} {
		if _, err := agent.New(cfg); err == nil {
			t.Errorf("New(%+v): want an error", cfg)
		}
	}
}

func TestAgentStartsDesiredInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, 10*time.Second), newTestRuntime(t)
		srv.set(running(1))
		start := time.Now()
		stop := startAgent(t, srv, rt, nil)
		defer stop()

		time.Sleep(3 * time.Second)
		if in, ok := rt.inst(1); !ok || in.status != suanli.StatusRunning || in.spec.Image != "img" {
			t.Fatalf("runtime instance 1 = %+v, %v; want running", in, ok)
		}
		at, ok := srv.firstReport(1, suanli.StatusRunning)
		if !ok || at.Sub(start) > time.Second {
			t.Errorf("running reported after %s (ok=%v), want within a second although the server holds syncs for 10s", at.Sub(start), ok)
		}

		// Over a quiet minute the agent long-polls: one sync per heartbeat.
		before := len(srv.requests())
		time.Sleep(time.Minute)
		if n := len(srv.requests()) - before; n < 5 || n > 8 {
			t.Errorf("%d syncs in a quiet minute with a 10s heartbeat, want about 6", n)
		}

		reqs := srv.requests()
		if reqs[0].Hardware == nil || reqs[0].Hardware.Hostname != "rig" || reqs[0].Wait {
			t.Errorf("first sync: hardware %+v, wait %v; want the hardware, not waiting", reqs[0].Hardware, reqs[0].Wait)
		}
		for i, r := range reqs {
			if i > 0 && r.Hardware != nil {
				t.Errorf("sync %d resends the hardware", i)
			}
			if i > 0 && r.Seq <= reqs[i-1].Seq {
				t.Errorf("seq %d after %d: not increasing", r.Seq, reqs[i-1].Seq)
			}
			if r.MachineID != 42 || r.Runtime != "test" || r.AgentVersion != "v-test" {
				t.Errorf("sync %d: machine %d runtime %q version %q", i, r.MachineID, r.Runtime, r.AgentVersion)
			}
		}
		if last := reqs[len(reqs)-1]; !last.Wait || last.KnownVersion != 2 {
			t.Errorf("quiet sync: wait %v, known version %d; want a long poll at version 2", last.Wait, last.KnownVersion)
		}
		if e, _ := rt.counts(); e != 1 {
			t.Errorf("%d Ensure calls for one unchanged spec, want 1", e)
		}
	})
}

func TestAgentAppliesChangesAndRemoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, 10*time.Second), newTestRuntime(t)
		rt.add(5, suanli.StatusRunning) // left from an earlier run, no longer wanted
		srv.set(running(1), running(2))
		stop := startAgent(t, srv, rt, nil)
		defer stop()

		time.Sleep(2 * time.Second)
		if _, ok := rt.inst(5); ok {
			t.Error("instance 5, which the server does not list, was not removed")
		}
		if _, ok := rt.inst(2); !ok {
			t.Fatal("instance 2 not created")
		}

		// A change reaches the agent through the waiting sync at once.
		changed := time.Now()
		srv.set(stopped(1))
		time.Sleep(time.Second)
		if in, _ := rt.inst(1); in.status != suanli.StatusStopped {
			t.Errorf("instance 1 = %s a second after the server asked to stop it", in.status)
		}
		if _, ok := rt.inst(2); ok {
			t.Error("instance 2 not removed")
		}
		at, ok := srv.firstReport(1, suanli.StatusStopped)
		if !ok || at.Sub(changed) > time.Second {
			t.Errorf("stopped reported %s after the change (ok=%v), want under a second", at.Sub(changed), ok)
		}
		if _, ok := srv.report(2); !ok {
			t.Error("server never heard of instance 2")
		}
		reqs := srv.requests()
		for _, r := range reqs[len(reqs)-1].Instances {
			if r.ID != 1 {
				t.Errorf("last sync still reports instance %d", r.ID)
			}
		}

		// Desired "destroyed" is the same as not listed.
		d := running(1)
		d.Desired = suanli.DesiredDestroyed
		srv.set(d)
		time.Sleep(time.Second)
		if _, ok := rt.inst(1); ok {
			t.Error("instance 1, desired destroyed, not removed")
		}
	})
}

func TestAgentShipsLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, 10*time.Second), newTestRuntime(t)
		srv.set(running(1), running(2))
		stop := startAgent(t, srv, rt, nil)
		defer stop()
		time.Sleep(time.Second)

		want := map[int64]string{}
		write := func(id int64, s string) {
			rt.write(id, s)
			want[id] += s
		}
		write(1, "epoch 1 loss 0.9\n")
		time.Sleep(2 * time.Second)
		if got := srv.log(1); got != want[1] {
			t.Fatalf("server log = %q, want %q", got, want[1])
		}

		// More than fits in one sync, on two instances at once.
		big := strings.Repeat("0123456789abcdef", 50_000) // 800 KB
		write(1, big)
		write(2, big)
		write(1, "epoch 2 loss 0.5\n")
		time.Sleep(5 * time.Second)
		for _, id := range []int64{1, 2} {
			if got := srv.log(id); got != want[id] {
				t.Errorf("instance %d: server log has %d bytes, want %d (in order, once)", id, len(got), len(want[id]))
			}
		}
		for _, r := range srv.requests() {
			n := 0
			for _, c := range r.Logs {
				n += len(c.Data)
			}
			if n > agent.MaxLogPerSync {
				t.Errorf("seq %d carries %d log bytes, more than %d", r.Seq, n, agent.MaxLogPerSync)
			}
		}
	})
}

func TestAgentLogPromptness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, 10*time.Second), newTestRuntime(t)
		srv.set(running(1))
		stop := startAgent(t, srv, rt, nil)
		defer stop()
		time.Sleep(5 * time.Second)

		rt.write(1, "hello\n")
		start := time.Now()
		for srv.log(1) == "" {
			time.Sleep(100 * time.Millisecond)
			if time.Since(start) > 5*time.Second {
				t.Fatal("log not shipped within 5s")
			}
		}
		if d := time.Since(start); d > agent.DefaultLogFlush+agent.DefaultPollInterval {
			t.Errorf("log shipped after %s, want within LogFlush+PollInterval", d)
		}
	})
}

func TestAgentReportsExitPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, 10*time.Second), newTestRuntime(t)
		srv.set(running(1))
		stop := startAgent(t, srv, rt, nil)
		defer stop()
		time.Sleep(3 * time.Second)

		rt.exit(1, 3)
		exited := time.Now()
		time.Sleep(time.Minute)
		at, ok := srv.firstReport(1, suanli.StatusExited)
		if !ok || at.Sub(exited) > time.Second {
			t.Errorf("exit reported after %s (ok=%v), want within a second", at.Sub(exited), ok)
		}
		if r, _ := srv.report(1); r.ExitCode == nil || *r.ExitCode != 3 {
			t.Errorf("report %+v, want exit code 3", r)
		}
		// The server still says running; the agent does not restart
		// finished work on its own.
		if e, _ := rt.counts(); e != 1 {
			t.Errorf("%d Ensure calls, want 1: an exited workload must not be restarted for the same spec", e)
		}
		// Stop then start restarts it.
		srv.set(stopped(1))
		time.Sleep(time.Second)
		srv.set(running(1))
		time.Sleep(time.Second)
		if in, _ := rt.inst(1); in.status != suanli.StatusRunning || in.starts != 2 {
			t.Errorf("after stop and start: %s, %d starts; want running, 2 starts", in.status, in.starts)
		}
	})
}

func TestAgentReportsEnsureFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, 10*time.Second), newTestRuntime(t)
		rt.ensureErr[1] = errors.New("image img: not found in any registry; check the name")
		srv.set(running(1))
		stop := startAgent(t, srv, rt, nil)
		defer stop()

		time.Sleep(time.Minute)
		r, ok := srv.report(1)
		if !ok || r.Status != suanli.StatusFailed || !strings.Contains(r.Message, "not found in any registry") {
			t.Errorf("report %+v, want failed with the runtime's message", r)
		}
		if e, _ := rt.counts(); e != 1 {
			t.Errorf("%d Ensure calls, want 1: a failed spec is not retried until it changes", e)
		}

		delete(rt.ensureErr, 1)
		srv.set(stopped(1))
		time.Sleep(time.Second)
		if r, _ := srv.report(1); r.Status != suanli.StatusStopped || r.Message != "" {
			t.Errorf("after a successful stop: %+v, want stopped without the old message", r)
		}
	})
}

func TestAgentRestartKeepsFinishedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, 10*time.Second), newTestRuntime(t)
		rt.add(3, suanli.StatusExited) // finished while the agent was down
		rt.add(4, suanli.StatusRunning)
		srv.set(running(3), running(4))
		stop := startAgent(t, srv, rt, nil)
		defer stop()

		time.Sleep(30 * time.Second)
		if in, _ := rt.inst(3); in.status != suanli.StatusExited || in.starts != 0 {
			t.Errorf("instance 3 = %s after %d starts, want exited and not restarted", in.status, in.starts)
		}
		if in, _ := rt.inst(4); in.status != suanli.StatusRunning || in.starts != 0 {
			t.Errorf("instance 4 = %s after %d starts, want adopted as running", in.status, in.starts)
		}
		srv.set(stopped(3), running(4))
		time.Sleep(time.Second)
		srv.set(running(3), running(4))
		time.Sleep(time.Second)
		if in, _ := rt.inst(3); in.status != suanli.StatusRunning {
			t.Errorf("instance 3 = %s after stop and start, want running", in.status)
		}
	})
}

func TestAgentBacksOffAndFences(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, 10*time.Second), newTestRuntime(t)
		srv.set(running(1), stopped(2))
		stop := startAgent(t, srv, rt, func(c *agent.Config) { c.FenceAfter = 100 * time.Second })
		defer stop()
		time.Sleep(5 * time.Second)
		lastOK := time.Now() // syncs succeed until now

		srv.setDown(errors.New("connection refused"))
		before := len(srv.requests())
		time.Sleep(90 * time.Second)
		if in, _ := rt.inst(1); in.status != suanli.StatusRunning {
			t.Errorf("instance 1 = %s before FenceAfter, want left running", in.status)
		}
		if n := len(srv.requests()) - before; n > 12 {
			t.Errorf("%d sync attempts in 90s of outage, want backoff to keep it under 12", n)
		}

		time.Sleep(20 * time.Second)
		in, _ := rt.inst(1)
		if in.status != suanli.StatusStopped {
			t.Fatalf("instance 1 = %s %s after the last successful sync, want stopped (fenced)", in.status, time.Since(lastOK))
		}
		if in.spec.Image != "img" || in.spec.Desired != suanli.DesiredStopped {
			t.Errorf("fence stopped instance 1 with spec %+v, want its own spec, desired stopped", in.spec)
		}

		// Once the control plane answers again, its desired state applies.
		srv.setDown(nil)
		time.Sleep(40 * time.Second)
		if in, _ := rt.inst(1); in.status != suanli.StatusRunning {
			t.Errorf("instance 1 = %s after the control plane came back wanting it running", in.status)
		}
	})
}

func TestAgentPacesServerWithoutLongPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, 10*time.Second), newTestRuntime(t)
		srv.noHold = true
		srv.set(running(1))
		stop := startAgent(t, srv, rt, nil)
		defer stop()
		time.Sleep(time.Minute)
		if n := len(srv.requests()); n > 10 {
			t.Errorf("%d syncs in a minute against a server that does not hold them, want about 6", n)
		}
		rt.exit(1, 0)
		exited := time.Now()
		time.Sleep(5 * time.Second)
		if at, ok := srv.firstReport(1, suanli.StatusExited); !ok || at.Sub(exited) > time.Second {
			t.Errorf("exit reported after %s (ok=%v), want within a second", at.Sub(exited), ok)
		}
	})
}

type usageRuntime struct {
	*testRuntime
}

func (usageRuntime) Usage(ctx context.Context) (map[int64]suanli.UsageReport, error) {
	return map[int64]suanli.UsageReport{1: {TxBytes: 100, RxBytes: 7}}, nil
}

func TestAgentSendsUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newTestServer(t, 10*time.Second)
		srv.set(running(1))
		stop := startAgent(t, srv, usageRuntime{newTestRuntime(t)}, nil)
		defer stop()
		time.Sleep(15 * time.Second)
		for _, r := range srv.requests() {
			if len(r.Usage) != 1 || r.Usage[0].InstanceID != 1 || r.Usage[0].Seq != r.Seq || r.Usage[0].TxBytes != 100 {
				t.Errorf("seq %d usage = %+v, want instance 1's counters stamped with the seq", r.Seq, r.Usage)
			}
		}
	})
}

// TestAgentGPUTelemetry feeds the agent the recorded nvidia-smi samples of
// four H100s: an instance on GPUs 1 and 2 reports their mean utilisation,
// summed memory, the hotter one's temperature and their summed power.
func TestAgentGPUTelemetry(t *testing.T) {
	csv := readTestdata(t, "samples-h100-4.csv")
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, 10*time.Second), newTestRuntime(t)
		spec := running(1)
		spec.GPUIndexes = []int{1, 2}
		sim := running(2)
		sim.GPUIndexes, sim.Simulated = []int{0}, true
		srv.set(spec, sim)
		sampler := func(ctx context.Context) ([]agent.GPUSample, error) { return agent.ParseGPUSamples(csv) }
		stop := startAgent(t, srv, rt, func(c *agent.Config) { c.GPUSampler = sampler })
		defer stop()
		time.Sleep(15 * time.Second)
		r, _ := srv.report(1)
		want := suanli.Telemetry{GPUUtilPercent: 48.5, GPUMemoryMB: 71234, GPUTempC: 69, GPUPowerW: 721.05}
		if r.Telemetry == nil || !cmp.Equal(*r.Telemetry, want, cmpopts.EquateApprox(0, 1e-9)) {
			t.Errorf("instance 1 telemetry = %+v, want %+v over GPUs 1 and 2", r.Telemetry, want)
		}
		if r, _ := srv.report(2); r.Telemetry != nil {
			t.Errorf("simulated instance telemetry = %+v, want none", r.Telemetry)
		}
	})
}

// blackHole is a server whose syncs never answer (a network that drops
// everything): they end only when the agent gives up on them.
type blackHole struct {
	mu    sync.Mutex
	calls int
}

func (b *blackHole) Sync(ctx context.Context, req *suanli.SyncRequest) (*suanli.SyncResponse, error) {
	b.mu.Lock()
	b.calls++
	b.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (b *blackHole) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

func TestAgentGivesUpOnHungSyncAndFences(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := &blackHole{}, newTestRuntime(t)
		rt.add(1, suanli.StatusRunning) // running since before the agent started
		stop := startAgent(t, srv, rt, func(c *agent.Config) { c.FenceAfter = 60 * time.Second })
		defer stop()

		time.Sleep(50 * time.Second)
		if n := srv.count(); n < 2 {
			t.Errorf("%d sync attempts in 50s against a black hole, want the first given up on and retried", n)
		}
		if in, _ := rt.inst(1); in.status != suanli.StatusRunning {
			t.Errorf("instance 1 = %s before FenceAfter, want running", in.status)
		}
		time.Sleep(15 * time.Second)
		if in, _ := rt.inst(1); in.status != suanli.StatusStopped {
			t.Errorf("instance 1 = %s after FenceAfter with every sync hanging, want stopped", in.status)
		}
	})
}

// TestAgentStartWaitsForStopOnSameGPU: when the server stops one workload
// (preempted, with a grace) and starts another on the same GPU in one
// change, the agent starts the second only after the first has stopped, so
// two workloads never run on one GPU.
func TestAgentStartWaitsForStopOnSameGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := newTestServer(t, 10*time.Second), newTestRuntime(t)
		low := running(1)
		low.GPUIndexes = []int{0}
		other := running(3)
		other.GPUIndexes = []int{1}
		srv.set(low, other)
		stop := startAgent(t, srv, rt, nil)
		defer stop()
		time.Sleep(time.Second)
		if in, _ := rt.inst(1); in.status != suanli.StatusRunning {
			t.Fatalf("instance 1 = %s, want running", in.status)
		}
		rt.mu.Lock()
		rt.stopDelay[1] = 5 * time.Second // its workload uses its grace
		rt.mu.Unlock()
		preempted := low
		preempted.Desired = suanli.DesiredStopped
		high := running(2)
		high.GPUIndexes = []int{0}
		otherStopped := other
		otherStopped.Desired = suanli.DesiredStopped
		srv.set(preempted, high, otherStopped)
		time.Sleep(2 * time.Second)
		if _, ok := rt.inst(2); ok {
			if in, _ := rt.inst(2); in.status == suanli.StatusRunning {
				t.Fatal("instance 2 started on GPU 0 while instance 1 was still stopping there")
			}
		}
		time.Sleep(5 * time.Second)
		in2, _ := rt.inst(2)
		in1, _ := rt.inst(1)
		if in2.status != suanli.StatusRunning || in1.status != suanli.StatusStopped {
			t.Fatalf("after the grace: instance 1 %s, instance 2 %s; want stopped, running", in1.status, in2.status)
		}
		stoppedAt, _ := srv.firstReport(1, suanli.StatusStopped)
		runningAt, _ := srv.firstReport(2, suanli.StatusRunning)
		if runningAt.Before(stoppedAt) {
			t.Errorf("instance 2 reported running at %s, before instance 1 stopped at %s", runningAt, stoppedAt)
		}
	})
}
