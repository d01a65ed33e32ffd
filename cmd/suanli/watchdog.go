package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
	"github.com/suanli/suanli/agent/docker"
	"github.com/suanli/suanli/agent/process"
)

// The agent's watchdog is the same binary run as `suanli agent-watchdog`, in
// a session of its own, so that it outlives a stopped or dead agent (and a
// Ctrl-C to the agent's terminal). One watches a data directory at a time
// (a lock file); a restarted agent finds it still watching.

// startWatchdog writes a first lease and starts the watchdog for dataDir.
// Its output goes to DATA/watchdog.log.
func startWatchdog(c agentConfig, dataDir, runtime string, logger *slog.Logger) (string, error) {
	lease := agent.LeasePath(dataDir)
	if err := agent.WriteLease(lease, agent.Lease{AgentPID: os.Getpid(), Renewed: time.Now(), FenceAfter: c.FenceAfter}); err != nil {
		return "", fmt.Errorf("watchdog lease: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("watchdog: %w", err)
	}
	out, err := os.OpenFile(filepath.Join(dataDir, "watchdog.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("watchdog log: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(exe, "agent-watchdog", "--data-dir", dataDir, "--runtime", runtime, "--docker-namespace", c.DockerNamespace)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start the watchdog: %w", err)
	}
	logger.Info("watchdog started", "pid", cmd.Process.Pid, "lease", lease)
	go cmd.Wait() // reap it if it exits while the agent runs (another one was watching)
	return lease, nil
}

func newWatchdogCmd() *cobra.Command {
	var dataDir, runtime, namespace string
	cmd := &cobra.Command{
		Use:    "agent-watchdog",
		Short:  "Stop this machine's workloads when its agent stops renewing its lease (started by the agent)",
		Hidden: true,
		Long: `The agent fences its own workloads when it cannot reach the control plane, but
not when the agent process itself is stopped or dead. The agent starts this
watchdog in a session of its own; the agent renews DATA-DIR/agent.lease with
every successful sync, and when the lease runs out (a little after the
agent's own fence, before the control plane declares the host lost) the
watchdog stops the runtime's running workloads. It exits when the lease file
is removed, or when the agent is gone and nothing runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			logger := newLogger()
			unlock, holder, err := tryLock(filepath.Join(dataDir, "watchdog.lock"))
			if err != nil {
				return err
			} else if unlock == nil {
				logger.Info("another watchdog watches this data directory", "data_dir", dataDir, "pid", holder)
				return nil
			}
			defer unlock()
			var fence func(ctx context.Context, grace time.Duration) (int, error)
			switch runtime {
			case "process":
				fence = func(ctx context.Context, grace time.Duration) (int, error) {
					return process.Fence(ctx, dataDir, grace, logger)
				}
			case "docker":
				fence = func(ctx context.Context, grace time.Duration) (int, error) {
					return docker.Fence(ctx, docker.Options{DataDir: filepath.Join(dataDir, "docker"), Namespace: namespace, Logger: logger}, grace)
				}
			default:
				return suanli.FieldErrorf("runtime", "%q: use docker or process", runtime)
			}
			logger.Info("watchdog watching", "lease", agent.LeasePath(dataDir), "runtime", runtime)
			w := &agent.Watchdog{Lease: agent.LeasePath(dataDir), Fence: fence, Logger: logger}
			return w.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the agent's data directory")
	cmd.Flags().StringVar(&runtime, "runtime", "", "the agent's runtime: docker or process")
	cmd.Flags().StringVar(&namespace, "docker-namespace", "", "the agent's Docker namespace")
	cmd.MarkFlagRequired("data-dir")
	cmd.MarkFlagRequired("runtime")
	return cmd
}
