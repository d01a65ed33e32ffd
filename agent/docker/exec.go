package docker

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/suanli/suanli"
)

// Execer is implemented by runtimes that can run a command inside a running
// instance (`suanli exec ID -- CMD`).
type Execer interface {
	// Exec runs cmd in the instance with the container's user, environment
	// and limits, copies stdin (when not nil) to it and its output to stdout
	// and stderr, and returns its exit code.
	Exec(ctx context.Context, id int64, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (exitCode int, err error)
}

// PortMapper is implemented by runtimes that publish container ports on the
// host (for `suanli show` and SSH).
type PortMapper interface {
	// Ports returns the instance's container TCP port → host port.
	Ports(ctx context.Context, id int64) (map[int]int, error)
}

// Exec runs cmd in the running instance; see Execer. stdout and stderr may
// be nil (discarded). When ctx ends, the connection is closed and Exec
// returns ctx's error; the command itself may run on until it exits.
// Errors: EINVALID for an empty cmd, ENOTFOUND for an unknown instance,
// ECONFLICT when it is not running. A command that cannot be started
// (not found in the image) is an exit code (126 or 127), as in a shell.
func (r *Runtime) Exec(ctx context.Context, id int64, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return r.exec(ctx, id, cmd, nil, nil, stdin, stdout, stderr)
}

// Terminal is the terminal ExecTTY gives a command.
type Terminal struct {
	Term       string // TERM, e.g. xterm-256color
	Cols, Rows uint16
	// Resize carries new sizes (cols, rows) as the client's window changes;
	// nil when it never changes.
	Resize <-chan [2]uint16
}

// ExecTTY runs cmd in the running instance on a terminal of t's size
// (docker exec -t): stdin goes to the terminal and everything the command
// writes, stdout and stderr alike, comes back on stdout; window changes are
// passed on. env adds KEY=value pairs (TERM is set from t). Errors as Exec.
func (r *Runtime) ExecTTY(ctx context.Context, id int64, cmd, env []string, t Terminal, stdin io.Reader, stdout io.Writer) (int, error) {
	if t.Term != "" {
		env = append(append([]string(nil), env...), "TERM="+t.Term)
	}
	return r.exec(ctx, id, cmd, env, &t, stdin, stdout, nil)
}

func (r *Runtime) exec(ctx context.Context, id int64, cmd, env []string, tty *Terminal, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(cmd) == 0 {
		return -1, suanli.Errorf(suanli.EINVALID, "instance %d: exec needs a command", id)
	}
	c, err := r.inspect(ctx, id)
	if err != nil {
		return -1, err
	} else if c == nil {
		return -1, suanli.Errorf(suanli.ENOTFOUND, "instance %d has no container on this machine", id)
	} else if !c.State.Running || c.State.Paused {
		return -1, suanli.Errorf(suanli.ECONFLICT, "instance %d is not running (%s): start it first", id, c.State.Status)
	}
	opts := client.ExecCreateOptions{
		AttachStdin:  stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          cmd,
		Env:          env,
	}
	var size client.ConsoleSize
	if tty != nil {
		size = client.ConsoleSize{Height: uint(tty.Rows), Width: uint(tty.Cols)}
		opts.TTY, opts.ConsoleSize = true, size
	}
	ex, err := r.cli.ExecCreate(ctx, c.ID, opts)
	if err != nil {
		return -1, r.daemonErr(fmt.Sprintf("instance %d: exec", id), err)
	}
	att, err := r.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: tty != nil, ConsoleSize: size})
	if err != nil {
		return -1, r.daemonErr(fmt.Sprintf("instance %d: exec attach", id), err)
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	if stdin != nil {
		go func() {
			io.Copy(att.Conn, stdin)
			att.CloseWrite()
		}()
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	var copyErr error
	if tty != nil {
		// A terminal's output is one raw stream, not multiplexed.
		done := make(chan struct{})
		defer close(done)
		go func() {
			// Daemons before API 1.42 ignore the size given at create: set
			// it now, as the docker CLI does (the command gets a SIGWINCH).
			for i := 0; i < 10; i++ {
				if _, err := r.cli.ExecResize(ctx, ex.ID, client.ExecResizeOptions{Height: size.Height, Width: size.Width}); err == nil {
					break
				}
				select {
				case <-done:
					return
				case <-time.After(time.Duration(i+1) * 10 * time.Millisecond):
				}
			}
			if tty.Resize == nil {
				return
			}
			for {
				select {
				case <-done:
					return
				case sz, ok := <-tty.Resize:
					if !ok {
						return
					}
					if _, err := r.cli.ExecResize(ctx, ex.ID, client.ExecResizeOptions{Height: uint(sz[1]), Width: uint(sz[0])}); err != nil {
						r.log.Debug("exec resize", "instance_id", id, "err", err)
					}
				}
			}
		}()
		_, copyErr = io.Copy(stdout, att.Reader)
	} else {
		_, copyErr = stdcopy.StdCopy(stdout, stderr, att.Reader)
	}
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	// The stream ends as the process exits; the daemon may record the exit
	// code a moment later.
	for i := 0; ; i++ {
		ins, err := r.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return -1, r.daemonErr(fmt.Sprintf("instance %d: exec inspect", id), err)
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		if i == 200 {
			return -1, fmt.Errorf("instance %d: exec output ended (%v) but the command still runs", id, copyErr)
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Ports returns the instance's published TCP ports, container port → host
// port (empty when it publishes none). ENOTFOUND for an unknown instance.
func (r *Runtime) Ports(ctx context.Context, id int64) (map[int]int, error) {
	c, err := r.inspect(ctx, id)
	if err != nil {
		return nil, err
	} else if c == nil {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "instance %d has no container on this machine", id)
	}
	return portsOf(c), nil
}
