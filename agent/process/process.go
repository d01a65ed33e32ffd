package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
	"github.com/suanli/suanli/agent/vault"
)

// DefaultStopGrace is how long a stop waits between SIGTERM and SIGKILL when
// the spec names no grace.
const DefaultStopGrace = 10 * time.Second

// killWait is how long a stop waits for the process group to go after
// SIGKILL before it reports failure.
const killWait = 5 * time.Second

// defaultPATH is the PATH an instance gets unless its spec sets one.
const defaultPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// telemetryEvery is the shortest interval over which CPU use is measured;
// Status calls in between report the previous sample.
const telemetryEvery = 2 * time.Second

var (
	_ agent.Runtime       = (*Runtime)(nil)
	_ agent.Releaser      = (*Runtime)(nil)
	_ agent.VolumeManager = (*Runtime)(nil)
)

// Runtime runs instances as child processes under one directory. It is safe
// for concurrent use; per the agent.Runtime contract the caller does not run
// two operations on the same instance at once. Use New; the zero value is
// not usable.
type Runtime struct {
	dir    string
	logger *slog.Logger

	// Now returns the current time (time.Now by default). Set it before the
	// first call.
	Now func() time.Time
	// Vault, when set before the first call, encrypts each instance's work
	// directory and each volume with the key the control plane sends
	// (InstanceSpec.DiskKey, VolumeSpec.Key), so that release is a
	// crypto-erase. Instances and volumes made without a key, or before the
	// vault was set, stay plain and are overwritten on release.
	Vault *vault.Vault

	mu     sync.Mutex
	loaded bool
	bootID string
	insts  map[int64]*instance
}

// instance is one instance directory and what the runtime knows about it.
// Its fields are guarded by Runtime.mu.
type instance struct {
	id   int64
	dir  string
	spec suanli.InstanceSpec
	st   state
	// done is closed when the child started by this Runtime has been
	// reaped; nil for a process adopted from an earlier agent run.
	done chan struct{}

	tele     *suanli.Telemetry
	teleAt   time.Time
	teleCPU  uint64
	teleSeen bool
}

// state is an instance's persisted state (state.json).
type state struct {
	Status        string     `json:"status"` // running, stopped, exited, failed
	PID           int        `json:"pid,omitempty"`
	StartTicks    uint64     `json:"start_ticks,omitempty"`
	BootID        string     `json:"boot_id,omitempty"`
	StartedAt     *time.Time `json:"started_at,omitempty"`
	EndedAt       *time.Time `json:"ended_at,omitempty"` // when the process ended, when known
	ExitCode      *int       `json:"exit_code,omitempty"`
	Message       string     `json:"message,omitempty"`
	StopRequested bool       `json:"stop_requested,omitempty"`
}

// New returns a Runtime keeping its instances under dir/instances. Nothing is
// read or created until the first call; instances left by an earlier Runtime
// on the same dir are found then.
func New(dir string, logger *slog.Logger) *Runtime {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Runtime{dir: dir, logger: logger, Now: time.Now, insts: map[int64]*instance{}}
}

// Name returns "process".
func (r *Runtime) Name() string { return "process" }

// Ensure brings the instance to spec.Desired. Running starts spec.Cmd unless
// it runs already or has exited: a workload that ended by itself stays
// "exited" (with its exit code) until it is asked to stop, and starts again
// on the next running, so that an exit is reported rather than hidden by a
// restart loop. Stopped sends SIGTERM to the instance's process group and
// SIGKILL after spec.StopGrace (DefaultStopGrace when 0), or at once if ctx
// ends first. The spec is saved and used for later starts.
// Errors are EINVALID for a spec this runtime cannot run (no command, a
// command not found) and plain errors for I/O failures.
func (r *Runtime) Ensure(ctx context.Context, spec suanli.InstanceSpec) error {
	if spec.ID <= 0 {
		return suanli.Errorf(suanli.EINVALID, "instance id %d: must be positive", spec.ID)
	}
	if spec.Desired != suanli.DesiredRunning && spec.Desired != suanli.DesiredStopped {
		return suanli.Errorf(suanli.EINVALID, "instance %d: desired state %q: the process runtime knows running and stopped", spec.ID, spec.Desired)
	}
	r.mu.Lock()
	if err := r.loadLocked(); err != nil {
		r.mu.Unlock()
		return err
	}
	inst, err := r.instanceLocked(spec)
	if err != nil {
		r.mu.Unlock()
		return err
	}
	r.refreshLocked(inst)
	if spec.Desired == suanli.DesiredRunning {
		defer r.mu.Unlock()
		if inst.st.Status == suanli.StatusRunning || inst.st.Status == suanli.StatusExited {
			return nil
		}
		return r.startLocked(inst)
	}
	if inst.st.Status != suanli.StatusRunning {
		if inst.st.Status != suanli.StatusStopped {
			inst.st = state{Status: suanli.StatusStopped, StartedAt: inst.st.StartedAt, EndedAt: inst.st.EndedAt}
			r.saveStateLocked(inst)
		}
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	return r.stop(ctx, inst)
}

// Remove is Release without the report.
func (r *Runtime) Remove(ctx context.Context, id int64) error {
	_, err := r.Release(ctx, id)
	return err
}

// Release stops the instance as Ensure does, makes its work files
// unrecoverable — a crypto-erase when they were encrypted (Vault), else an
// overwrite with zeros — and deletes its directory: work files, log and
// state. Volumes linked into the work directory are not touched. An unknown
// instance is not an error (its Release has no Method).
func (r *Runtime) Release(ctx context.Context, id int64) (suanli.Release, error) {
	rel := suanli.Release{Kind: suanli.ReleaseInstance, ID: id}
	r.mu.Lock()
	if err := r.loadLocked(); err != nil {
		r.mu.Unlock()
		return rel, err
	}
	inst := r.insts[id]
	if inst == nil {
		r.mu.Unlock()
		return rel, nil
	}
	r.refreshLocked(inst)
	running := inst.st.Status == suanli.StatusRunning
	r.mu.Unlock()
	if running {
		if err := r.stop(ctx, inst); err != nil {
			return rel, err
		}
	}
	if err := r.eraseWork(inst, &rel); err != nil {
		return rel, fmt.Errorf("instance %d: %w", id, err)
	}
	if err := removeAll(inst.dir); err != nil {
		return rel, fmt.Errorf("instance %d: delete %s: %w", id, inst.dir, err)
	}
	r.mu.Lock()
	if r.insts[id] == inst {
		delete(r.insts, id)
	}
	r.mu.Unlock()
	r.logger.Info("instance removed", "instance_id", id, "release", rel.Method)
	return rel, nil
}

// Status reports every instance under the runtime's directory, by id. A
// process started by an earlier agent run is reported running while it
// lives; once gone it is stopped (if a stop was asked) or exited with no
// exit code. Running instances carry CPU, memory and storage I/O telemetry
// for their whole process group (100% CPU is one core; disk bytes from
// /proc/<pid>/io, counted over the current run). Network bytes are left
// zero: Linux counts them per network namespace, and this runtime's
// instances share the host's.
func (r *Runtime) Status(ctx context.Context) ([]suanli.InstanceReport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.loadLocked(); err != nil {
		return nil, err
	}
	now := r.Now()
	var stale map[int]bool
	for _, inst := range r.insts {
		r.refreshLocked(inst)
		if inst.st.Status == suanli.StatusRunning && now.Sub(inst.teleAt) >= telemetryEvery {
			if stale == nil {
				stale = map[int]bool{}
			}
			stale[inst.st.PID] = true
		}
	}
	usage := scanGroups(stale)
	reports := make([]suanli.InstanceReport, 0, len(r.insts))
	for _, inst := range r.insts {
		rep := suanli.InstanceReport{
			ID:        inst.id,
			Status:    inst.st.Status,
			Message:   inst.st.Message,
			ExitCode:  inst.st.ExitCode,
			StartedAt: inst.st.StartedAt,
			EndedAt:   inst.st.EndedAt,
		}
		if inst.st.Status == suanli.StatusRunning {
			if u, ok := usage[inst.st.PID]; ok {
				inst.sampleLocked(u, now)
			}
			if inst.tele != nil {
				t := *inst.tele // a copy: the caller may change it
				rep.Telemetry = &t
			}
		}
		reports = append(reports, rep)
	}
	sort.Slice(reports, func(i, j int) bool { return reports[i].ID < reports[j].ID })
	return reports, nil
}

// ReadLog returns up to max bytes of the instance's log from offset. An
// instance that never started has an empty log; an unknown one is
// ENOTFOUND.
func (r *Runtime) ReadLog(ctx context.Context, id int64, offset int64, max int) ([]byte, error) {
	if offset < 0 {
		return nil, suanli.Errorf(suanli.EINVALID, "log offset %d: must not be negative", offset)
	}
	r.mu.Lock()
	err := r.loadLocked()
	inst := r.insts[id]
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if inst == nil {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "instance %d is not on this machine", id)
	}
	f, err := os.Open(filepath.Join(inst.dir, "log"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("instance %d: read log: %w", id, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("instance %d: read log: %w", id, err)
	}
	n := min(int64(max), fi.Size()-offset)
	if n <= 0 {
		return nil, nil
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, offset)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("instance %d: read log: %w", id, err)
	}
	return buf[:got], nil
}

// tokenPath is where instance id's token file lives (SUANLI_TOKEN_FILE):
// beside its work directory, removed with it.
func (r *Runtime) tokenPath(id int64) string {
	return filepath.Join(r.dir, "instances", strconv.FormatInt(id, 10), "token")
}

// WriteToken replaces instance id's token file (agent.TokenWriter), so a
// running workload reads a fresh token without a restart. It does nothing
// for an instance this runtime does not hold yet (its start writes it).
func (r *Runtime) WriteToken(ctx context.Context, id int64, token string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.insts[id] == nil {
		return fmt.Errorf("instance %d: not created yet", id)
	}
	return writeToken(r.tokenPath(id), token)
}

// instanceLocked returns the instance for spec, creating its directory on
// first use, and saves spec as its latest.
func (r *Runtime) instanceLocked(spec suanli.InstanceSpec) (*instance, error) {
	inst := r.insts[spec.ID]
	if inst == nil {
		dir := filepath.Join(r.dir, "instances", strconv.FormatInt(spec.ID, 10))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("instance %d: create directory: %w", spec.ID, err)
		}
		inst = &instance{id: spec.ID, dir: dir, st: state{Status: suanli.StatusStopped}}
		r.insts[spec.ID] = inst
		r.saveStateLocked(inst)
	}
	if err := r.openWork(inst, spec); err != nil {
		return nil, fmt.Errorf("instance %d: %w", spec.ID, err)
	}
	inst.spec = spec
	// The saved copy restarts the workload after an agent restart; the
	// disk key and registry credentials stay in memory only (the disk key
	// must never reach the host's disk: that is what makes release a
	// crypto-erase).
	saved := spec
	saved.DiskKey, saved.RegistryAuth = nil, nil
	if err := writeJSON(filepath.Join(inst.dir, "spec.json"), saved); err != nil {
		return nil, fmt.Errorf("instance %d: save spec: %w", spec.ID, err)
	}
	return inst, nil
}

// startLocked starts inst.spec.Cmd. A spec that cannot start marks the
// instance failed with the error's message.
func (r *Runtime) startLocked(inst *instance) error {
	fail := func(err error) error {
		inst.st = state{Status: suanli.StatusFailed, Message: err.Error()}
		r.saveStateLocked(inst)
		return err
	}
	spec := inst.spec
	if len(spec.Cmd) == 0 {
		return fail(suanli.Errorf(suanli.EINVALID,
			"instance %d: the process runtime needs a command: pass one after -- (suanli create OFFER --image IMAGE -- CMD ARGS…)", spec.ID))
	}
	env, err := instanceEnv(spec, filepath.Join(inst.dir, "work"), r.tokenPath(spec.ID))
	if err != nil {
		return fail(err)
	}
	if spec.Token != "" {
		if err := writeToken(r.tokenPath(spec.ID), spec.Token); err != nil {
			return fail(fmt.Errorf("instance %d: write token: %w", spec.ID, err))
		}
	}
	volEnv, err := r.mountVolumes(spec, filepath.Join(inst.dir, "work"))
	if err != nil {
		return fail(err)
	}
	env = append(env, volEnv...)
	path, err := lookPath(spec.Cmd[0], envValue(env, "PATH"))
	if err != nil {
		return fail(suanli.Errorf(suanli.EINVALID, "instance %d: %v", spec.ID, err))
	}
	logf, err := os.OpenFile(filepath.Join(inst.dir, "log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fail(fmt.Errorf("instance %d: open log: %w", spec.ID, err))
	}
	// The child writes to the log file itself, not through a pipe to the
	// agent, so that it keeps running and logging across agent restarts.
	cmd := &exec.Cmd{
		Path:        path,
		Args:        spec.Cmd,
		Dir:         filepath.Join(inst.dir, "work"),
		Env:         env,
		Stdout:      logf,
		Stderr:      logf,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return fail(suanli.Errorf(suanli.EINVALID, "instance %d: start %s: %v", spec.ID, spec.Cmd[0], err))
	}
	pid := cmd.Process.Pid
	now := r.Now()
	inst.st = state{Status: suanli.StatusRunning, PID: pid, BootID: r.bootID, StartedAt: &now}
	if s, err := readStat(pid); err == nil {
		inst.st.StartTicks = s.startTicks
	}
	inst.done = make(chan struct{})
	inst.teleAt, inst.teleSeen, inst.tele = time.Time{}, false, nil
	r.saveStateLocked(inst)
	r.logger.Info("instance started", "instance_id", inst.id, "pid", pid)
	go r.wait(inst, cmd, inst.done)
	return nil
}

// wait reaps a child started by this Runtime, kills what is left of its
// process group, and records how it ended.
func (r *Runtime) wait(inst *instance, cmd *exec.Cmd, done chan struct{}) {
	_ = cmd.Wait() // the exit status is in cmd.ProcessState
	// Anything the command left behind in its group goes with it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)

	code, msg := exitCode(cmd.ProcessState)
	ended := r.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	defer close(done)
	if inst.done != done {
		return // already replaced (cannot happen while the agent serialises calls)
	}
	inst.done = nil
	if !inst.st.StopRequested {
		// The agent's watchdog (Fence, another process) may have stopped
		// it while this agent could not: it says so in the saved state,
		// while it stops it (StopRequested, same pid) or after (stopped,
		// same start, and when it ended).
		var saved state
		if err := readJSON(filepath.Join(inst.dir, "state.json"), &saved); err == nil {
			switch {
			case saved.StopRequested && saved.PID == inst.st.PID:
				inst.st.StopRequested = true
			case saved.Status == suanli.StatusStopped && saved.StartedAt != nil && inst.st.StartedAt != nil && saved.StartedAt.Equal(*inst.st.StartedAt):
				inst.st.StopRequested = true
				if saved.EndedAt != nil && saved.EndedAt.Before(ended) {
					ended = *saved.EndedAt
				}
			}
		}
	}
	if inst.st.StopRequested {
		inst.st = state{Status: suanli.StatusStopped, StartedAt: inst.st.StartedAt, EndedAt: &ended}
		r.logger.Info("instance stopped", "instance_id", inst.id)
	} else {
		inst.st = state{Status: suanli.StatusExited, ExitCode: &code, Message: msg, StartedAt: inst.st.StartedAt, EndedAt: &ended}
		r.logger.Info("instance exited", "instance_id", inst.id, "exit_code", code)
	}
	if r.insts[inst.id] == inst {
		r.saveStateLocked(inst)
	}
}

// exitCode returns a process's exit code, using the shell's 128+N for a
// death by signal N, and a message for the signal case.
func exitCode(ps *os.ProcessState) (int, string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), "killed by signal " + ws.Signal().String()
	}
	return ps.ExitCode(), ""
}

// stop ends inst's process group: SIGTERM, then SIGKILL after the grace
// period or as soon as ctx ends.
func (r *Runtime) stop(ctx context.Context, inst *instance) error {
	r.mu.Lock()
	if inst.st.Status != suanli.StatusRunning {
		r.mu.Unlock()
		return nil
	}
	inst.st.StopRequested = true
	r.saveStateLocked(inst)
	st, done, bootID := inst.st, inst.done, r.bootID
	grace := inst.spec.StopGrace
	r.mu.Unlock()
	if grace <= 0 {
		grace = DefaultStopGrace
	}

	gone := func() bool {
		if done != nil {
			select {
			case <-done:
				return true
			default:
				return false
			}
		}
		return !alive(st.PID, st.StartTicks, st.BootID, bootID)
	}
	// waitGone waits until the group leader is gone, d passes, or stop
	// closes.
	waitGone := func(d time.Duration, stop <-chan struct{}) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for !gone() {
			select {
			case <-done: // nil for adopted processes: never ready
			case <-tick.C:
			case <-t.C:
				return gone()
			case <-stop:
				return gone()
			}
		}
		return true
	}

	r.logger.Info("instance stopping", "instance_id", inst.id, "pid", st.PID, "grace", grace)
	if !gone() {
		_ = syscall.Kill(-st.PID, syscall.SIGTERM)
	}
	if !waitGone(grace, ctx.Done()) {
		r.logger.Info("instance ignored SIGTERM, killing it", "instance_id", inst.id, "pid", st.PID)
		_ = syscall.Kill(-st.PID, syscall.SIGKILL)
		if !waitGone(killWait, nil) {
			return fmt.Errorf("instance %d: process %d still there %s after SIGKILL", inst.id, st.PID, killWait)
		}
	}
	if done != nil {
		<-done // the waiter has recorded the stop
		return nil
	}
	// An adopted process: no waiter, so kill what is left of its group and
	// record the stop here.
	_ = syscall.Kill(-st.PID, syscall.SIGKILL)
	r.mu.Lock()
	defer r.mu.Unlock()
	if inst.st.PID == st.PID {
		ended := r.Now()
		inst.st = state{Status: suanli.StatusStopped, StartedAt: inst.st.StartedAt, EndedAt: &ended}
		r.saveStateLocked(inst)
		r.logger.Info("instance stopped", "instance_id", inst.id)
	}
	return nil
}

// refreshLocked notices that a process adopted from an earlier agent run
// has ended.
func (r *Runtime) refreshLocked(inst *instance) {
	if inst.st.Status != suanli.StatusRunning || inst.done != nil {
		return
	}
	if alive(inst.st.PID, inst.st.StartTicks, inst.st.BootID, r.bootID) {
		return
	}
	if inst.st.StopRequested {
		inst.st = state{Status: suanli.StatusStopped, StartedAt: inst.st.StartedAt}
	} else {
		inst.st = state{Status: suanli.StatusExited, StartedAt: inst.st.StartedAt,
			Message: "the process ended; its exit code is unknown because an earlier agent run started it"}
	}
	r.saveStateLocked(inst)
	r.logger.Info("adopted instance ended", "instance_id", inst.id, "status", inst.st.Status)
}

// sampleLocked updates the instance's telemetry from its group's usage.
func (inst *instance) sampleLocked(u groupUsage, now time.Time) {
	var cpu float64
	switch {
	case inst.teleSeen && now.After(inst.teleAt) && u.cpuTicks >= inst.teleCPU:
		cpu = float64(u.cpuTicks-inst.teleCPU) / clockTicks / now.Sub(inst.teleAt).Seconds() * 100
	case inst.st.StartedAt != nil && now.After(*inst.st.StartedAt):
		cpu = float64(u.cpuTicks) / clockTicks / now.Sub(*inst.st.StartedAt).Seconds() * 100
	}
	t := &suanli.Telemetry{CPUPercent: cpu, MemoryMB: u.rssBytes >> 20, DiskReadBytes: u.readBytes, DiskWriteBytes: u.writeBytes}
	if p := inst.tele; p != nil {
		// The group's sum drops when a member exits without being reaped
		// inside the group (its parent was outside, or it is a zombie for
		// now); the counters of a run only grow.
		t.DiskReadBytes = max(t.DiskReadBytes, p.DiskReadBytes)
		t.DiskWriteBytes = max(t.DiskWriteBytes, p.DiskWriteBytes)
	}
	inst.tele = t
	inst.teleAt, inst.teleCPU, inst.teleSeen = now, u.cpuTicks, true
}

// loadLocked reads the instances left under the directory by an earlier
// Runtime, once.
func (r *Runtime) loadLocked() error {
	if r.loaded {
		return nil
	}
	r.bootID = readBootID()
	root := filepath.Join(r.dir, "instances")
	ents, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("process runtime: read %s: %w", root, err)
	}
	for _, e := range ents {
		id, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || id <= 0 || !e.IsDir() {
			continue
		}
		inst := &instance{id: id, dir: filepath.Join(root, e.Name()), st: state{Status: suanli.StatusStopped}}
		if err := readJSON(filepath.Join(inst.dir, "spec.json"), &inst.spec); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.logger.Warn("instance spec unreadable", "instance_id", id, "err", err)
		}
		if err := readJSON(filepath.Join(inst.dir, "state.json"), &inst.st); err != nil && !errors.Is(err, fs.ErrNotExist) {
			inst.st = state{Status: suanli.StatusFailed, Message: "the agent could not read this instance's saved state: " + err.Error()}
		}
		r.insts[id] = inst
		if inst.st.Status == suanli.StatusRunning && alive(inst.st.PID, inst.st.StartTicks, inst.st.BootID, r.bootID) {
			r.logger.Info("instance adopted", "instance_id", id, "pid", inst.st.PID)
		}
	}
	r.loaded = true
	return nil
}

// saveStateLocked writes inst.st to state.json. A failure is logged: the
// state in memory stays right, and only an agent restart would miss it.
func (r *Runtime) saveStateLocked(inst *instance) {
	if err := writeJSON(filepath.Join(inst.dir, "state.json"), inst.st); err != nil {
		r.logger.Error("instance state not saved", "instance_id", inst.id, "err", err)
	}
}

// Fence stops every running instance under dir, each within grace: the
// agent's watchdog calls it, from another process, when the agent's lease
// ran out. It reads the instances afresh from dir each time, so instances
// the agent created since are seen. It returns how many it stopped.
func Fence(ctx context.Context, dir string, grace time.Duration, logger *slog.Logger) (int, error) {
	r := New(dir, logger)
	reps, err := r.Status(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rep := range reps {
		if rep.Status != suanli.StatusRunning {
			continue
		}
		r.mu.Lock()
		inst := r.insts[rep.ID]
		if inst.spec.StopGrace <= 0 || inst.spec.StopGrace > grace {
			inst.spec.StopGrace = grace
		}
		r.mu.Unlock()
		if err := r.stop(ctx, inst); err != nil {
			return n, fmt.Errorf("instance %d: %w", rep.ID, err)
		}
		n++
	}
	return n, nil
}
