package docker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/suanli/suanli"
)

// labelDiskGB records the rented disk on the container, so Status can say
// when the storage driver does not enforce it.
const labelDiskGB = "suanli.disk_gb"

// EnvPorts is the spec.Env key that lists the container's TCP ports to
// publish ("8080,22"), until suanli.InstanceSpec carries a Ports field.
// Each is mapped to a free host port chosen at create, and the container
// gets SUANLI_TCP_PORT_<port>=<host port> in its environment.
const EnvPorts = "SUANLI_PORTS"

// maxPorts bounds how many ports one instance may publish.
const maxPorts = 32

// quotaDrivers are the storage drivers that may accept a per-container
// size (overlay2 only on xfs mounted with pquota; Ensure finds out).
var quotaDrivers = []string{"overlay2", "devicemapper", "btrfs", "zfs", "windowsfilter"}

// create makes the instance's network and container (pulling the image when
// needed) without starting it.
func (r *Runtime) create(ctx context.Context, spec suanli.InstanceSpec) error {
	if err := r.checkSpec(spec); err != nil {
		return err
	}
	if err := r.ensureImage(ctx, spec); err != nil {
		return err
	}
	if err := r.checkDisk(ctx, spec); err != nil {
		return err
	}
	netName, err := r.ensureNetwork(ctx, spec.ID)
	if err != nil {
		return err
	}
	ports, _ := requestedPorts(spec) // checked by checkSpec
	hostPorts, err := pickHostPorts(len(ports))
	if err != nil {
		return fmt.Errorf("instance %d: choose host ports: %w", spec.ID, err)
	}
	r.mu.Lock()
	quota := !r.noQuota && spec.DiskGB > 0 && slices.Contains(quotaDrivers, r.storageDriver)
	r.mu.Unlock()

	start := r.now()
	opts := r.createOptions(spec, netName, ports, hostPorts, quota)
	res, err := r.cli.ContainerCreate(ctx, opts)
	if err != nil && quota && isStorageOptErr(err) {
		r.mu.Lock()
		r.noQuota = true
		r.mu.Unlock()
		r.log.Warn("storage driver refuses per-container size; disk limits not enforced",
			"storage_driver", r.storageDriver, "err", err)
		opts = r.createOptions(spec, netName, ports, hostPorts, false)
		res, err = r.cli.ContainerCreate(ctx, opts)
	}
	if cerrdefs.IsConflict(err) {
		return nil // created meanwhile (a retried Ensure); Ensure inspects it next
	} else if err != nil {
		return r.daemonErr(fmt.Sprintf("instance %d: create container", spec.ID), err)
	}
	for _, w := range res.Warnings {
		r.log.Warn("container create warning", "instance_id", spec.ID, "warning", w)
	}
	r.log.Info("container created", "instance_id", spec.ID, "container", shortID(res.ID),
		"image", spec.Image, "ports", formatPorts(zipPorts(ports, hostPorts)),
		"duration", r.now().Sub(start).Round(time.Millisecond))
	return nil
}

// createOptions is the whole container definition: limits, isolation,
// network, ports and environment.
func (r *Runtime) createOptions(spec suanli.InstanceSpec, netName string, ports, hostPorts []int, quota bool) client.ContainerCreateOptions {
	env := []string{"SUANLI_INSTANCE_ID=" + strconv.FormatInt(spec.ID, 10)}
	if spec.Token != "" {
		env = append(env, "SUANLI_TOKEN="+spec.Token, "SUANLI_TOKEN_FILE="+TokenFile)
	}
	if r.encrypted(spec) {
		env = append(env, "SUANLI_WORKSPACE="+Workspace)
	}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k != "SUANLI_INSTANCE_ID" && k != "SUANLI_TOKEN" && k != "SUANLI_TOKEN_FILE" && k != "SUANLI_WORKSPACE" {
			env = append(env, k+"="+spec.Env[k])
		}
	}
	exposed := network.PortSet{}
	bindings := network.PortMap{}
	for i, p := range ports {
		cp, _ := network.PortFrom(uint16(p), network.TCP)
		exposed[cp] = struct{}{}
		bindings[cp] = []network.PortBinding{{HostPort: strconv.Itoa(hostPorts[i])}}
		env = append(env, fmt.Sprintf("SUANLI_TCP_PORT_%d=%d", p, hostPorts[i]))
	}
	labels := r.labels(spec.ID)
	if spec.DiskGB > 0 {
		labels[labelDiskGB] = strconv.FormatInt(spec.DiskGB, 10)
	}
	grace := graceSeconds(spec.StopGrace)
	cfg := &container.Config{
		Image:        spec.Image,
		Env:          env,
		Labels:       labels,
		ExposedPorts: exposed,
		StopTimeout:  &grace,
	}
	if len(spec.Cmd) > 0 {
		cfg.Cmd = slices.Clone(spec.Cmd)
	}

	pids := r.pidsLimit
	hc := &container.HostConfig{
		NetworkMode:   container.NetworkMode(netName),
		PortBindings:  bindings,
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		Mounts:        append(r.volumeMounts(spec), r.workspaceMount(spec)...),
		LogConfig:     container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "50m", "max-file": "2"}},
		Privileged:    false,
		CapDrop:       []string{"ALL"},
		CapAdd:        slices.Clone(r.capAdd),
		SecurityOpt:   []string{"no-new-privileges:true"},
		IpcMode:       container.IPCModePrivate,
		OomScoreAdj:   500, // the workload dies before the agent does
		Resources: container.Resources{
			PidsLimit: &pids,
		},
	}
	if r.readOnly {
		hc.ReadonlyRootfs = true
		hc.Tmpfs = map[string]string{"/tmp": "rw,nosuid,nodev", "/run": "rw,nosuid,nodev"}
	}
	if spec.Token != "" {
		// The token file lives on an anonymous volume of its own: the
		// archive API can write there even when the root filesystem is
		// read-only (it cannot write into a tmpfs), and it goes with the
		// container.
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Target: path.Dir(TokenFile)})
	}
	if spec.CPUCores > 0 {
		cores := int64(spec.CPUCores)
		if r.hostCPUs > 0 && cores > int64(r.hostCPUs) {
			cores = int64(r.hostCPUs)
		}
		hc.NanoCPUs = cores * 1e9
	}
	if spec.RAMMB > 0 {
		hc.Memory = spec.RAMMB << 20
		hc.MemorySwap = hc.Memory // no swap beyond the rented memory
		if spec.RAMMB >= 512 {
			hc.ShmSize = spec.RAMMB << 20 / 4 // data loaders need more than Docker's 64 MB
		}
	}
	if quota {
		hc.StorageOpt = map[string]string{"size": strconv.FormatInt(spec.DiskGB, 10) + "G"}
	}
	if dr := gpuRequests(spec); dr != nil {
		hc.DeviceRequests = dr
	}
	return client.ContainerCreateOptions{
		Name:       r.containerName(spec.ID),
		Config:     cfg,
		HostConfig: hc,
		NetworkingConfig: &network.NetworkingConfig{
			EndpointsConfig: map[string]*network.EndpointSettings{netName: {}},
		},
	}
}

// gpuRequests asks the NVIDIA runtime for the spec's GPUs, by UUID when the
// agent knows them, else by index; none for simulated GPUs.
func gpuRequests(spec suanli.InstanceSpec) []container.DeviceRequest {
	if spec.Simulated {
		return nil
	}
	ids := slices.Clone(spec.GPUUUIDs)
	if len(ids) == 0 {
		for _, i := range spec.GPUIndexes {
			ids = append(ids, strconv.Itoa(i))
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return []container.DeviceRequest{{
		Driver:       "nvidia",
		DeviceIDs:    ids,
		Capabilities: [][]string{{"gpu"}},
	}}
}

// start starts a created or stopped container. A container that never ran
// and whose host port was taken since create is recreated with new ports (up
// to three times); one that ran before keeps its ports (its files live in
// its writable layer), so a taken port is a conflict.
func (r *Runtime) start(ctx context.Context, spec suanli.InstanceSpec, c *container.InspectResponse) error {
	for attempt := 1; ; attempt++ {
		t0 := r.now()
		_, err := r.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{})
		if err == nil {
			r.log.Debug("container start", "instance_id", spec.ID, "duration", r.now().Sub(t0).Round(time.Millisecond))
			return nil
		}
		msg := err.Error()
		switch {
		case strings.Contains(msg, "could not select device driver"):
			var ids []string
			for _, d := range gpuRequests(spec) {
				ids = append(ids, d.DeviceIDs...)
			}
			return suanli.Errorf(suanli.EINVALID, "instance %d asks GPUs %v but Docker on this host has no NVIDIA runtime: install the NVIDIA Container Toolkit and restart dockerd", spec.ID, ids)
		case strings.Contains(msg, "port is already allocated") || strings.Contains(msg, "address already in use"):
			if neverStarted(c) && attempt < 3 {
				r.log.Info("host port taken since create; recreating with new ports", "instance_id", spec.ID, "err", msg)
				if _, err := r.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
					return r.daemonErr(fmt.Sprintf("instance %d: remove before recreate", spec.ID), err)
				}
				if err := r.create(ctx, spec); err != nil {
					return err
				}
				nc, err := r.inspect(ctx, spec.ID)
				if err != nil {
					return err
				} else if nc == nil {
					return fmt.Errorf("instance %d: container vanished after recreate", spec.ID)
				}
				*c = *nc
				continue
			}
			return suanli.Errorf(suanli.ECONFLICT, "instance %d: a host port it publishes (%s) is taken by another program: free it, or destroy and recreate the instance", spec.ID, formatPorts(portsOf(c)))
		}
		return r.daemonErr(fmt.Sprintf("instance %d: start", spec.ID), err)
	}
}

func neverStarted(c *container.InspectResponse) bool {
	t, err := time.Parse(time.RFC3339Nano, c.State.StartedAt)
	return err != nil || t.IsZero() || t.Year() < 2000
}

func isStorageOptErr(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "storage-opt") || strings.Contains(s, "storage opt") || strings.Contains(s, "storageopt")
}

// ensureNetwork returns the instance's private bridge network, creating it
// when missing: one network per instance, inter-container traffic off, so
// that instances cannot reach each other (Docker isolates bridge networks
// from one another).
func (r *Runtime) ensureNetwork(ctx context.Context, id int64) (string, error) {
	name := r.networkName(id)
	nets, err := r.findNetworks(ctx, id)
	if err != nil {
		return "", err
	}
	if len(nets) > 0 {
		return name, r.blockHostNetworks(ctx, id)
	}
	opts := client.NetworkCreateOptions{
		Driver: "bridge",
		Labels: r.labels(id),
		Options: map[string]string{
			"com.docker.network.bridge.enable_icc": "false",
		},
	}
	if r.blockHost {
		opts.Options[bridgeNameOpt] = bridgeName(name)
	}
	if !r.pool.IsValid() {
		_, err = r.createNetwork(ctx, name, opts)
		if err != nil && strings.Contains(err.Error(), "non-overlapping IPv4 address pool") {
			return "", suanli.Errorf(suanli.ECONFLICT, "instance %d: Docker has no free subnet for another private network: destroy unused instances, set a subnet pool for the agent, or widen default-address-pools in daemon.json", id)
		} else if err != nil {
			return "", r.daemonErr(fmt.Sprintf("instance %d: create network %s", id, name), err)
		}
		return name, r.blockHostNetworks(ctx, id)
	}
	// Take the first /28 of the pool that no network uses; another agent
	// (or a concurrent Ensure) may take it first, then try the next.
	used, err := r.usedSubnets(ctx)
	if err != nil {
		return "", err
	}
	for sub := range subnets(r.pool) {
		if slices.ContainsFunc(used, sub.Overlaps) {
			continue
		}
		opts.IPAM = &network.IPAM{Config: []network.IPAMConfig{{Subnet: sub}}}
		_, err = r.createNetwork(ctx, name, opts)
		if err == nil {
			return name, r.blockHostNetworks(ctx, id)
		} else if !strings.Contains(err.Error(), "overlap") {
			return "", r.daemonErr(fmt.Sprintf("instance %d: create network %s on %s", id, name, sub), err)
		}
		used = append(used, sub)
	}
	return "", suanli.Errorf(suanli.ECONFLICT, "instance %d: subnet pool %s is full (one /%d per instance): destroy unused instances or widen the pool", id, r.pool, subnetBits)
}

// subnetBits is the size of an instance network taken from a subnet pool.
const subnetBits = 28

// subnets yields the /28 subnets of pool in order.
func subnets(pool netip.Prefix) func(yield func(netip.Prefix) bool) {
	return func(yield func(netip.Prefix) bool) {
		base := pool.Addr().As4()
		start := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
		n := uint32(1) << (subnetBits - pool.Bits())
		for i := range n {
			a := start + i<<(32-subnetBits)
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), subnetBits)
			if !yield(p) {
				return
			}
		}
	}
}

// usedSubnets lists the subnets of every network on the daemon.
func (r *Runtime) usedSubnets(ctx context.Context) ([]netip.Prefix, error) {
	res, err := r.cli.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return nil, r.daemonErr("list networks", err)
	}
	var out []netip.Prefix
	for _, n := range res.Items {
		for _, c := range n.IPAM.Config {
			if c.Subnet.IsValid() {
				out = append(out, c.Subnet)
			}
		}
	}
	return out, nil
}

// bridgeNameOpt is the bridge driver's option naming the Linux bridge.
const bridgeNameOpt = "com.docker.network.bridge.name"

// createNetwork creates the network and returns its id.
func (r *Runtime) createNetwork(ctx context.Context, name string, opts client.NetworkCreateOptions) (string, error) {
	res, err := r.cli.NetworkCreate(ctx, name, opts)
	if err != nil {
		return "", err
	}
	return res.ID, nil
}

// findNetworks returns the instance's networks (normally one; an API below
// 1.44 allows duplicates by name, so all are returned).
func (r *Runtime) findNetworks(ctx context.Context, id int64) ([]network.Summary, error) {
	res, err := r.cli.NetworkList(ctx, client.NetworkListOptions{
		Filters: client.Filters{}.Add("label", LabelInstance+"="+strconv.FormatInt(id, 10)),
	})
	if err != nil {
		return nil, r.daemonErr("list networks", err)
	}
	var out []network.Summary
	for _, n := range res.Items {
		if n.Name == r.networkName(id) && n.Labels[LabelNamespace] == r.ns && n.Labels[LabelManaged] == "true" {
			out = append(out, n)
		}
	}
	return out, nil
}

// bridgeOf is the Linux bridge of a bridge network.
func bridgeOf(n network.Summary) string {
	if b := n.Options[bridgeNameOpt]; b != "" {
		return b
	}
	return "br-" + shortID(n.ID)
}

// blockHostNetworks puts the host-blocking rule on the instance's networks,
// when the runtime blocks host access.
func (r *Runtime) blockHostNetworks(ctx context.Context, id int64) error {
	if !r.blockHost {
		return nil
	}
	nets, err := r.findNetworks(ctx, id)
	if err != nil {
		return err
	}
	for _, n := range nets {
		if err := r.addHostRule(ctx, bridgeOf(n)); err != nil {
			return fmt.Errorf("instance %d: block host access: %w", id, err)
		}
	}
	return nil
}

func (r *Runtime) removeNetwork(ctx context.Context, id int64) error {
	nets, err := r.findNetworks(ctx, id)
	if err != nil {
		return err
	}
	for _, n := range nets {
		if _, err := r.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return r.daemonErr(fmt.Sprintf("instance %d: remove network", id), err)
		}
		if r.blockHost {
			r.deleteHostRule(ctx, bridgeOf(n))
		}
	}
	return nil
}

// requestedPorts parses spec.Env[EnvPorts]: TCP ports, comma- or
// space-separated, "/tcp" allowed.
func requestedPorts(spec suanli.InstanceSpec) ([]int, error) {
	if len(spec.Ports) > 0 {
		ports := slices.Clone(spec.Ports)
		slices.Sort(ports)
		ports = slices.Compact(ports)
		for _, p := range ports {
			if p < 1 || p > 65535 {
				return nil, suanli.FieldErrorf("ports", "%d is not a TCP port (1-65535)", p)
			}
		}
		if len(ports) > maxPorts {
			return nil, suanli.FieldErrorf("ports", "%d ports asked, at most %d", len(ports), maxPorts)
		}
		return ports, nil
	}
	v := strings.TrimSpace(spec.Env[EnvPorts])
	if v == "" {
		return nil, nil
	}
	var ports []int
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		f = strings.TrimSuffix(strings.ToLower(f), "/tcp")
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 || p > 65535 {
			return nil, suanli.FieldErrorf("env."+EnvPorts, "%q is not a TCP port (1-65535); write ports like \"8080,22\"", f)
		}
		ports = append(ports, p)
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	if len(ports) > maxPorts {
		return nil, suanli.FieldErrorf("env."+EnvPorts, "%d ports asked, at most %d", len(ports), maxPorts)
	}
	return ports, nil
}

// pickHostPorts finds n free TCP ports on the host by binding port 0 (all
// held until every one is chosen, so they differ).
func pickHostPorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// portsOf returns container port → host port as configured on c.
func portsOf(c *container.InspectResponse) map[int]int {
	out := map[int]int{}
	if c.HostConfig == nil {
		return out
	}
	for p, bs := range c.HostConfig.PortBindings {
		if p.Proto() != network.TCP || len(bs) == 0 {
			continue
		}
		if hp, err := strconv.Atoi(bs[0].HostPort); err == nil {
			out[int(p.Num())] = hp
		}
	}
	return out
}

func zipPorts(ports, hostPorts []int) map[int]int {
	m := map[int]int{}
	for i, p := range ports {
		m[p] = hostPorts[i]
	}
	return m
}

// formatPorts writes "22→40022, 8080→40080", ordered by container port.
func formatPorts(m map[int]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d→%d", k, m[k])
	}
	return b.String()
}
