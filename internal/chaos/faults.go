package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/suanli/suanli"
)

// Kill kills the whole host: SIGKILL to the container, whose processes (the
// agent and its workloads) all die with it.
func (a *Agent) Kill(ctx context.Context) error {
	_, err := docker(ctx, "kill", "--signal", "KILL", a.Container)
	return err
}

// Restart starts a killed host again: the same home, so the agent comes back
// as the same machine and finds its instances' directories.
func (a *Agent) Restart(ctx context.Context) error {
	_, err := docker(ctx, "start", a.Container)
	return err
}

// Freeze freezes the whole host (docker pause: the cgroup freezer stops the
// agent and its workloads; the kernel still holds its connections).
func (a *Agent) Freeze(ctx context.Context) error {
	_, err := docker(ctx, "pause", a.Container)
	return err
}

// Thaw ends a Freeze.
func (a *Agent) Thaw(ctx context.Context) error {
	_, err := docker(ctx, "unpause", a.Container)
	return err
}

// StopAgent sends SIGSTOP to the agent process alone (the container's PID
// 1): its workloads run on, unsupervised.
func (a *Agent) StopAgent(ctx context.Context) error {
	_, err := docker(ctx, "kill", "--signal", "STOP", a.Container)
	return err
}

// ContAgent sends SIGCONT to the agent process.
func (a *Agent) ContAgent(ctx context.Context) error {
	_, err := docker(ctx, "kill", "--signal", "CONT", a.Container)
	return err
}

// Disconnect cuts the host off the network (and so off the control plane):
// its interface goes away.
func (a *Agent) Disconnect(ctx context.Context) error {
	_, err := docker(ctx, "network", "disconnect", "--force", a.c.network, a.Container)
	return err
}

// Connect ends a Disconnect. The host may get another address.
func (a *Agent) Connect(ctx context.Context) error {
	_, err := docker(ctx, "network", "connect", a.c.network, a.Container)
	return err
}

// pid is the host's PID 1 as this machine sees it.
func (a *Agent) pid(ctx context.Context) (int, error) {
	s, err := docker(ctx, "inspect", "-f", "{{.State.Pid}}", a.Container)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("container %s: no process (pid %q)", a.Container, s)
	}
	return pid, nil
}

// inNetns runs a command in the host's network namespace.
func (a *Agent) inNetns(ctx context.Context, args ...string) error {
	pid, err := a.pid(ctx)
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(pid), "-n"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s in %s: %v: %s", strings.Join(args, " "), a.Container, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// lossRules are the iptables rules of a Lossy link, for percent loss.
func lossRules(percent int) [][]string {
	p := fmt.Sprintf("%.2f", float64(percent)/100)
	return [][]string{
		{"INPUT", "-i", "eth0", "-m", "statistic", "--mode", "random", "--probability", p, "-j", "DROP"},
		{"OUTPUT", "-o", "eth0", "-m", "statistic", "--mode", "random", "--probability", p, "-j", "DROP"},
	}
}

// Lossy makes the host's link drop percent of the packets in each direction
// (iptables' statistic match in its network namespace) and, when delay is
// positive and the kernel has netem, delay every packet it sends by delay
// (±10%). Clear undoes it. It reports whether the delay was applied.
func (a *Agent) Lossy(ctx context.Context, percent int, delay time.Duration) (delayed bool, err error) {
	for _, r := range lossRules(percent) {
		if err := a.inNetns(ctx, append([]string{"iptables", "-w", "5", "-A"}, r...)...); err != nil {
			return false, err
		}
	}
	if delay <= 0 || NetemSupported(ctx) != nil {
		return false, nil
	}
	ms := delay.Milliseconds()
	err = a.inNetns(ctx, "tc", "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", fmt.Sprintf("%dms", ms), fmt.Sprintf("%dms", max(ms/10, 1)))
	return err == nil, err
}

// Clear removes what Lossy added.
func (a *Agent) Clear(ctx context.Context, percent int) error {
	var errs []error
	for _, r := range lossRules(percent) {
		if err := a.inNetns(ctx, append([]string{"iptables", "-w", "5", "-D"}, r...)...); err != nil {
			errs = append(errs, err)
		}
	}
	a.inNetns(ctx, "tc", "qdisc", "del", "dev", "eth0", "root") // none when there was no delay
	return errors.Join(errs...)
}

// LinkFaultsAvailable reports whether Lossy can work here: iptables and
// nsenter installed, and root to enter the hosts' network namespaces; or why
// not.
func LinkFaultsAvailable() error {
	for _, c := range []string{"iptables", "nsenter"} {
		if _, err := exec.LookPath(c); err != nil {
			return suanli.Errorf(suanli.EUNAVAILABLE, "%s is not installed (apt-get install iptables util-linux)", c)
		}
	}
	if os.Geteuid() != 0 {
		return suanli.Errorf(suanli.EUNAVAILABLE, "faults of the link enter the hosts' network namespaces: that needs root")
	}
	return nil
}

var netemOnce struct {
	sync.Once
	err error
}

// NetemSupported reports whether the kernel has netem (for delay), trying it
// once in a network namespace of its own; or why not.
func NetemSupported(ctx context.Context) error {
	netemOnce.Do(func() {
		if _, err := exec.LookPath("tc"); err != nil {
			netemOnce.err = suanli.Errorf(suanli.EUNAVAILABLE, "tc is not installed (apt-get install iproute2)")
			return
		}
		// A throwaway network namespace: unshare runs tc in one.
		out, err := exec.CommandContext(ctx, "unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").CombinedOutput()
		if err != nil {
			netemOnce.err = suanli.Errorf(suanli.EUNAVAILABLE, "tc netem: %s", strings.TrimSpace(string(out)))
		}
	})
	return netemOnce.err
}
