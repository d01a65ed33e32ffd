package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/suanli/suanli"
	shttp "github.com/suanli/suanli/http"
)

// TestWatchdogFencesStoppedAgent stops a real agent process with SIGSTOP
// while its workload runs: the agent cannot fence, but its watchdog stops
// the workload after the lease runs out, before the control plane declares
// the host lost, and the agent, continued, reports it stopped.
func TestWatchdogFencesStoppedAgent(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	const fenceAfter, lostAfter = 4 * time.Second, 12 * time.Second
	startProc(t, filepath.Join(dir, "server.log"), regexp.MustCompile(`control plane at (\S+)`), "server", "--home", filepath.Join(dir, "server"),
		"--addr", addr, "--allow-simulated", "--heartbeat", "1s", "--suspect-after", "3s", "--lost-after", lostAfter.String(), "--settle-every", "200ms")

	url := "http://" + addr
	cfg, err := readConfig(filepath.Join(dir, "server"))
	if err != nil {
		t.Fatal(err)
	}
	op := shttp.NewClient(url, cfg.APIKey)
	ctx := t.Context()
	home := filepath.Join(dir, "agent")
	ag := joinAgent(t, op, url, home, filepath.Join(dir, "agent.log"), "--fence-after", fenceAfter.String(), "--light-heartbeats=false")
	defer func() {
		if t.Failed() {
			for _, f := range []string{"server.log", "agent.log", filepath.Join("agent", "agent", "watchdog.log")} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				t.Logf("%s:\n%s", f, b)
			}
		}
	}()
	price := suanli.Money(1_000_000)
	if _, err := op.ListMachine(ctx, 1, suanli.ListingUpdate{PriceGPU: &price}); err != nil {
		t.Fatal(err)
	}
	in, err := op.CreateInstance(ctx, suanli.InstanceCreate{OfferID: 1, Image: "x", GPUCount: 1, Cmd: []string{"sleep", "600"},
		Guards: suanli.Guards{IdleStopMinutes: -1}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "instance running", func() bool {
		got, err := op.FindInstanceByID(ctx, in.ID)
		return err == nil && got.Status == suanli.StatusRunning
	})
	pid, _ := instanceState(t, home, in.ID)
	if !alive(pid) {
		t.Fatalf("workload pid %d not running", pid)
	}

	stopped := time.Now()
	if err := ag.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The stopped agent cannot reap its child: a stopped workload is a zombie.
	waitFor(t, lostAfter, "the watchdog to stop the workload of the stopped agent", func() bool { return !running(pid) })
	took := time.Since(stopped)
	t.Logf("SIGSTOP of the agent → workload stopped by the watchdog: %.2fs (fence after %s, lost after %s)", took.Seconds(), fenceAfter, lostAfter)
	if took < fenceAfter-time.Second {
		t.Errorf("workload stopped %.2fs after the agent was, before the fence interval: not the watchdog's doing", took.Seconds())
	}
	waitFor(t, 5*time.Second, "watchdog.log to record the fence", func() bool {
		b, _ := os.ReadFile(filepath.Join(home, "agent", "watchdog.log"))
		return strings.Contains(string(b), "watchdog fenced")
	})
	if err := ag.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Continued within lost_after, the agent reports the fence as a stop
	// (not the workload's exit) and, the host never lost, runs it again.
	waitFor(t, 20*time.Second, "the continued agent to report the stop", func() bool {
		evs, err := op.InstanceEvents(ctx, in.ID)
		if err != nil {
			return false
		}
		for _, e := range evs {
			if e.Status == suanli.StatusExited || e.Status == suanli.StatusFailed {
				t.Fatalf("instance event %s (%s): a fence is a stop, not the workload's exit", e.Status, e.Message)
			}
			if e.Status == suanli.StatusStopped {
				return true
			}
		}
		return false
	})
}

// running reports whether pid is a live process (not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE …: comm may hold spaces, so read after the last ')'.
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}
