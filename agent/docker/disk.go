package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// Disk watch: where the storage driver enforces no per-container size (see
// the package doc), one goroutine measures every running instance's disk
// every Options.DiskCheckInterval and stops an instance that uses more than
// it rents. An instance's disk is its container's writable layer (the
// daemon's SizeRw) plus its anonymous volumes and its encrypted workspace,
// measured by walking their directories on the host; the renter's Suanli
// volumes are rented and sized separately and do not count.

// DefaultDiskCheckInterval is how often the disk watch measures each
// running instance when Options.DiskCheckInterval is zero.
const DefaultDiskCheckInterval = 30 * time.Second

// diskUse is one measurement of an instance's disk, in bytes.
type diskUse struct {
	layer   int64 // the container's writable layer
	volumes int64 // its anonymous volumes and encrypted workspace
}

func (u diskUse) total() int64 { return u.layer + u.volumes }

// quotaEnforced reports whether the storage driver holds every new
// container to its size, so that the watch has nothing to do.
func (r *Runtime) quotaEnforced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.noQuota && slices.Contains(quotaDrivers, r.storageDriver)
}

// diskNote is what a running instance's Status message says of a disk
// size the storage driver does not enforce.
func (r *Runtime) diskNote(gb string) string {
	if r.diskEvery <= 0 {
		return fmt.Sprintf("disk %s GB not enforced by storage driver %s", gb, r.storageDriver)
	}
	return fmt.Sprintf("disk %s GB watched every %s (storage driver %s has no quota)", gb, r.diskEvery, r.storageDriver)
}

// watchDisk runs checkDisks every interval until ctx ends.
func (r *Runtime) watchDisk(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.checkDisks(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("disk check failed", "err", err)
		}
	}
}

// checkDisks measures the running instances of this namespace once, with
// one container list that asks the daemon for sizes, and stops those over
// their rented disk. It does nothing when the storage driver enforces a
// quota.
func (r *Runtime) checkDisks(ctx context.Context) error {
	if r.quotaEnforced() {
		return nil
	}
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{
		Size:    true,
		Filters: client.Filters{}.Add("label", LabelManaged+"=true").Add("status", "running"),
	})
	if err != nil {
		return r.daemonErr("list containers with sizes", err)
	}
	for _, c := range res.Items {
		if c.Labels[LabelNamespace] != r.ns {
			continue
		}
		id, err := strconv.ParseInt(c.Labels[LabelInstance], 10, 64)
		if err != nil {
			continue
		}
		gb, err := strconv.ParseInt(c.Labels[labelDiskGB], 10, 64)
		if err != nil || gb <= 0 {
			continue
		}
		use := diskUse{layer: c.SizeRw}
		for _, m := range c.Mounts {
			anonymous := m.Type == mount.TypeVolume && !strings.HasPrefix(m.Name, "suanli-vol-")
			workspace := m.Type == mount.TypeBind && m.Destination == Workspace && r.vault != nil
			if !anonymous && !workspace {
				continue
			}
			dir := m.Source
			if dir == "" && anonymous { // the list leaves volumes' Source empty
				v, err := r.cli.VolumeInspect(ctx, m.Name, client.VolumeInspectOptions{})
				if err != nil {
					if !cerrdefs.IsNotFound(err) {
						r.log.Warn("disk watch: inspect volume", "instance_id", id, "volume", m.Name, "err", err)
					}
					continue
				}
				dir = v.Volume.Mountpoint
			}
			use.volumes += r.dirSize(id, dir)
		}
		r.log.Debug("disk measured", "instance_id", id, "layer_bytes", use.layer, "volume_bytes", use.volumes, "rented_gb", gb)
		if use.total() > gb*r.diskUnit {
			r.stopForDisk(ctx, id, c.ID, gb, use)
		}
	}
	return nil
}

// dirSize is the bytes of the regular files under dir (hard links counted
// each time). A directory the agent cannot read (a daemon on another host,
// an agent without root) counts 0, logged once per instance at most.
func (r *Runtime) dirSize(id int64, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		r.mu.Lock()
		first := !r.diskUnread[id]
		r.diskUnread[id] = true
		r.mu.Unlock()
		if first {
			r.log.Warn("disk watch cannot measure a volume: it counts only what it can read", "instance_id", id, "dir", dir, "err", err)
		}
	}
	return n
}

// stopForDisk stops an instance whose disk use exceeds its rented size:
// it records why in the state file (Status then reports the instance
// exited with that message, and Ensure does not start it again until the
// control plane asks for stopped, then running), then sends SIGTERM and
// SIGKILL after the instance's stop grace, in its own goroutine so that
// one long grace does not hold up the other instances' checks.
func (r *Runtime) stopForDisk(ctx context.Context, id int64, cid string, gb int64, use diskUse) {
	r.mu.Lock()
	if r.diskStopping[id] {
		r.mu.Unlock()
		return
	}
	r.diskStopping[id] = true
	grace, ok := r.graces[id]
	r.mu.Unlock()
	if !ok {
		grace = DefaultStopGrace
	}
	unit := float64(r.diskUnit)
	msg := fmt.Sprintf("stopped by the host agent: disk use %.1f GB exceeded the rented %d GB (writable layer %.1f GB, volumes %.1f GB; storage driver %s has no quota): "+
		"recreate with a larger --disk, or start it and delete files within %s (the next check stops it again)",
		float64(use.total())/unit, gb, float64(use.layer)/unit, float64(use.volumes)/unit, r.storageDriver, r.diskEvery)
	r.wg.Go(func() {
		defer func() {
			r.mu.Lock()
			delete(r.diskStopping, id)
			r.mu.Unlock()
		}()
		mu := r.instanceLock(id)
		mu.Lock()
		defer mu.Unlock()
		st := r.loadState(id)
		if st.Stopped {
			return // the control plane is stopping it anyway
		}
		st.DiskExceeded = msg
		r.foldLiveLocked(id, st)
		if err := r.saveState(id, st); err != nil {
			r.log.Error("disk watch: save state", "instance_id", id, "err", err)
			return
		}
		secs := graceSeconds(grace)
		if _, err := r.cli.ContainerStop(ctx, cid, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotModified(err) && !cerrdefs.IsNotFound(err) {
			r.log.Error("disk watch: stop instance", "instance_id", id, "err", err)
			return
		}
		r.log.Warn("instance stopped for disk use", "instance_id", id, "disk_bytes", use.total(), "rented_gb", gb, "bytes_per_gb", r.diskUnit, "grace_s", secs)
	})
}
