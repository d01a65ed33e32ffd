package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"syscall"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
	"github.com/suanli/suanli/agent/process"
	"github.com/suanli/suanli/agent/sshd"
	"github.com/suanli/suanli/auth/sshca"
)

// startSSHEndpoint starts the agent's SSH endpoint on c.SSHAddr ("off":
// none) for the instances of rt, until ctx ends. It returns the endpoint to
// report in sync and the function that takes the CA keys from sync replies.
func startSSHEndpoint(ctx context.Context, c agentConfig, dataDir string, rt agent.Runtime, logger *slog.Logger) (*suanli.SSHEndpoint, func([]string), error) {
	if c.SSHAddr == "off" {
		return nil, nil, nil
	}
	var target sshd.Target
	switch r := rt.(type) {
	case *process.Runtime:
		target = sshd.ProcessTarget{Runtime: r}
	case sshd.Execer:
		target = sshd.ExecTarget{Runtime: r}
	default:
		logger.Warn("ssh endpoint off: the runtime cannot run commands in instances", "runtime", rt.Name())
		return nil, nil, nil
	}
	host, err := sshd.LoadOrCreateHostKey(filepath.Join(dataDir, "ssh_host_ed25519_key"))
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", c.SSHAddr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, suanli.Errorf(suanli.EUNAVAILABLE, "SSH address %s is in use: pass --ssh-addr HOST:PORT (port 0 picks a free one), or --ssh-addr off", c.SSHAddr)
		}
		return nil, nil, fmt.Errorf("ssh endpoint: listen on %s: %w", c.SSHAddr, err)
	}
	v := &sshca.Verifier{}
	srv := &sshd.Server{HostKey: host, Verifier: v, Target: target, Logger: logger.With("component", "sshd")}
	go func() {
		if err := srv.Serve(ctx, ln); err != nil {
			logger.Error("ssh endpoint stopped", "err", err)
		}
	}()
	ep := &suanli.SSHEndpoint{Host: c.SSHAdvertise, Port: ln.Addr().(*net.TCPAddr).Port, HostKey: sshd.AuthorizedKey(host.PublicKey())}
	logger.Info("ssh endpoint listening", "addr", ln.Addr().String(), "advertise", c.SSHAdvertise)
	setCA := func(keys []string) {
		if err := v.SetAuthorities(keys); err != nil {
			logger.Warn("ssh ca keys from the control plane refused", "err", err)
		}
	}
	return ep, setCA, nil
}
