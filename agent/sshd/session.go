package sshd

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth/sshca"
)

// maxEnv bounds the environment variables one session may send.
const maxEnv = 64

// session serves one session channel: its requests, then one command (a
// shell, an exec or the sftp subsystem), whose exit status it sends before
// closing the channel.
func (s *Server) session(ctx context.Context, g *sshca.Grant, ch ssh.Channel, reqs <-chan *ssh.Request, log *slog.Logger) {
	defer ch.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		env     []string
		tty     *TTY
		resize  chan WindowSize
		started bool
		done    = make(chan struct{})
	)
	for {
		var req *ssh.Request
		select {
		case req = <-reqs:
		case <-done:
			return
		}
		if req == nil { // the client closed the channel
			cancel()
			if started {
				<-done
			}
			return
		}
		ok := false
		switch req.Type {
		case "pty-req":
			var p struct {
				Term       string
				Cols, Rows uint32
				W, H       uint32
				Modes      string
			}
			if !started && tty == nil && g.PTY && s.Target.SupportsTTY() && ssh.Unmarshal(req.Payload, &p) == nil {
				resize = make(chan WindowSize, 1)
				tty = &TTY{Term: p.Term, Size: clampSize(p.Cols, p.Rows), Resize: resize}
				ok = true
			}
		case "window-change":
			var w struct{ Cols, Rows, W, H uint32 }
			if resize != nil && ssh.Unmarshal(req.Payload, &w) == nil {
				select { // keep only the latest size
				case <-resize:
				default:
				}
				resize <- clampSize(w.Cols, w.Rows)
				ok = true
			}
		case "env":
			var e struct{ Name, Value string }
			if !started && ssh.Unmarshal(req.Payload, &e) == nil && acceptEnv(e.Name, e.Value) && len(env) < maxEnv {
				env = append(env, e.Name+"="+e.Value)
				ok = true
			}
		case "shell", "exec", "subsystem":
			if started {
				break
			}
			var arg struct{ Value string }
			if req.Type != "shell" && ssh.Unmarshal(req.Payload, &arg) != nil {
				break
			}
			if req.Type == "subsystem" && arg.Value != "sftp" {
				break
			}
			started, ok = true, true
			kind := req.Type
			go func() {
				defer close(done)
				code := 255 // as ssh exits when it cannot run a command
				if err := s.Target.Check(ctx, g.InstanceID); err != nil {
					// Accept, then say why: a refused request would hide the reason.
					fmt.Fprintf(ch.Stderr(), "suanli: %s\r\n", suanli.ErrorMessage(err))
				} else {
					code = s.run(ctx, g, ch, kind, arg.Value, env, tty, log)
				}
				ch.CloseWrite()
				ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
			}()
		}
		if req.WantReply {
			req.Reply(ok, nil)
		}
	}
}

// run runs the session's command and returns its exit status. It ends the
// command when the instance stops running.
func (s *Server) run(ctx context.Context, g *sshca.Grant, ch ssh.Channel, kind, arg string, env []string, tty *TTY, log *slog.Logger) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		every := s.CheckEvery
		if every <= 0 {
			every = 5 * time.Second
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := s.Target.Check(ctx, g.InstanceID); err != nil && ctx.Err() == nil {
					fmt.Fprintf(ch.Stderr(), "\r\nsuanli: %s\r\n", suanli.ErrorMessage(err))
					cancel()
					return
				}
			}
		}
	}()
	start := time.Now()
	log.Info("ssh session", "kind", kind, "tty", tty != nil)
	if kind == "subsystem" {
		err := s.Target.SFTP(ctx, g.InstanceID, ch, ch.Stderr())
		if err != nil && ctx.Err() == nil {
			log.Warn("sftp session failed", "err", err)
			return 1
		}
		return 0
	}
	p := &Proc{Command: arg, Env: env, TTY: tty, Stdin: ch, Stdout: ch, Stderr: ch.Stderr()}
	code, err := s.Target.Exec(ctx, g.InstanceID, p)
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(ch.Stderr(), "suanli: %s\r\n", suanli.ErrorMessage(err))
		}
		log.Warn("ssh session failed", "kind", kind, "err", err)
		if code <= 0 {
			code = 255
		}
	}
	log.Info("ssh session ended", "kind", kind, "exit_code", code, "seconds", int(time.Since(start).Seconds()))
	return code
}

// acceptEnv allows what OpenSSH's default AcceptEnv does (LANG, LC_*) and
// COLORTERM; nothing that changes how commands are found or loaded.
func acceptEnv(name, value string) bool {
	if strings.ContainsAny(name, "=\x00") || strings.ContainsRune(value, 0) || len(value) > 4096 {
		return false
	}
	return name == "LANG" || name == "COLORTERM" || (strings.HasPrefix(name, "LC_") && len(name) > 3)
}

func clampSize(cols, rows uint32) WindowSize {
	c, r := min(cols, 10000), min(rows, 10000)
	if c == 0 {
		c = 80
	}
	if r == 0 {
		r = 24
	}
	return WindowSize{Cols: uint16(c), Rows: uint16(r)}
}
