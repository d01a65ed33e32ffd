package sshd

import (
	"context"
	"fmt"
	"io"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/docker"
)

// Execer runs a command in a running instance (agent/docker implements it).
type Execer interface {
	Status(ctx context.Context) ([]suanli.InstanceReport, error)
	Exec(ctx context.Context, id int64, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (exitCode int, err error)
}

// TTYExecer is an Execer that can also run a command on a terminal
// (agent/docker's docker exec -t).
type TTYExecer interface {
	ExecTTY(ctx context.Context, id int64, cmd, env []string, t docker.Terminal, stdin io.Reader, stdout io.Writer) (exitCode int, err error)
}

// loginShell starts the image's best interactive shell.
const loginShell = `if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l`

// sftpServer runs the image's OpenSSH sftp-server, or says how to get one.
const sftpServer = `for p in /usr/lib/openssh/sftp-server /usr/libexec/openssh/sftp-server /usr/lib/ssh/sftp-server /usr/libexec/sftp-server /usr/lib/sftp-server; do
  if [ -x "$p" ]; then exec "$p"; fi
done
echo "suanli: this image has no sftp-server: install openssh-sftp-server in it, or use scp -O" >&2
exit 127`

// ExecTarget runs sessions through a runtime's exec (the Docker runtime):
// commands run inside the container with its user, environment and limits.
// A runtime that is a TTYExecer gives a session the terminal it asks for
// (size, TERM, window changes); with one that is not, a pty request is
// refused and ssh goes on without one. SFTP uses the image's own
// sftp-server.
type ExecTarget struct {
	Runtime Execer
}

var _ Target = ExecTarget{}

// Check reports whether the instance runs.
func (t ExecTarget) Check(ctx context.Context, id int64) error {
	reps, err := t.Runtime.Status(ctx)
	if err != nil {
		return err
	}
	for _, r := range reps {
		if r.ID == id {
			if r.Status != suanli.StatusRunning {
				return suanli.Errorf(suanli.ECONFLICT, "instance %d is %s: start it first (`suanli start %d`)", id, r.Status, id)
			}
			return nil
		}
	}
	return suanli.Errorf(suanli.ENOTFOUND, "instance %d is not on this machine", id)
}

// SupportsTTY reports whether the runtime can give a command a terminal.
func (t ExecTarget) SupportsTTY() bool {
	_, ok := t.Runtime.(TTYExecer)
	return ok
}

// Exec runs p.Command with sh -c in the container, on a terminal when p
// asks for one. The client's environment requests are not passed on (the
// container's own environment stands), except TERM with a terminal.
func (t ExecTarget) Exec(ctx context.Context, id int64, p *Proc) (int, error) {
	cmd := []string{"/bin/sh", "-c", p.Command}
	if p.Command == "" {
		cmd = []string{"/bin/sh", "-c", loginShell}
	}
	if tx, ok := t.Runtime.(TTYExecer); ok && p.TTY != nil {
		resize := make(chan [2]uint16, 1)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case w, ok := <-p.TTY.Resize:
					if !ok {
						return
					}
					select { // keep only the latest size
					case <-resize:
					default:
					}
					resize <- [2]uint16{w.Cols, w.Rows}
				}
			}
		}()
		term := docker.Terminal{Term: p.TTY.Term, Cols: p.TTY.Size.Cols, Rows: p.TTY.Size.Rows, Resize: resize}
		return tx.ExecTTY(ctx, id, cmd, nil, term, p.Stdin, p.Stdout)
	}
	return t.Runtime.Exec(ctx, id, cmd, p.Stdin, p.Stdout, p.Stderr)
}

// SFTP runs the image's sftp-server over rw.
func (t ExecTarget) SFTP(ctx context.Context, id int64, rw io.ReadWriter, stderr io.Writer) error {
	code, err := t.Runtime.Exec(ctx, id, []string{"/bin/sh", "-c", sftpServer}, rw, rw, stderr)
	if err == nil && code != 0 {
		return fmt.Errorf("sftp-server exited with %d", code)
	}
	return err
}
