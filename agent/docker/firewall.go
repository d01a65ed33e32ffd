package docker

import (
	"context"
	"fmt"
	"hash/fnv"
	"os/exec"
	"strings"
)

// Keeping instances from the host: Docker isolates bridge networks from
// each other, but a container can open connections to any address of the
// host itself (its bridge's gateway), where the agent and the provider's own
// services listen. With Options.BlockHostAccess each instance network gets a
// bridge named after it and one iptables rule in the host's INPUT chain that
// drops new connections coming in on that bridge. Replies to connections the
// host opened (Docker's port proxy reaching the container) still pass, and
// so does traffic to the Internet, which is forwarded, not input.

// bridgeName is the Linux interface name of an instance network's bridge:
// "sl-" and 8 hex digits of a hash of the network name (names are limited
// to 15 bytes).
func bridgeName(network string) string {
	h := fnv.New32a()
	h.Write([]byte(network))
	return fmt.Sprintf("sl-%08x", h.Sum32())
}

// hostRule is the INPUT rule for a bridge, without the -I/-C/-D verb.
func hostRule(bridge string) []string {
	return []string{"INPUT", "-i", bridge, "-m", "conntrack", "--ctstate", "NEW,INVALID",
		"-m", "comment", "--comment", "suanli: instance may not reach the host", "-j", "DROP"}
}

// iptables runs the iptables command, waiting for the xtables lock.
func iptables(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// checkFirewall tells whether iptables can be used, for New.
func checkFirewall(ctx context.Context) error {
	if _, err := exec.LookPath("iptables"); err != nil {
		return fmt.Errorf("blocking host access needs iptables: %w", err)
	}
	return iptables(ctx, "-S", "INPUT")
}

// addHostRule makes sure the bridge's INPUT rule is in place (idempotent).
func (r *Runtime) addHostRule(ctx context.Context, bridge string) error {
	rule := hostRule(bridge)
	if iptables(ctx, append([]string{"-C"}, rule...)...) == nil {
		return nil
	}
	return iptables(ctx, append([]string{"-I"}, rule...)...)
}

// deleteHostRule deletes the bridge's INPUT rule, every copy of it.
func (r *Runtime) deleteHostRule(ctx context.Context, bridge string) {
	rule := hostRule(bridge)
	for range 10 {
		if iptables(ctx, append([]string{"-D"}, rule...)...) != nil {
			return
		}
	}
}
