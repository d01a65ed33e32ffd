// Package docker is the agent's Docker runtime: it runs each instance as one
// container through the Docker Engine API (github.com/moby/moby/client,
// negotiating down to API 1.40, so Docker Engine 19.03 and later). It
// implements agent.Runtime and agent.UsageCounter, and the optional
// Preflighter, Execer and PortMapper declared here.
//
// It owns the containers and networks labelled suanli.managed=true in its
// namespace, and its DataDir. It must not touch any other container, image
// or network, and it never removes images (they are shared between
// instances and with the provider's own use of Docker).
//
// # What an instance gets
//
//   - A container named suanli-ID (suanli-NS-ID with a namespace), labelled
//     suanli.instance=ID, so a new Runtime after an agent restart finds and
//     re-adopts it; its private bridge network suanli-net-ID.
//   - Limits from the spec: NanoCPUs = cpu_cores (capped at the host's),
//     memory = ram_mb with no extra swap, PIDs = Options.PidsLimit (4096),
//     /dev/shm = a quarter of the memory. Real GPUs (not simulated) as an
//     NVIDIA device request by UUID, else by index; a host without the
//     NVIDIA Container Toolkit refuses such an instance with a message that
//     says so.
//   - Isolation: never privileged; no-new-privileges (setuid binaries such as
//     sudo gain nothing); every capability dropped, then DefaultCapAdd
//     added back (no NET_RAW, MKNOD, SYS_ADMIN…); Docker's default seccomp
//     profile; private IPC; OOM score raised so the kernel kills the
//     workload before the agent; optionally a read-only root filesystem.
//     The workload may still run as uid 0 inside the container, which is
//     uid 0 on the host unless the daemon uses user namespaces
//     (userns-remap); providers who rent to strangers should enable it.
//   - Networks: one bridge network per instance, inter-container traffic
//     off. Docker drops traffic between different bridge networks, so two
//     instances cannot reach each other's addresses. Without more, an
//     instance reaches the host itself through its bridge gateway: the
//     agent's ports, and other instances' published ports (public anyway).
//     With Options.BlockHostAccess one iptables rule per instance bridge
//     drops new connections from the instance to any address of the host,
//     which closes both; the Internet and the instance's own published
//     ports still work. Each network takes a subnet from the daemon's
//     default-address-pools, which by default hold about 30 networks, or a
//     /28 from Options.SubnetPool, which removes that limit.
//   - Ports: until suanli.InstanceSpec has a Ports field, spec.Env
//     SUANLI_PORTS="8080,22" lists the TCP ports to publish. Each gets a free
//     host port chosen at create (kept across stop and start), the
//     container gets SUANLI_TCP_PORT_8080=<host port> in its environment, and
//     Status and Ports report the mapping.
//   - Environment: SUANLI_INSTANCE_ID, then spec.Env. spec.Cmd, when set,
//     replaces the image's CMD (its ENTRYPOINT stays).
//
// # Images
//
// Ensure pulls an image that is not on the host, and Status reports
// "pulling" meanwhile with the progress ("pulling 45% of 1.2 GB"). Before
// creating anything, Ensure (and Preflight, which the control plane can ask
// before it bills) refuses an image built for another OS or architecture
// ("image alpine:3 is linux/arm64, host is linux/amd64: choose an amd64 or
// multi-arch image"), an image that is neither here nor pullable, and a disk
// size larger than the free space under the daemon's root directory.
//
// # Disk
//
// The rented disk size becomes the container's size storage option where
// the storage driver supports one: overlay2 on xfs mounted with pquota,
// devicemapper, btrfs, zfs. Elsewhere (overlay2 on ext4, fuse-overlayfs, vfs)
// the driver cannot hold a container to a size, and a disk watch (disk.go)
// enforces it after the fact: every Options.DiskCheckInterval (30 s by
// default) it measures each running instance's writable layer (one
// container list with sizes for all instances) plus its anonymous volumes
// and encrypted workspace (walking their directories on the host; the
// renter's Suanli volumes are sized and billed apart and do not count), and
// stops an instance over its rented size, SIGTERM then SIGKILL after its
// grace. Status then reports it exited with the reason ("stopped by the host
// agent: disk use 12.3 GB exceeded the rented 10 GB (…): recreate with a
// larger --disk, or start it and delete files within 30s"), which the
// control plane shows as the instance's message; like an exit, it is not
// started again until the control plane asks for stopped, then running (a
// renter's --restart policy may do so, up to its limit; each run over the
// size is stopped the same way). A
// running instance's message says the disk is watched ("disk 10 GB watched
// every 30s (storage driver fuse-overlayfs has no quota)").
//
// What it costs and misses: to answer the list with sizes the daemon walks
// every instance's writable layer, and the agent walks the anonymous
// volumes, so a check takes time in proportion to the files instances
// wrote, once per interval for all instances together (TestDiskWatch logs
// one check of a small instance: 58 ms with fuse-overlayfs on a busy 2-core
// test machine; a layer of many files takes longer).
// Between two checks an instance can write as fast as the disk allows, so
// it may exceed its size by that much before it is stopped, and a host disk
// that fills up in that time fails every writer on it; providers who rent
// to strangers should prefer a driver with quotas. A volume the agent cannot
// read (a daemon on another host, an agent without root) counts 0, logged
// once per instance.
//
// # Lifecycle
//
// Stopping sends SIGTERM, then SIGKILL after spec.StopGrace; the container
// and its writable layer stay, so files written before a stop are there
// after the next start (host ports too). A workload that ends by itself is
// reported "exited" with its exit code (and "killed for using more than its
// N MB of memory" after an OOM kill) and is not restarted by Ensure until
// the control plane asks for stopped, then running; "stopped" means this
// runtime stopped it (remembered in DataDir, so it survives agent restarts).
//
// # Removal: what it guarantees, per storage driver
//
// Remove deletes the container with its writable layer and anonymous
// volumes, its network, and the runtime's log and state files. After it
// returns, nothing of the instance is reachable through Docker or the
// agent. It does not overwrite the bytes: the writable layer is a directory
// (overlay2, fuse-overlayfs, vfs, btrfs subvolume, zfs dataset) or a thin
// device (devicemapper) that the driver deletes or discards; the blocks go
// back to the host filesystem's free space, where they may be recovered by
// someone with raw access to the host's disk until they are reused. On SSDs
// with discard/TRIM the device may erase them later, without a promise of
// when. Overwriting a layer in place is not possible for copy-on-write
// layers (overlay upper directories share nothing with the image, but the
// filesystem may place new data anywhere, and btrfs/zfs never overwrite in
// place). Making data unrecoverable needs encryption at rest with a
// per-instance key (crypto-erase): with Options.Vault (the agent's
// --disk-encryption) each instance gets an encrypted workspace bind-mounted
// at /workspace (SUANLI_WORKSPACE) and each volume is a bind of an
// encrypted directory, under keys only the control plane keeps; Release
// removes the key and deletes the ciphertext, and says so. The writable
// layer stays outside it: files a workload writes elsewhere than
// /workspace and its volumes are deleted by the storage driver without
// overwriting, as above, and Release says that too. Providers who need the
// whole layer covered should also put the Docker root on an encrypted
// filesystem, whose key protects against a stolen disk but not against the
// host's own operator.
//
// # Logs, counters, telemetry
//
// Each container has a follower: one goroutine copies the daemon's log
// (stdout and stderr in order) to DataDir, so ReadLog offsets are stable
// across stops, starts and agent restarts (a checkpoint file lets a new
// Runtime resume without losing or repeating a byte). The local log file is
// not rotated yet: it grows with what the instance writes until Remove.
// Docker's own copy is capped at two files of 50 MB. Another goroutine
// streams the container's stats (Docker samples once a second) and keeps
// the latest sample in memory, so Status and Usage cost no stats request
// (a one-shot stats request to Docker 20.10 takes a second). Usage: bytes
// sent and received by the container's interfaces, summed across its runs
// in DataDir; the last second of traffic before a stop may be missed.
// Telemetry in Status: CPU % (100 = one core), memory in use without page
// cache, and the current run's block I/O bytes (read and written, from the
// container's cgroup; where the daemon reports none, from /proc/<pid>/io of
// its processes, see stats.go) and network bytes (received and sent by its
// interfaces). GPU telemetry is the agent's (nvidia-smi), not collected
// here.
//
// # Optional interfaces
//
// Besides agent.Runtime and agent.UsageCounter, a Runtime implements
// Preflighter (checks before billing), Execer (suanli exec) and PortMapper
// (the published ports), declared in this package for the agent to assert,
// and Close, which stops the followers and leaves the containers running.
package docker
