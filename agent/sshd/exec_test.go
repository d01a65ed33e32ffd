package sshd_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/docker"
	"github.com/suanli/suanli/agent/sshd"
	"github.com/suanli/suanli/auth/sshca"
)

// localExec is an sshd.Execer that runs commands on this machine in a
// directory, the way docker exec runs them in a container: no terminal,
// stdin copied then closed, the exit code returned.
type localExec struct {
	dir     string
	running bool
}

func (l *localExec) Status(ctx context.Context) ([]suanli.InstanceReport, error) {
	st := suanli.StatusRunning
	if !l.running {
		st = suanli.StatusStopped
	}
	return []suanli.InstanceReport{{ID: 1, Status: st}}, nil
}

func (l *localExec) Exec(ctx context.Context, id int64, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Dir, c.Stdout, c.Stderr = l.dir, stdout, stderr
	c.Env = []string{"PATH=/usr/bin:/bin", "SUANLI_INSTANCE_ID=" + strconv.FormatInt(id, 10)}
	c.WaitDelay = time.Second
	in, _ := c.StdinPipe()
	if err := c.Start(); err != nil {
		return 127, nil
	}
	go func() { io.Copy(in, stdin); in.Close() }()
	err := c.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return c.ProcessState.ExitCode(), err
}

// TestExecTarget drives the exec-based target (the Docker runtime's) with
// the real OpenSSH client: exit codes, a refused terminal that ssh goes on
// without, a stopped instance, legacy scp, and SFTP through the image's
// sftp-server (or the message saying it has none).
func TestExecTarget(t *testing.T) {
	e := startEnv(t) // for the CA, keys and known_hosts; its server is not used
	work := t.TempDir()
	target := &localExec{dir: work, running: true}
	e.serveExec(target)
	cert := e.cert(1, 5*time.Minute, "127.0.0.1/32")

	out, errOut, code := e.ssh(cert, "1", nil, `echo "in $SUANLI_INSTANCE_ID at $(pwd)"; exit 5`)
	if code != 5 || out != "in 1 at "+work+"\n" {
		t.Errorf("exec: code %d, out %q, err %q", code, out, errOut)
	}
	// No terminal here: the request is refused (ssh -t goes on without
	// one; -tt, which insists, gives up).
	if _, errOut, _ := e.ssh(cert, "1", []string{"-tt"}, "echo no-tty"); !strings.Contains(errOut, "PTY allocation request failed") {
		t.Errorf("-tt: stderr %q; want the terminal refused", errOut)
	}

	src := filepath.Join(e.dir, "f.txt")
	os.WriteFile(src, []byte("legacy scp"), 0o600)
	args := append(e.sshArgs(cert), "-O", "-P", strconv.Itoa(e.addr.Port), src, "1@127.0.0.1:f.txt")
	if _, errOut, code := run(t, "scp", args...); code != 0 {
		t.Fatalf("scp -O: %s", errOut)
	}
	if b, err := os.ReadFile(filepath.Join(work, "f.txt")); err != nil || string(b) != "legacy scp" {
		t.Errorf("scp -O wrote %q, %v", b, err)
	}
	batch := filepath.Join(e.dir, "batch")
	os.WriteFile(batch, []byte("ls\n"), 0o600)
	out, errOut, code = run(t, "sftp", append(e.sshArgs(cert), "-b", batch, "-P", strconv.Itoa(e.addr.Port), "1@127.0.0.1")...)
	_, hasServer := os.Stat("/usr/lib/openssh/sftp-server")
	if hasServer == nil {
		if code != 0 || !strings.Contains(out, "f.txt") {
			t.Errorf("sftp via the image's sftp-server: code %d, out %q, err %q", code, out, errOut)
		}
	} else if code == 0 || !strings.Contains(errOut, "no sftp-server") {
		t.Errorf("sftp without an sftp-server: code %d, err %q; want the reason", code, errOut)
	}

	target.running = false
	if _, errOut, code := e.ssh(cert, "1", nil, "echo in"); code == 0 || !strings.Contains(errOut, "instance 1 is stopped") {
		t.Errorf("stopped instance: code %d, err %q", code, errOut)
	}
}

// ttyExec is localExec that can also run a command on a terminal, as the
// Docker runtime's docker exec -t does (agent/docker tests that for real).
type ttyExec struct {
	*localExec
	calls atomic.Int32
}

func (l *ttyExec) ExecTTY(ctx context.Context, id int64, cmd, env []string, term docker.Terminal, stdin io.Reader, stdout io.Writer) (int, error) {
	l.calls.Add(1)
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Dir = l.dir
	c.Env = append([]string{"PATH=/usr/bin:/bin", "TERM=" + term.Term}, env...)
	f, err := pty.StartWithSize(c, &pty.Winsize{Cols: term.Cols, Rows: term.Rows})
	if err != nil {
		return 127, nil
	}
	defer f.Close()
	go io.Copy(f, stdin)
	go func() {
		for sz := range term.Resize {
			pty.Setsize(f, &pty.Winsize{Cols: sz[0], Rows: sz[1]})
		}
	}()
	io.Copy(stdout, f) // ends with EIO when the command exits
	err = c.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return c.ProcessState.ExitCode(), err
}

// TestExecTargetTerminal: with a runtime that can give a terminal, the
// exec target passes ssh -tt's terminal request on to it.
func TestExecTargetTerminal(t *testing.T) {
	e := startEnv(t)
	target := &ttyExec{localExec: &localExec{dir: t.TempDir(), running: true}}
	e.serveExec(target)
	cert := e.cert(1, 5*time.Minute, "127.0.0.1/32")

	out, errOut, code := e.ssh(cert, "1", []string{"-tt"}, "tty; exit 3")
	if code != 3 || !strings.Contains(out, "/dev/pts/") || target.calls.Load() != 1 {
		t.Errorf("-tt: code %d, out %q, err %q, %d terminal execs; want 3, a pseudo-terminal, 1", code, out, errOut, target.calls.Load())
	}
	// Without -t the command runs without a terminal, through Exec.
	if out, _, code := e.ssh(cert, "1", nil, "tty; exit 0"); !strings.Contains(out, "not a tty") || target.calls.Load() != 1 {
		t.Errorf("no -t: code %d, out %q; want not a tty, through Exec", code, out)
	}
}

// serveExec points e at a new endpoint whose target is the exec target over
// runtime (e's own server is left unused).
func (e *env) serveExec(runtime sshd.Execer) {
	t := e.t
	host, err := sshd.LoadOrCreateHostKey(filepath.Join(e.dir, "host_key"))
	if err != nil {
		t.Fatal(err)
	}
	v := &sshca.Verifier{}
	v.SetAuthorities([]string{e.ca.AuthorizedKey()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := &sshd.Server{HostKey: host, Verifier: v, Target: sshd.ExecTarget{Runtime: runtime}, Logger: slog.New(slog.NewTextHandler(&testWriter{t}, nil))}
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	e.addr = ln.Addr().(*net.TCPAddr)
}
