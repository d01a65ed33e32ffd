package sshd

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/pkg/sftp"

	"github.com/suanli/suanli/agent/process"
)

// waitDelay is how long a finished command's output may still drain (a
// background child holding the pipe open) before it is cut.
const waitDelay = 2 * time.Second

// ProcessTarget runs sessions for the process runtime: commands run on the
// host as the agent's user, in the instance's work directory with its
// environment (as the instance's own command does), and SFTP is served
// in-process starting in the work directory. It adds no isolation the
// process runtime does not have.
type ProcessTarget struct {
	Runtime *process.Runtime
}

var _ Target = ProcessTarget{}

// Check reports whether the instance runs.
func (t ProcessTarget) Check(ctx context.Context, id int64) error {
	_, _, err := t.Runtime.Shell(ctx, id)
	return err
}

// SupportsTTY returns true.
func (t ProcessTarget) SupportsTTY() bool { return true }

// Exec runs p.Command with sh -c (or a login shell) in the instance.
func (t ProcessTarget) Exec(ctx context.Context, id int64, p *Proc) (int, error) {
	dir, env, err := t.Runtime.Shell(ctx, id)
	if err != nil {
		return -1, err
	}
	env = append(env, p.Env...)
	var cmd *exec.Cmd
	if p.Command == "" {
		shell := "/bin/sh"
		if _, err := os.Stat("/bin/bash"); err == nil {
			shell = "/bin/bash"
		}
		cmd = exec.CommandContext(ctx, shell, "-l")
		env = append(env, "SHELL="+shell)
	} else {
		cmd = exec.CommandContext(ctx, "/bin/sh", "-c", p.Command)
	}
	cmd.Dir = dir
	cmd.WaitDelay = waitDelay
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if p.TTY != nil {
		cmd.Env = append(env, "TERM="+orDefault(p.TTY.Term, "xterm"))
		return runTTY(ctx, cmd, p)
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return -1, err
	}
	if err := cmd.Start(); err != nil {
		return 127, err
	}
	// Copy stdin without Wait waiting for it: the client may never send EOF.
	go func() {
		io.Copy(stdin, p.Stdin)
		stdin.Close()
	}()
	err = cmd.Wait()
	hangup(cmd)
	return status(cmd, err)
}

// runTTY runs cmd on a new pseudo-terminal (its controlling terminal, in a
// new session), resizing it as the client's window changes.
func runTTY(ctx context.Context, cmd *exec.Cmd, p *Proc) (int, error) {
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: p.TTY.Size.Cols, Rows: p.TTY.Size.Rows})
	if err != nil {
		return 127, err
	}
	defer f.Close()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case w := <-p.TTY.Resize:
				pty.Setsize(f, &pty.Winsize{Cols: w.Cols, Rows: w.Rows})
			}
		}
	}()
	go io.Copy(f, p.Stdin)
	out := make(chan struct{})
	go func() {
		io.Copy(p.Stdout, f) // ends with EIO once the terminal's last holder is gone
		close(out)
	}()
	err = cmd.Wait()
	hangup(cmd)
	select {
	case <-out:
	case <-time.After(waitDelay):
	}
	return status(cmd, err)
}

// hangup sends SIGHUP to what the session's command left in its process
// group, as a terminal hangup would: nohup'd work survives.
func hangup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGHUP)
	}
}

func status(cmd *exec.Cmd, err error) (int, error) {
	ps := cmd.ProcessState
	if ps == nil {
		return -1, err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return ps.ExitCode(), err
	}
	return ps.ExitCode(), nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// SFTP serves SFTP starting in the instance's work directory.
func (t ProcessTarget) SFTP(ctx context.Context, id int64, rw io.ReadWriter, stderr io.Writer) error {
	dir, _, err := t.Runtime.Shell(ctx, id)
	if err != nil {
		return err
	}
	srv, err := sftp.NewServer(rwc{rw}, sftp.WithServerWorkingDirectory(dir))
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// rwc lets an io.ReadWriter serve where a closer is wanted; closing is the
// session's business.
type rwc struct{ io.ReadWriter }

func (rwc) Close() error { return nil }
