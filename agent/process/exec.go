package process

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/suanli/suanli"
)

// Exec runs cmd inside an instance: in its work directory, with its
// environment, in a process group of its own that is killed when ctx ends.
// It returns the command's exit code. The instance must exist (running or
// stopped); ENOTFOUND otherwise.
func (r *Runtime) Exec(ctx context.Context, id int64, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(cmd) == 0 {
		return -1, suanli.Errorf(suanli.EINVALID, "exec needs a command")
	}
	r.mu.Lock()
	if err := r.loadLocked(); err != nil {
		r.mu.Unlock()
		return -1, err
	}
	inst, ok := r.insts[id]
	if !ok {
		r.mu.Unlock()
		return -1, suanli.Errorf(suanli.ENOTFOUND, "instance %d is not on this machine", id)
	}
	spec, dir := inst.spec, inst.dir
	r.mu.Unlock()
	work := filepath.Join(dir, "work")
	env, err := instanceEnv(spec, work, r.tokenPath(spec.ID))
	if err != nil {
		return -1, err
	}
	path, err := lookPath(cmd[0], envValue(env, "PATH"))
	if err != nil {
		return 127, suanli.Errorf(suanli.EINVALID, "exec: %v", err)
	}
	c := exec.CommandContext(ctx, path, cmd[1:]...)
	c.Args[0] = cmd[0]
	c.Dir, c.Env = work, env
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	err = c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ctx.Err() != nil {
			return -1, ctx.Err()
		}
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

// Preflight checks, before anything is reserved, that the process runtime
// can run spec: it needs a command, and the command must be found.
func (r *Runtime) Preflight(ctx context.Context, spec suanli.InstanceSpec) error {
	if len(spec.Cmd) == 0 {
		return suanli.Errorf(suanli.EINVALID, "the process runtime needs a command: pass one after -- (suanli create OFFER --image IMAGE -- CMD ARGS…)")
	}
	env, err := instanceEnv(spec, r.dir, r.tokenPath(spec.ID))
	if err != nil {
		return err
	}
	if _, err := lookPath(spec.Cmd[0], envValue(env, "PATH")); err != nil {
		return suanli.Errorf(suanli.EINVALID, "%v: the process runtime runs commands of the host; give one that exists there", err)
	}
	return nil
}
