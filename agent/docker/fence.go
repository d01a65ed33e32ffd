package docker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/suanli/suanli"
)

// Fence stops every running container of opts.Namespace, each within
// grace, and marks each stopped in the runtime's state (so the agent, when
// it runs again, reports "stopped", not "exited"). The agent's watchdog
// calls it from another process when the agent's lease ran out; it starts
// no log followers and leaves everything else to the agent. It returns how
// many containers it stopped.
func Fence(ctx context.Context, opts Options, grace time.Duration) (int, error) {
	copts := []client.Opt{client.FromEnv}
	if opts.Host != "" {
		copts = append(copts, client.WithHost(opts.Host))
	}
	cli, err := client.New(copts...)
	if err != nil {
		return 0, fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return 0, suanli.Errorf(suanli.EUNAVAILABLE, "docker daemon at %s does not answer: %v", cli.DaemonHost(), err)
	}
	r := &Runtime{cli: cli, log: opts.Logger, dataDir: opts.DataDir, ns: opts.Namespace, now: time.Now, states: map[int64]*sync.Mutex{}}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.dataDir == "" {
		r.dataDir = filepath.Join(os.TempDir(), "suanli-docker")
	}
	cs, err := r.list(ctx)
	if err != nil {
		return 0, err
	}
	secs := graceSeconds(grace)
	n := 0
	for _, c := range cs {
		if c.state != container.StateRunning && c.state != container.StateRestarting && c.state != container.StatePaused {
			continue
		}
		st := r.loadState(c.id)
		st.Stopped = true
		if err := r.saveState(c.id, st); err != nil {
			return n, err
		}
		if _, err := cli.ContainerStop(ctx, c.cid, client.ContainerStopOptions{Timeout: &secs}); err != nil {
			return n, r.daemonErr(fmt.Sprintf("instance %d: stop", c.id), err)
		}
		r.log.Warn("instance fenced by the watchdog", "instance_id", c.id, "grace_s", secs)
		n++
	}
	return n, nil
}
