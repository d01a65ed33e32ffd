package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
	"github.com/suanli/suanli/agent/vault"
)

var (
	_ agent.Runtime      = (*Runtime)(nil)
	_ agent.UsageCounter = (*Runtime)(nil)
	_ Preflighter        = (*Runtime)(nil)
	_ Execer             = (*Runtime)(nil)
	_ PortMapper         = (*Runtime)(nil)
)

// Labels every object this runtime creates carries. A Runtime adopts the
// containers whose LabelManaged is "true" and whose LabelNamespace equals its
// Options.Namespace.
const (
	LabelManaged   = "suanli.managed"
	LabelInstance  = "suanli.instance"
	LabelNamespace = "suanli.namespace"
)

// Defaults used when the matching Options field or spec field is zero.
const (
	DefaultPidsLimit = 4096
	DefaultStopGrace = 10 * time.Second
)

// DefaultCapAdd is the capability allowlist an instance gets after every
// capability is dropped: enough for package managers, sshd (SYS_CHROOT,
// AUDIT_WRITE for privilege separation and login records) and servers on low
// ports, without raw sockets (NET_RAW), device nodes (MKNOD) or file
// capabilities (SETFCAP, SETPCAP).
var DefaultCapAdd = []string{
	"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID",
	"KILL", "NET_BIND_SERVICE", "SYS_CHROOT", "AUDIT_WRITE",
}

// Options configure a Runtime. The zero value works: the Docker daemon from
// the environment (DOCKER_HOST or the local socket), state under the system
// temporary directory, no namespace.
type Options struct {
	// Logger receives the runtime's events; nil discards them.
	Logger *slog.Logger
	// Host is the daemon address ("unix:///var/run/docker.sock",
	// "tcp://10.0.0.2:2376"); empty means DOCKER_HOST or the default socket.
	Host string
	// DataDir holds the runtime's own files: one log file and one small state
	// file per instance. It must survive agent restarts for logs to keep
	// their offsets and for "stopped" to be told apart from "exited".
	// Empty means $TMPDIR/suanli-docker.
	DataDir string
	// Namespace separates several agents (or test runs) that share one
	// daemon: it is stored as a label and becomes part of every name
	// ("suanli-NS-ID"). Empty, names are "suanli-ID" and "suanli-net-ID".
	Namespace string
	// PidsLimit caps the processes of one instance; 0 means DefaultPidsLimit.
	PidsLimit int64
	// CapAdd replaces DefaultCapAdd when not nil.
	CapAdd []string
	// ReadOnlyRootfs mounts each instance's root filesystem read-only, with
	// tmpfs on /tmp and /run.
	ReadOnlyRootfs bool
	// SubnetPool, when set ("172.16.0.0/16"), is where each instance's
	// private network takes a /28 (11 addresses), instead of the daemon's
	// default-address-pools, which hold about 30 networks unless widened
	// in daemon.json. It must overlap neither the host's own networks nor
	// Docker's default pools (172.17.0.0/16 to 172.31.0.0/16 and
	// 192.168.0.0/16), which other networks on the daemon take from.
	SubnetPool string
	// BlockHostAccess drops new connections from instances to the host's
	// own addresses (where the agent and the provider's services listen),
	// with one iptables rule per instance network (see firewall.go). It
	// needs iptables and root; New fails without them.
	BlockHostAccess bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Vault, when set, gives each instance an encrypted workspace bind-mounted
	// at Workspace and keeps volumes encrypted, with the keys the control
	// plane sends, so that release is a crypto-erase (see the package doc
	// for what stays outside it: the writable layer).
	Vault *vault.Vault
	// DiskCheckInterval is how often the disk watch measures each running
	// instance where the storage driver enforces no size (see disk.go);
	// 0 means DefaultDiskCheckInterval, a negative value turns the watch
	// off. Each check lists the containers with their sizes, which makes
	// the daemon walk every instance's writable layer.
	DiskCheckInterval time.Duration
	// DiskBytesPerGB is how many bytes one rented GB allows the disk watch;
	// 0 means 1 GiB (1<<30), as the storage drivers' size option counts.
	// Tests set it small so that a few megabytes exceed a 1 GB instance.
	DiskBytesPerGB int64
}

// Runtime runs instances as Docker containers; see the package doc for what
// it guarantees. Its methods are safe for concurrent use; the agent calls
// them for different instances at once. Close stops its background log
// followers and closes the daemon connection.
type Runtime struct {
	cli       *client.Client
	log       *slog.Logger
	dataDir   string
	ns        string
	pidsLimit int64
	capAdd    []string
	readOnly  bool
	blockHost bool
	now       func() time.Time
	vault     *vault.Vault

	hostOS, hostArch string // the daemon's platform, GOOS/GOARCH spelling
	storageDriver    string
	hostCPUs         int
	pool             netip.Prefix // Options.SubnetPool; invalid when unset

	// bg is the lifetime of the followers; cancelled by Close.
	bg     context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	pulls     map[int64]string      // instance id → pull progress message, while Ensure pulls
	followers map[int64]*follower   // one per container that exists
	live      map[int64]*liveSample // the latest stats sample per running instance
	noQuota   bool                  // the storage driver refused a size option once
	states    map[int64]*sync.Mutex

	diskUnit     int64                   // Options.DiskBytesPerGB
	diskEvery    time.Duration           // the disk watch's interval; ≤ 0: off
	graces       map[int64]time.Duration // instance id → stop grace of its last spec
	diskStopping map[int64]bool          // the disk watch is stopping the instance
	diskUnread   map[int64]bool          // a volume of the instance could not be measured (logged)
}

// Available reports whether a Docker daemon answers at the address in the
// environment, within two seconds. The agent uses it to pick the docker
// runtime when none is forced.
func Available(ctx context.Context) bool {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return err == nil
}

// New connects to the Docker daemon, reads its platform and storage driver,
// and re-adopts the containers this namespace left running (log followers
// resume where they stopped). ctx bounds only this setup. It returns an
// EUNAVAILABLE error when the daemon does not answer.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	copts := []client.Opt{client.FromEnv}
	if opts.Host != "" {
		copts = append(copts, client.WithHost(opts.Host))
	}
	cli, err := client.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, suanli.Errorf(suanli.EUNAVAILABLE, "docker daemon at %s does not answer (%v): start it, or use the process runtime", cli.DaemonHost(), err)
	}
	ver, err := cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker version: %w", err)
	}
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker info: %w", err)
	}
	r := &Runtime{
		cli:           cli,
		log:           opts.Logger,
		dataDir:       opts.DataDir,
		ns:            opts.Namespace,
		pidsLimit:     opts.PidsLimit,
		capAdd:        opts.CapAdd,
		readOnly:      opts.ReadOnlyRootfs,
		blockHost:     opts.BlockHostAccess,
		now:           opts.Now,
		vault:         opts.Vault,
		hostOS:        ver.Os,
		hostArch:      normalizeArch(ver.Arch),
		storageDriver: info.Info.Driver,
		hostCPUs:      info.Info.NCPU,
		pulls:         map[int64]string{},
		followers:     map[int64]*follower{},
		live:          map[int64]*liveSample{},
		states:        map[int64]*sync.Mutex{},
		diskUnit:      opts.DiskBytesPerGB,
		graces:        map[int64]time.Duration{},
		diskStopping:  map[int64]bool{},
		diskUnread:    map[int64]bool{},
	}
	if r.diskUnit <= 0 {
		r.diskUnit = 1 << 30
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.dataDir == "" {
		r.dataDir = filepath.Join(os.TempDir(), "suanli-docker")
	}
	if r.pidsLimit == 0 {
		r.pidsLimit = DefaultPidsLimit
	}
	if r.capAdd == nil {
		r.capAdd = DefaultCapAdd
	}
	if r.now == nil {
		r.now = time.Now
	}
	if opts.SubnetPool != "" {
		p, err := netip.ParsePrefix(opts.SubnetPool)
		if err != nil || !p.Addr().Is4() || p.Bits() > subnetBits {
			cli.Close()
			return nil, suanli.Errorf(suanli.EINVALID, "subnet pool %q: want an IPv4 prefix of /%d or wider, like 172.16.0.0/16", opts.SubnetPool, subnetBits)
		}
		r.pool = p.Masked()
	}
	if r.blockHost {
		if err := checkFirewall(ctx); err != nil {
			cli.Close()
			return nil, suanli.Errorf(suanli.EUNAVAILABLE, "%v: run the agent as root with iptables installed, or turn host blocking off", err)
		}
	}
	if err := os.MkdirAll(r.dataDir, 0o700); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker runtime data dir: %w", err)
	}
	r.bg, r.cancel = context.WithCancel(context.Background())

	cs, err := r.list(ctx)
	if err != nil {
		r.Close()
		return nil, err
	}
	for _, c := range cs {
		r.follow(c.id, c.cid)
		if r.blockHost { // iptables rules do not survive a host reboot; networks do
			if err := r.blockHostNetworks(ctx, c.id); err != nil {
				r.Close()
				return nil, err
			}
		}
	}
	r.diskEvery = opts.DiskCheckInterval
	if r.diskEvery == 0 {
		r.diskEvery = DefaultDiskCheckInterval
	}
	if r.diskEvery > 0 {
		r.wg.Go(func() { r.watchDisk(r.bg, r.diskEvery) })
	}
	r.log.Info("docker runtime ready", "daemon", cli.DaemonHost(), "server_version", ver.Version,
		"api_version", cli.ClientVersion(), "platform", r.hostOS+"/"+r.hostArch,
		"storage_driver", r.storageDriver, "adopted", len(cs))
	return r, nil
}

// Close stops the log followers and closes the daemon connection. Containers
// keep running; a new Runtime adopts them.
func (r *Runtime) Close() error {
	r.cancel()
	r.wg.Wait()
	return r.cli.Close()
}

// Name returns "docker".
func (r *Runtime) Name() string { return "docker" }

// HostPlatform returns the daemon's platform as "os/arch" ("linux/amd64").
func (r *Runtime) HostPlatform() string { return r.hostOS + "/" + r.hostArch }

// StorageDriver returns the daemon's storage driver ("overlay2",
// "fuse-overlayfs", …), which decides what disk limits and removal can
// guarantee (see the package doc).
func (r *Runtime) StorageDriver() string { return r.storageDriver }

// containerName is the container's name for instance id.
func (r *Runtime) containerName(id int64) string {
	if r.ns == "" {
		return "suanli-" + strconv.FormatInt(id, 10)
	}
	return "suanli-" + r.ns + "-" + strconv.FormatInt(id, 10)
}

// networkName is the private network's name for instance id.
func (r *Runtime) networkName(id int64) string {
	if r.ns == "" {
		return "suanli-net-" + strconv.FormatInt(id, 10)
	}
	return "suanli-net-" + r.ns + "-" + strconv.FormatInt(id, 10)
}

func (r *Runtime) labels(id int64) map[string]string {
	return map[string]string{
		LabelManaged:   "true",
		LabelInstance:  strconv.FormatInt(id, 10),
		LabelNamespace: r.ns,
	}
}

// instanceLock serialises the runtime's own bookkeeping for one instance
// (state file, follower) between Ensure, Status and Usage.
func (r *Runtime) instanceLock(id int64) *sync.Mutex {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.states[id]
	if m == nil {
		m = &sync.Mutex{}
		r.states[id] = m
	}
	return m
}

// managed is one container of this namespace, as listed.
type managed struct {
	id    int64
	cid   string
	state container.ContainerState
}

// list returns this namespace's containers, running or not.
func (r *Runtime) list(ctx context.Context) ([]managed, error) {
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: client.Filters{}.Add("label", LabelManaged+"=true"),
	})
	if err != nil {
		return nil, r.daemonErr("list containers", err)
	}
	var out []managed
	for _, c := range res.Items {
		if c.Labels[LabelNamespace] != r.ns {
			continue
		}
		id, err := strconv.ParseInt(c.Labels[LabelInstance], 10, 64)
		if err != nil {
			r.log.Warn("managed container without instance id", "container", c.ID, "label", c.Labels[LabelInstance])
			continue
		}
		out = append(out, managed{id: id, cid: c.ID, state: c.State})
	}
	slices.SortFunc(out, func(a, b managed) int { return int(a.id - b.id) })
	return out, nil
}

// inspect returns the instance's container, or nil when there is none.
func (r *Runtime) inspect(ctx context.Context, id int64) (*container.InspectResponse, error) {
	res, err := r.cli.ContainerInspect(ctx, r.containerName(id), client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, r.daemonErr("inspect instance "+strconv.FormatInt(id, 10), err)
	}
	c := res.Container
	if c.Config == nil || c.Config.Labels[LabelManaged] != "true" || c.Config.Labels[LabelNamespace] != r.ns {
		return nil, suanli.Errorf(suanli.ECONFLICT, "container %s exists but was not created by this agent: remove or rename it", r.containerName(id))
	}
	if c.State == nil || c.HostConfig == nil {
		return nil, fmt.Errorf("inspect %s: incomplete answer from the daemon", r.containerName(id))
	}
	return &c, nil
}

// Ensure brings the instance to spec.Desired, creating its network and
// container first when needed (pulling the image, with progress in Status,
// after the pre-flight checks of Preflight).
//
// Desired running starts a container that was created or stopped by this
// runtime. A container whose workload exited by itself stays "exited" (the
// control plane restarts it by asking for stopped, then running), so that an
// exit is reported rather than hidden by a restart loop. Desired stopped
// sends SIGTERM, then SIGKILL after spec.StopGrace (DefaultStopGrace when
// zero); the container's files are kept.
//
// Errors are *suanli.Error where a person can act on them: EINVALID for a
// bad spec or an unusable image, ECONFLICT for a taken host port or a foreign
// container in the way, EUNAVAILABLE when the daemon is down.
func (r *Runtime) Ensure(ctx context.Context, spec suanli.InstanceSpec) error {
	if spec.Desired != suanli.DesiredRunning && spec.Desired != suanli.DesiredStopped {
		return suanli.Errorf(suanli.EINVALID, "instance %d: desired state %q: want running or stopped", spec.ID, spec.Desired)
	}
	c, err := r.inspect(ctx, spec.ID)
	if err != nil {
		return err
	}
	if err := r.openWorkspace(spec, c); err != nil {
		return err
	}
	if c == nil {
		if err := r.create(ctx, spec); err != nil {
			return err
		}
		if c, err = r.inspect(ctx, spec.ID); err != nil {
			return err
		} else if c == nil {
			return fmt.Errorf("instance %d: container vanished after create", spec.ID)
		}
	}

	r.mu.Lock()
	r.graces[spec.ID] = spec.StopGrace
	r.mu.Unlock()
	mu := r.instanceLock(spec.ID)
	mu.Lock()
	defer mu.Unlock()
	st := r.loadState(spec.ID)

	switch spec.Desired {
	case suanli.DesiredRunning:
		switch c.State.Status {
		case container.StateRunning, container.StateRestarting:
			return nil
		case container.StatePaused:
			_, err := r.cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{})
			return r.daemonErr(fmt.Sprintf("instance %d: unpause", spec.ID), err)
		case container.StateRemoving, container.StateDead:
			return suanli.Errorf(suanli.ECONFLICT, "instance %d: container is %s: destroy and recreate the instance", spec.ID, c.State.Status)
		case container.StateExited:
			if !st.Stopped {
				return nil // the workload ended by itself: stays exited until stopped, then started
			}
		}
		st.Stopped, st.StartAsked, st.DiskExceeded = false, r.now(), ""
		if err := r.saveState(spec.ID, st); err != nil {
			return err
		}
		if err := r.start(ctx, spec, c); err != nil {
			return err
		}
		if spec.Token != "" {
			// Once it runs, its token volume is mounted and writable.
			if err := r.copyToken(ctx, c.ID, spec.Token); err != nil {
				r.log.Warn("write instance token", "instance_id", spec.ID, "err", err)
			}
		}
		r.follow(spec.ID, c.ID)
		r.log.Info("instance started", "instance_id", spec.ID, "container", shortID(c.ID))
		return nil

	default: // stopped
		if !st.Stopped {
			st.Stopped = true
			if err := r.saveState(spec.ID, st); err != nil {
				return err
			}
		}
		if !c.State.Running && !c.State.Paused && !c.State.Restarting {
			return nil
		}
		if c.State.Paused {
			if _, err := r.cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{}); err != nil {
				return r.daemonErr(fmt.Sprintf("instance %d: unpause before stop", spec.ID), err)
			}
		}
		// Fold the traffic counters in before the network namespace goes.
		r.foldLiveLocked(spec.ID, st)
		grace := graceSeconds(spec.StopGrace)
		if _, err := r.cli.ContainerStop(ctx, c.ID, client.ContainerStopOptions{Timeout: &grace}); err != nil && !cerrdefs.IsNotModified(err) {
			return r.daemonErr(fmt.Sprintf("instance %d: stop", spec.ID), err)
		}
		r.log.Info("instance stopped", "instance_id", spec.ID, "grace_s", grace)
		return nil
	}
}

// graceSeconds rounds a stop grace up to whole seconds, as the daemon wants.
func graceSeconds(d time.Duration) int {
	if d <= 0 {
		d = DefaultStopGrace
	}
	return int((d + time.Second - 1) / time.Second)
}

// Remove is Release without the report.
func (r *Runtime) Remove(ctx context.Context, id int64) error {
	_, err := r.Release(ctx, id)
	return err
}

// Release stops the instance (SIGKILL: the control plane has already
// decided) and deletes its container, writable layer, anonymous volumes,
// private network, log file and state file, then crypto-erases its
// encrypted workspace when it has one. What "deleted" means for the bytes
// of the writable layer depends on the storage driver; see the package doc.
// Releasing an unknown instance is not an error (its Release has no
// Method).
func (r *Runtime) Release(ctx context.Context, id int64) (suanli.Release, error) {
	rel, err := r.remove(ctx, id)
	if err != nil {
		return rel, err
	}
	return rel, r.eraseWorkspace(id, &rel)
}

func (r *Runtime) remove(ctx context.Context, id int64) (suanli.Release, error) {
	rel := suanli.Release{Kind: suanli.ReleaseInstance, ID: id}
	c, err := r.inspect(ctx, id)
	if err != nil && suanli.ErrorCode(err) != suanli.ECONFLICT {
		return rel, err
	}
	r.unfollow(id) // before the lock: a follower folds its last sample under it
	mu := r.instanceLock(id)
	mu.Lock()
	defer mu.Unlock()
	if c != nil {
		_, err := r.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return rel, r.daemonErr(fmt.Sprintf("instance %d: remove container", id), err)
		}
	}
	if err := r.removeNetwork(ctx, id); err != nil {
		return rel, err
	}
	for _, p := range []string{r.logPath(id), r.posPath(id), r.statePath(id)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return rel, fmt.Errorf("instance %d: %w", id, err)
		}
	}
	r.mu.Lock()
	delete(r.live, id)
	delete(r.pulls, id)
	delete(r.graces, id)
	delete(r.diskUnread, id)
	r.mu.Unlock()
	if c != nil {
		r.log.Info("instance removed", "instance_id", id, "container", shortID(c.ID))
		rel.Method = suanli.ReleaseDelete
		rel.Detail = fmt.Sprintf("deleted the container with its writable layer and anonymous volumes (storage driver %s): their blocks are freed, not overwritten", r.storageDriver)
	}
	return rel, nil
}

// Status reports every instance of this namespace: "pulling" while Ensure
// pulls its image (Message: "pulling 45% of 1.2 GB"), "running" (with
// StartedAt, telemetry and the mapped ports in Message), "stopped" (stopped
// by this runtime, or created and not started), "exited" (the workload
// ended, or the disk watch stopped it for its disk use; ExitCode set) and
// "failed" (the daemon lost the container).
func (r *Runtime) Status(ctx context.Context) ([]suanli.InstanceReport, error) {
	cs, err := r.list(ctx)
	if err != nil {
		return nil, err
	}
	var out []suanli.InstanceReport
	seen := map[int64]bool{}
	for _, m := range cs {
		seen[m.id] = true
		c, err := r.inspect(ctx, m.id)
		if err != nil {
			return nil, err
		} else if c == nil {
			continue // removed meanwhile
		}
		out = append(out, r.report(ctx, m.id, c))
	}
	r.mu.Lock()
	for id, msg := range r.pulls {
		if !seen[id] {
			out = append(out, suanli.InstanceReport{ID: id, Status: suanli.StatusPulling, Message: msg})
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b suanli.InstanceReport) int { return int(a.ID - b.ID) })
	return out, nil
}

// report turns one inspected container into the agent's report.
func (r *Runtime) report(ctx context.Context, id int64, c *container.InspectResponse) suanli.InstanceReport {
	mu := r.instanceLock(id)
	mu.Lock()
	defer mu.Unlock()
	st := r.loadState(id)
	rep := suanli.InstanceReport{ID: id}
	var ended *time.Time // when an exited container ended
	if t, err := time.Parse(time.RFC3339Nano, c.State.FinishedAt); err == nil && !t.IsZero() {
		ended = &t
	}
	switch c.State.Status {
	case container.StateRunning, container.StateRestarting, container.StatePaused:
		rep.Status = suanli.StatusRunning
		if t, err := time.Parse(time.RFC3339Nano, c.State.StartedAt); err == nil && !t.IsZero() {
			rep.StartedAt = &t
		}
		rep.Telemetry = r.telemetry(id, c.State.StartedAt)
		var parts []string
		if c.State.Paused {
			parts = append(parts, "paused")
		}
		if ports := portsOf(c); len(ports) > 0 {
			rep.Ports = ports
			parts = append(parts, "ports "+formatPorts(ports))
		}
		if _, ok := c.HostConfig.StorageOpt["size"]; !ok && c.Config.Labels[labelDiskGB] != "" {
			parts = append(parts, r.diskNote(c.Config.Labels[labelDiskGB]))
		}
		rep.Message = strings.Join(parts, "; ")
		r.kick(id, c.ID)
	case container.StateCreated:
		rep.Status = suanli.StatusStopped
		rep.Message = "created, not started"
	case container.StateExited:
		finished, _ := time.Parse(time.RFC3339Nano, c.State.FinishedAt)
		if st.Stopped || (!st.StartAsked.IsZero() && !finished.IsZero() && finished.Before(st.StartAsked)) {
			// Stopped by us; or an inspection older than the start that
			// followed it (this Status raced Ensure): not a new exit.
			rep.Status = suanli.StatusStopped
			rep.EndedAt = ended
			break
		}
		rep.Status = suanli.StatusExited
		rep.EndedAt = ended
		code := c.State.ExitCode
		rep.ExitCode = &code
		rep.Message = fmt.Sprintf("exited with code %d", code)
		if st.DiskExceeded != "" {
			rep.Message = st.DiskExceeded
			break
		}
		if c.State.OOMKilled {
			rep.Message += fmt.Sprintf("; killed for using more than its %d MB of memory", c.HostConfig.Memory>>20)
		}
		if c.State.Error != "" {
			rep.Message += "; " + c.State.Error
		}
	default: // removing, dead
		rep.Status = suanli.StatusFailed
		rep.Message = fmt.Sprintf("container is %s: destroy the instance", c.State.Status)
		if c.State.Error != "" {
			rep.Message += " (" + c.State.Error + ")"
		}
	}
	return rep
}

// daemonErr wraps a daemon error with context, turning a lost connection into
// EUNAVAILABLE.
func (r *Runtime) daemonErr(what string, err error) error {
	if err == nil {
		return nil
	}
	if client.IsErrConnectionFailed(err) {
		return suanli.Errorf(suanli.EUNAVAILABLE, "%s: docker daemon at %s does not answer: start it", what, r.cli.DaemonHost())
	}
	return fmt.Errorf("%s: %w", what, err)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
