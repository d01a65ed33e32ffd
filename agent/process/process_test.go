package process_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/process"
	"github.com/suanli/suanli/agent/vault/vaulttest"
)

// helperEnv makes the test binary act as an earlier agent run: it starts one
// instance with a fresh Runtime and exits, leaving the process behind.
const helperEnv = "SUANLI_PROCESS_TEST_HELPER"

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		dir, script, _ := strings.Cut(v, "\n")
		r := process.New(dir, nil)
		err := r.Ensure(context.Background(), suanli.InstanceSpec{ID: 7, Desired: suanli.DesiredRunning, Cmd: []string{"sh", "-c", script}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func newRuntime(t *testing.T) (*process.Runtime, string) {
	t.Helper()
	dir := t.TempDir()
	r := process.New(dir, nil)
	t.Cleanup(func() {
		// Leave no process behind, whatever the test did.
		reps, _ := r.Status(context.Background())
		for _, rep := range reps {
			_ = r.Remove(context.Background(), rep.ID)
		}
	})
	return r, dir
}

func shSpec(id int64, script string) suanli.InstanceSpec {
	return suanli.InstanceSpec{ID: id, Desired: suanli.DesiredRunning, Cmd: []string{"sh", "-c", script}}
}

// report returns the runtime's report for id, or nil.
func report(t *testing.T, r *process.Runtime, id int64) *suanli.InstanceReport {
	t.Helper()
	reps, err := r.Status(t.Context())
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	for i := range reps {
		if reps[i].ID == id {
			return &reps[i]
		}
	}
	return nil
}

// waitStatus polls until instance id has the status, and returns its report.
func waitStatus(t *testing.T, r *process.Runtime, id int64, status string) suanli.InstanceReport {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rep := report(t, r, id)
		if rep != nil && rep.Status == status {
			return *rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %d: report %+v, want status %s", id, rep, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLog polls until instance id's log contains want, and returns the log.
func waitLog(t *testing.T, r *process.Runtime, id int64, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := r.ReadLog(t.Context(), id, 0, 1<<20)
		if err != nil {
			t.Fatalf("ReadLog: %v", err)
		}
		if strings.Contains(string(b), want) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %d: log %q does not contain %q", id, b, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

func readState(t *testing.T, dir string, id int64) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "instances", strconv.FormatInt(id, 10), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRunEnvAndLog(t *testing.T) {
	r, dir := newRuntime(t)
	spec := shSpec(1, `echo "id=$SUANLI_INSTANCE_ID foo=$FOO home=$HOME pwd=$(pwd) cuda=[$CUDA_VISIBLE_DEVICES] gpus=$SUANLI_GPU_INDEXES secret=[$AGENT_SECRET]"; echo to-stderr >&2; exit 3`)
	spec.Env = map[string]string{"FOO": "bar baz", "SUANLI_INSTANCE_ID": "99"}
	spec.GPUIndexes = []int{0, 1}
	spec.GPUUUIDs = []string{"GPU-aaa", "GPU-bbb"}
	t.Setenv("AGENT_SECRET", "must-not-leak")
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	rep := waitStatus(t, r, 1, suanli.StatusExited)
	if rep.ExitCode == nil || *rep.ExitCode != 3 {
		t.Errorf("exit code = %v, want 3", rep.ExitCode)
	}
	if rep.StartedAt == nil {
		t.Error("StartedAt not set")
	}
	work := filepath.Join(dir, "instances", "1", "work")
	log := waitLog(t, r, 1, "to-stderr")
	want := fmt.Sprintf("id=1 foo=bar baz home=%s pwd=%s cuda=[GPU-aaa,GPU-bbb] gpus=0,1 secret=[]\n", work, work)
	if !strings.HasPrefix(log, want) {
		t.Errorf("log = %q, want it to start with %q", log, want)
	}

	// ReadLog pages through the log.
	b, err := r.ReadLog(t.Context(), 1, 3, 2)
	if err != nil || string(b) != "1 " {
		t.Errorf("ReadLog(1, 3, 2) = %q, %v; want %q", b, err, "1 ")
	}
	b, err = r.ReadLog(t.Context(), 1, int64(len(log)), 100)
	if err != nil || len(b) != 0 {
		t.Errorf("ReadLog at the end = %q, %v; want nothing", b, err)
	}
	if _, err := r.ReadLog(t.Context(), 404, 0, 100); suanli.ErrorCode(err) != suanli.ENOTFOUND {
		t.Errorf("ReadLog(unknown) error = %v, want not_found", err)
	}
}

// TestDiskTelemetry: bytes the instance's process group writes and reads
// (here by children the shell has reaped) show in its telemetry, from
// /proc/<pid>/io; network bytes stay unknown.
func TestDiskTelemetry(t *testing.T) {
	if _, err := os.ReadFile("/proc/self/io"); err != nil {
		t.Skipf("skipping: no per-process I/O accounting in this kernel: %v", err)
	}
	r, dir := newRuntime(t)
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(dir, &sfs); err == nil && sfs.Type == 0x01021994 { // TMPFS_MAGIC
		t.Skipf("skipping: %s is on tmpfs, whose writes never reach a disk and are not counted", dir)
	}
	const size = 4 << 20
	script := `dd if=/dev/zero of=blob bs=65536 count=64 conv=fsync 2>/dev/null &&
dd if=blob of=/dev/null bs=65536 iflag=direct 2>/dev/null && echo done; exec sleep 60`
	if err := r.Ensure(t.Context(), shSpec(1, script)); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	waitLog(t, r, 1, "done")
	deadline := time.Now().Add(10 * time.Second)
	for {
		rep := report(t, r, 1)
		tm := rep.Telemetry
		if tm != nil && tm.DiskWriteBytes >= size && tm.DiskReadBytes >= size {
			if tm.DiskWriteBytes > 4*size || tm.NetRxBytes != 0 || tm.NetTxBytes != 0 {
				t.Errorf("telemetry = %+v, want about %d bytes written and no network bytes", tm, size)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("telemetry = %+v after writing and reading %d bytes, want them counted", tm, size)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestSimulatedGPUsHidden(t *testing.T) {
	r, _ := newRuntime(t)
	spec := shSpec(1, `echo "cuda=[${CUDA_VISIBLE_DEVICES-unset}] gpus=$SUANLI_GPU_INDEXES"`)
	spec.GPUIndexes, spec.GPUUUIDs, spec.Simulated = []int{1}, []string{"GPU-sim-1-rtx-4090"}, true
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, r, 1, suanli.StatusExited)
	if log := waitLog(t, r, 1, "cuda="); log != "cuda=[] gpus=1\n" {
		t.Errorf("log = %q, want simulated GPUs hidden from CUDA", log)
	}
}

func TestEnsureIdempotent(t *testing.T) {
	r, _ := newRuntime(t)
	spec := shSpec(1, `echo started; exec sleep 60`)
	for range 3 {
		if err := r.Ensure(t.Context(), spec); err != nil {
			t.Fatal(err)
		}
	}
	waitLog(t, r, 1, "started")
	rep := waitStatus(t, r, 1, suanli.StatusRunning)
	if rep.Telemetry == nil {
		t.Error("a running instance has no telemetry")
	}
	if log, _ := r.ReadLog(t.Context(), 1, 0, 1000); string(log) != "started\n" {
		t.Errorf("log = %q: started more than once", log)
	}
}

func TestStopGraceful(t *testing.T) {
	r, dir := newRuntime(t)
	spec := shSpec(1, `trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	spec.StopGrace = 5 * time.Second
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	waitLog(t, r, 1, "ready")
	pid := int(readState(t, dir, 1)["pid"].(float64))

	spec.Desired = suanli.DesiredStopped
	start := time.Now()
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatalf("Ensure(stopped): %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stop took %s: the trap should have ended it well within the grace", d)
	}
	rep := report(t, r, 1)
	if rep.Status != suanli.StatusStopped || rep.ExitCode != nil {
		t.Errorf("after stop: %+v, want stopped without exit code", rep)
	}
	waitLog(t, r, 1, "got TERM")
	if pidAlive(pid) {
		t.Errorf("pid %d still alive after stop", pid)
	}
	// Stopping again, and stopping what never ran, are no-ops.
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Errorf("second stop: %v", err)
	}
	if err := r.Ensure(t.Context(), suanli.InstanceSpec{ID: 2, Desired: suanli.DesiredStopped}); err != nil {
		t.Errorf("stop of a new instance: %v", err)
	}
	if rep := report(t, r, 2); rep == nil || rep.Status != suanli.StatusStopped {
		t.Errorf("new stopped instance: %+v, want stopped", rep)
	}

	// Start again: the log is appended to.
	spec.Desired = suanli.DesiredRunning
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, r, 1, suanli.StatusRunning)
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := r.ReadLog(t.Context(), 1, 0, 1000)
		if strings.Count(string(b), "ready") == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log after restart = %q, want two ready lines", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	r, dir := newRuntime(t)
	// The shell and its sleeps ignore SIGTERM; a background child in the
	// same group must go too.
	spec := shSpec(1, `trap '' TERM; sleep 60 & echo child=$!; echo ready; while :; do sleep 0.05; done`)
	spec.StopGrace = 300 * time.Millisecond
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	log := waitLog(t, r, 1, "ready")
	var child int
	fmt.Sscanf(log[strings.Index(log, "child="):], "child=%d", &child)
	pid := int(readState(t, dir, 1)["pid"].(float64))

	spec.Desired = suanli.DesiredStopped
	start := time.Now()
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatalf("Ensure(stopped): %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("stop took %s, want about the 300ms grace", d)
	}
	if rep := report(t, r, 1); rep.Status != suanli.StatusStopped {
		t.Errorf("after stop: %+v, want stopped", rep)
	}
	for _, p := range []int{pid, child} {
		if p == 0 || pidAlive(p) {
			t.Errorf("pid %d still alive after SIGKILL (leader %d, child %d)", p, pid, child)
		}
	}
}

func TestStopEndsEarlyWithContext(t *testing.T) {
	r, _ := newRuntime(t)
	spec := shSpec(1, `trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	spec.StopGrace = time.Minute
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	waitLog(t, r, 1, "ready")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	spec.Desired = suanli.DesiredStopped
	start := time.Now()
	if err := r.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop with a cancelled context took %s", d)
	}
	if rep := report(t, r, 1); rep.Status != suanli.StatusStopped {
		t.Errorf("after stop: %+v, want stopped", rep)
	}
}

func TestExitedStaysExited(t *testing.T) {
	r, _ := newRuntime(t)
	spec := shSpec(1, `echo run; exit 5`)
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, r, 1, suanli.StatusExited)
	// Running again for the same instance does not restart finished work.
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	if rep := report(t, r, 1); rep.Status != suanli.StatusExited || rep.ExitCode == nil || *rep.ExitCode != 5 {
		t.Errorf("after Ensure(running) of an exited instance: %+v, want still exited with code 5", rep)
	}
	// Stopped, then running, starts it again.
	spec.Desired = suanli.DesiredStopped
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	if rep := report(t, r, 1); rep.Status != suanli.StatusStopped || rep.ExitCode != nil {
		t.Errorf("after Ensure(stopped) of an exited instance: %+v, want stopped", rep)
	}
	spec.Desired = suanli.DesiredRunning
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, r, 1, suanli.StatusExited)
	if log, _ := r.ReadLog(t.Context(), 1, 0, 100); string(log) != "run\nrun\n" {
		t.Errorf("log = %q, want two runs", log)
	}
}

// TestEndedAtReported: a stopped or exited instance reports when it ended,
// so that one stopped during an outage (a fence) is billed to then.
func TestEndedAtReported(t *testing.T) {
	r, _ := newRuntime(t)
	before := time.Now()
	if err := r.Ensure(t.Context(), shSpec(1, `sleep 0.2; exit 3`)); err != nil {
		t.Fatal(err)
	}
	if err := r.Ensure(t.Context(), shSpec(2, `sleep 60`)); err != nil {
		t.Fatal(err)
	}
	if rep := report(t, r, 2); rep.EndedAt != nil {
		t.Errorf("running instance reports EndedAt %v", rep.EndedAt)
	}
	exited := waitStatus(t, r, 1, suanli.StatusExited)
	spec := shSpec(2, `sleep 60`)
	spec.Desired = suanli.DesiredStopped
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	stopped := report(t, r, 2)
	for _, rep := range []*suanli.InstanceReport{&exited, stopped} {
		if rep.EndedAt == nil || rep.EndedAt.Before(before.Add(200*time.Millisecond)) || rep.EndedAt.After(after) {
			t.Errorf("instance %d (%s): EndedAt %v, want between %v and %v", rep.ID, rep.Status, rep.EndedAt, before.Add(200*time.Millisecond), after)
		}
	}
	// A stop of an exited instance keeps when it ended.
	spec1 := shSpec(1, "")
	spec1.Desired = suanli.DesiredStopped
	if err := r.Ensure(t.Context(), spec1); err != nil {
		t.Fatal(err)
	}
	if rep := report(t, r, 1); rep.Status != suanli.StatusStopped || rep.EndedAt == nil || !rep.EndedAt.Equal(*exited.EndedAt) {
		t.Errorf("exited, then stopped: %+v, want stopped with the exit's EndedAt %v", rep, exited.EndedAt)
	}
}

func TestExitBySignal(t *testing.T) {
	r, _ := newRuntime(t)
	if err := r.Ensure(t.Context(), shSpec(1, `kill -KILL $$`)); err != nil {
		t.Fatal(err)
	}
	rep := waitStatus(t, r, 1, suanli.StatusExited)
	if rep.ExitCode == nil || *rep.ExitCode != 137 || !strings.Contains(rep.Message, "killed") {
		t.Errorf("report = %+v (exit %v), want exit code 137 and a message saying it was killed", rep, rep.ExitCode)
	}
}

func TestRemove(t *testing.T) {
	r, dir := newRuntime(t)
	spec := shSpec(1, `echo ready; echo data > file; chmod 0500 .; exec sleep 60`)
	spec.StopGrace = time.Second
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	waitLog(t, r, 1, "ready")
	waitStatus(t, r, 1, suanli.StatusRunning)
	pid := int(readState(t, dir, 1)["pid"].(float64))
	if err := r.Remove(t.Context(), 1); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "instances", "1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("instance directory still there: %v", err)
	}
	if pidAlive(pid) {
		t.Errorf("pid %d alive after Remove", pid)
	}
	if rep := report(t, r, 1); rep != nil {
		t.Errorf("Status after Remove lists %+v", rep)
	}
	if err := r.Remove(t.Context(), 1); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}

func TestBadSpecs(t *testing.T) {
	r, _ := newRuntime(t)
	err := r.Ensure(t.Context(), suanli.InstanceSpec{ID: 1, Desired: suanli.DesiredRunning})
	if suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(err.Error(), "needs a command: pass one after --") {
		t.Errorf("Ensure without a command: %v, want invalid with the fix", err)
	}
	if rep := report(t, r, 1); rep == nil || rep.Status != suanli.StatusFailed || !strings.Contains(rep.Message, "needs a command") {
		t.Errorf("report after a failed start: %+v, want failed with the message", rep)
	}
	// Stopping a failed instance makes it stopped.
	if err := r.Ensure(t.Context(), suanli.InstanceSpec{ID: 1, Desired: suanli.DesiredStopped}); err != nil {
		t.Fatal(err)
	}
	if rep := report(t, r, 1); rep.Status != suanli.StatusStopped {
		t.Errorf("report after stopping a failed instance: %+v, want stopped", rep)
	}

	err = r.Ensure(t.Context(), suanli.InstanceSpec{ID: 2, Desired: suanli.DesiredRunning, Cmd: []string{"no-such-command-here"}})
	if suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(err.Error(), "not found in PATH") {
		t.Errorf("Ensure with a missing command: %v, want invalid, not found", err)
	}
	err = r.Ensure(t.Context(), suanli.InstanceSpec{ID: 3, Desired: suanli.DesiredRunning, Cmd: []string{"true"}, Env: map[string]string{"A=B": "c"}})
	if suanli.ErrorCode(err) != suanli.EINVALID {
		t.Errorf("Ensure with a bad env name: %v, want invalid", err)
	}
	for _, spec := range []suanli.InstanceSpec{{ID: 0, Desired: "running"}, {ID: 4, Desired: "destroyed"}} {
		if err := r.Ensure(t.Context(), spec); suanli.ErrorCode(err) != suanli.EINVALID {
			t.Errorf("Ensure(%+v) = %v, want invalid", spec, err)
		}
	}
}

// startInEarlierAgent starts instance 7 running script from a separate
// process, which exits at once, as an agent that restarts would.
func startInEarlierAgent(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir+"\n"+script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper agent: %v: %s", err, out)
	}
}

func TestAdoptAfterRestart(t *testing.T) {
	dir := t.TempDir()
	startInEarlierAgent(t, dir, `trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	pid := int(readState(t, dir, 7)["pid"].(float64))
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })

	r := process.New(dir, nil)
	rep := waitStatus(t, r, 7, suanli.StatusRunning)
	if rep.StartedAt == nil {
		t.Error("adopted instance has no StartedAt")
	}
	waitLog(t, r, 7, "ready")
	// Ensure(running) leaves the adopted process alone.
	spec := shSpec(7, "echo must not start twice")
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	spec.Desired = suanli.DesiredStopped
	spec.StopGrace = 5 * time.Second
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatalf("stop of an adopted instance: %v", err)
	}
	if rep := report(t, r, 7); rep.Status != suanli.StatusStopped {
		t.Errorf("after stop: %+v, want stopped", rep)
	}
	log := waitLog(t, r, 7, "got TERM")
	if strings.Contains(log, "must not start twice") {
		t.Errorf("log = %q: the adopted instance was started again", log)
	}
	if pidAlive(pid) {
		t.Errorf("pid %d alive after stop", pid)
	}
	// A third agent run sees it stopped.
	if rep := report(t, process.New(dir, nil), 7); rep == nil || rep.Status != suanli.StatusStopped {
		t.Errorf("after another restart: %+v, want stopped", rep)
	}
}

func TestAdoptedExitNoticed(t *testing.T) {
	dir := t.TempDir()
	startInEarlierAgent(t, dir, `echo ready; while [ ! -e stop-now ]; do sleep 0.05; done; exit 4`)
	pid := int(readState(t, dir, 7)["pid"].(float64))
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })

	r := process.New(dir, nil)
	waitStatus(t, r, 7, suanli.StatusRunning)
	if err := os.WriteFile(filepath.Join(dir, "instances", "7", "work", "stop-now"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rep := waitStatus(t, r, 7, suanli.StatusExited)
	if rep.ExitCode != nil || !strings.Contains(rep.Message, "exit code is unknown") {
		t.Errorf("report = %+v, want exited with an unknown exit code explained", rep)
	}
	if err := r.Remove(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
}

func TestExecAndPreflight(t *testing.T) {
	r, _ := newRuntime(t)
	ctx := t.Context()
	spec := shSpec(41, "echo started; sleep 30")
	spec.Env = map[string]string{"GREETING": "hi"}
	if err := r.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, r, 41, suanli.StatusRunning)
	var out strings.Builder
	code, err := r.Exec(ctx, 41, []string{"sh", "-c", `echo "$GREETING $SUANLI_INSTANCE_ID in $(basename $PWD)"; exit 3`}, nil, &out, &out)
	if err != nil || code != 3 || out.String() != "hi 41 in work\n" {
		t.Errorf("Exec = %d, %v, %q; want 3 and the instance's env and dir", code, err, out.String())
	}
	if _, err := r.Exec(ctx, 999, []string{"true"}, nil, &out, &out); suanli.ErrorCode(err) != suanli.ENOTFOUND {
		t.Errorf("Exec on an unknown instance: %v", err)
	}
	if err := r.Preflight(ctx, suanli.InstanceSpec{ID: 5}); suanli.ErrorCode(err) != suanli.EINVALID {
		t.Errorf("Preflight without a command: %v", err)
	}
	if err := r.Preflight(ctx, suanli.InstanceSpec{ID: 5, Cmd: []string{"no-such-command-xyz"}}); err == nil {
		t.Errorf("Preflight of a missing command passed")
	}
	if err := r.Preflight(ctx, suanli.InstanceSpec{ID: 5, Cmd: []string{"sh", "-c", "true"}}); err != nil {
		t.Errorf("Preflight of sh: %v", err)
	}
}

func TestVolumesSurviveAndWipe(t *testing.T) {
	r, dir := newRuntime(t)
	ctx := t.Context()
	if err := r.EnsureVolume(ctx, suanli.VolumeSpec{ID: 9, Name: "data", SizeGB: 1}); err != nil {
		t.Fatal(err)
	}
	spec := shSpec(51, `echo kept > data/file; echo "$SUANLI_VOLUME_DATA" > where; sleep 30`)
	spec.Volumes = []suanli.VolumeMount{{Name: "data", Path: "/data", ID: 9}}
	if err := r.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, r, 51, suanli.StatusRunning)
	file := filepath.Join(dir, "volumes", "9", "file")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if b, err := os.ReadFile(file); err == nil && string(b) == "kept\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workload's write to /data did not reach the volume")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.Remove(ctx, 51); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "kept\n" {
		t.Fatalf("volume lost with its instance: %q %v", b, err)
	}
	ids, _ := r.Volumes(ctx)
	if len(ids) != 1 || ids[0] != 9 {
		t.Fatalf("Volumes = %v", ids)
	}
	rel, err := r.RemoveVolume(ctx, 9)
	if err != nil || rel.Method != suanli.ReleaseOverwrite || rel.ID != 9 || !strings.Contains(rel.Detail, "overwrote 1 files (5 bytes)") {
		t.Fatalf("RemoveVolume: %+v %v", rel, err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("volume file still there: %v", err)
	}
}

// TestEncryptedDiskAndVolume runs a workload on an encrypted work directory
// with an encrypted volume (a real loop image and the kernel's fscrypt):
// the workload reads and writes plaintext, the image holds none of it, the
// volume outlives the instance, and both releases are crypto-erases.
func TestEncryptedDiskAndVolume(t *testing.T) {
	v, vdir := vaulttest.Open(t)
	r, dir := newRuntime(t)
	r.Vault = v
	ctx := t.Context()
	marker := "plaintext-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := r.EnsureVolume(ctx, suanli.VolumeSpec{ID: 4, Name: "data", Key: vaulttest.Key(t)}); err != nil {
		t.Fatal(err)
	}
	spec := shSpec(61, `for i in $(seq 2000); do echo `+marker+`; done > disk.txt; cp disk.txt data/vol.txt; sync; echo written; sleep 30`)
	spec.DiskKey = vaulttest.Key(t)
	spec.Volumes = []suanli.VolumeMount{{Name: "data", Path: "/data", ID: 4}}
	if err := r.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, r, 61, suanli.StatusRunning)
	waitLog(t, r, 61, "written")
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString(spec.DiskKey))) || bytes.Contains(b, spec.DiskKey) {
				t.Errorf("%s holds the disk key: the host's disk must never hold it", p)
			}
		}
		return nil
	})
	exec.Command("sync").Run()
	img, err := os.ReadFile(filepath.Join(vdir, "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(img), marker) {
		t.Fatalf("the workload's plaintext is on the image: the disk is not encrypted")
	}
	rel, err := r.Release(ctx, 61)
	if err != nil || rel.Method != suanli.ReleaseCryptoErase || rel.Kind != suanli.ReleaseInstance || !strings.Contains(rel.Detail, "1 file") {
		t.Fatalf("Release = %+v, %v; want a crypto-erase of one file", rel, err)
	}
	if objs, _ := v.Objects(); slices.Contains(objs, "instance-61") || !slices.Contains(objs, "volume-4") {
		t.Fatalf("vault objects after the release: %v; want the volume only", objs)
	}
	if ids, _ := r.Volumes(ctx); !slices.Contains(ids, 4) {
		t.Fatalf("Volumes = %v, want the encrypted volume 4", ids)
	}
	vrel, err := r.RemoveVolume(ctx, 4)
	if err != nil || vrel.Method != suanli.ReleaseCryptoErase || vrel.ID != 4 {
		t.Fatalf("RemoveVolume = %+v, %v; want a crypto-erase", vrel, err)
	}
	if ids, _ := r.Volumes(ctx); len(ids) != 0 {
		t.Errorf("Volumes after removal = %v", ids)
	}
}

// TestPlainDiskOverwritten: without a vault, release overwrites the work
// files (not the volumes linked into the work directory) and says so.
func TestPlainDiskOverwritten(t *testing.T) {
	r, dir := newRuntime(t)
	ctx := t.Context()
	if err := r.EnsureVolume(ctx, suanli.VolumeSpec{ID: 5, Name: "keep"}); err != nil {
		t.Fatal(err)
	}
	spec := shSpec(62, `echo 12345 > a; echo kept > keep/b; echo done; sleep 30`)
	spec.Volumes = []suanli.VolumeMount{{Name: "keep", Path: "/keep", ID: 5}}
	if err := r.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	waitLog(t, r, 62, "done")
	rel, err := r.Release(ctx, 62)
	if err != nil || rel.Method != suanli.ReleaseOverwrite || !strings.Contains(rel.Detail, "overwrote 1 work files (6 bytes)") {
		t.Fatalf("Release = %+v, %v", rel, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "volumes", "5", "b")); err != nil || string(b) != "kept\n" {
		t.Errorf("the volume's file after the instance's release: %q %v", b, err)
	}
	if rel, err := r.Release(ctx, 62); err != nil || rel.Method != "" {
		t.Errorf("second Release = %+v, %v; want nothing done", rel, err)
	}
}
