package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/vault"
)

// LabelVolume marks a Docker volume that holds a Suanli volume.
const LabelVolume = "suanli.volume"

// volumeName is the Docker volume's name for Suanli volume id.
func (r *Runtime) volumeName(id int64) string {
	if r.ns == "" {
		return "suanli-vol-" + strconv.FormatInt(id, 10)
	}
	return "suanli-vol-" + r.ns + "-" + strconv.FormatInt(id, 10)
}

// EnsureVolume creates the Docker volume (local driver) if it is missing.
// With a Vault and a key from the control plane the volume is a bind of an
// encrypted directory of the vault; for one that exists it gives the kernel
// the key again (after a reboot).
func (r *Runtime) EnsureVolume(ctx context.Context, v suanli.VolumeSpec) error {
	name := r.volumeName(v.ID)
	res, err := r.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	switch {
	case err == nil:
		if r.vault != nil && len(v.Key) > 0 && r.inVault(res.Volume.Options["device"]) {
			_, err := r.vault.Ensure(volumeObject(v.ID), v.Key)
			return err
		}
		return nil
	case !cerrdefs.IsNotFound(err):
		return r.daemonErr("inspect volume", err)
	}
	opts := client.VolumeCreateOptions{Name: name, Driver: "local",
		Labels: map[string]string{LabelManaged: "true", LabelNamespace: r.ns, LabelVolume: strconv.FormatInt(v.ID, 10)}}
	if r.vault != nil && len(v.Key) > 0 {
		dir, err := r.vault.Ensure(volumeObject(v.ID), v.Key)
		if err != nil {
			return err
		}
		opts.DriverOpts = map[string]string{"type": "none", "o": "bind", "device": dir}
	}
	if _, err := r.cli.VolumeCreate(ctx, opts); err != nil {
		return r.daemonErr("create volume", err)
	}
	return nil
}

// inVault reports whether a volume's bind device is a directory of the vault.
func (r *Runtime) inVault(device string) bool {
	return r.vault != nil && device != "" && filepath.Dir(device) == r.vault.Root()
}

// Volumes lists this namespace's Suanli volumes.
func (r *Runtime) Volumes(ctx context.Context) ([]int64, error) {
	res, err := r.cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", LabelVolume)})
	if err != nil {
		return nil, r.daemonErr("list volumes", err)
	}
	var ids []int64
	for _, v := range res.Items {
		if v.Labels[LabelNamespace] != r.ns {
			continue
		}
		if id, err := strconv.ParseInt(v.Labels[LabelVolume], 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// RemoveVolume removes the volume and makes its data unrecoverable: a
// crypto-erase for an encrypted volume; else its files are overwritten with
// zeros first where the agent can reach its mount point (the local driver
// keeps it as a directory on the host; the agent must run as root to write
// there). On copy-on-write or flash storage old blocks may survive an
// overwrite; the Release says what was done.
func (r *Runtime) RemoveVolume(ctx context.Context, id int64) (suanli.Release, error) {
	name := r.volumeName(id)
	rel := suanli.Release{Kind: suanli.ReleaseVolume, ID: id, Method: suanli.ReleaseDelete,
		Detail: "removed the Docker volume without overwriting (its mount point is not reachable from the agent)"}
	erase := false
	if res, err := r.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); err == nil && r.inVault(res.Volume.Options["device"]) {
		erase = true
	} else if err == nil && res.Volume.Mountpoint != "" {
		if _, statErr := os.Stat(res.Volume.Mountpoint); statErr == nil {
			if files, bytes, err := vault.Overwrite(res.Volume.Mountpoint); err == nil {
				rel.Method, rel.Detail = suanli.ReleaseOverwrite, fmt.Sprintf("overwrote %d files (%d bytes) with zeros, then removed the Docker volume; on copy-on-write or flash storage old blocks may remain until reused", files, bytes)
			}
		}
	}
	if _, err := r.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return suanli.Release{}, r.daemonErr("remove volume", err)
	}
	if erase {
		rep, err := r.vault.Erase(volumeObject(id))
		if err != nil {
			return suanli.Release{}, fmt.Errorf("erase volume %d: %w", id, err)
		}
		rel.Method, rel.Detail = rep.Method, rep.Detail
	}
	return rel, nil
}

// volumeMounts are the container's mounts for spec.Volumes.
func (r *Runtime) volumeMounts(spec suanli.InstanceSpec) []mount.Mount {
	var ms []mount.Mount
	for _, v := range spec.Volumes {
		ms = append(ms, mount.Mount{Type: mount.TypeVolume, Source: r.volumeName(v.ID), Target: v.Path})
	}
	return ms
}
