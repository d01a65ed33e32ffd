package docker

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/suanli/suanli"
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
func (r *Runtime) EnsureVolume(ctx context.Context, v suanli.VolumeSpec) error {
	_, err := r.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: r.volumeName(v.ID), Driver: "local",
		Labels: map[string]string{LabelManaged: "true", LabelNamespace: r.ns, LabelVolume: strconv.FormatInt(v.ID, 10)}})
	if err != nil {
		return r.daemonErr("create volume", err)
	}
	return nil
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

// RemoveVolume overwrites the volume's files with zeros where the agent
// can reach its mount point (the local driver keeps it as a directory on
// the host; the agent must run as root to write there), then removes it.
// On copy-on-write or flash storage old blocks may survive; the returned
// text says what was done.
func (r *Runtime) RemoveVolume(ctx context.Context, id int64) (suanli.Release, error) {
	name := r.volumeName(id)
	rel := suanli.Release{Kind: suanli.ReleaseVolume, ID: id, Method: suanli.ReleaseDelete,
		Detail: "removed the Docker volume without overwriting (its mount point is not reachable from the agent)"}
	if res, err := r.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); err == nil && res.Volume.Mountpoint != "" {
		if _, statErr := os.Stat(res.Volume.Mountpoint); statErr == nil {
			var files, bytes int64
			werr := filepath.WalkDir(res.Volume.Mountpoint, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				n, err := zeroFile(p)
				files, bytes = files+1, bytes+n
				return err
			})
			if werr == nil {
				rel.Method, rel.Detail = suanli.ReleaseOverwrite, fmt.Sprintf("overwrote %d files (%d bytes) with zeros, then removed the Docker volume; on copy-on-write or flash storage old blocks may remain until reused", files, bytes)
			}
		}
	}
	if _, err := r.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return suanli.Release{}, r.daemonErr("remove volume", err)
	}
	return rel, nil
}

func zeroFile(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	zero := make([]byte, 64<<10)
	var done int64
	for done < fi.Size() {
		n := min(int64(len(zero)), fi.Size()-done)
		if _, err := f.Write(zero[:n]); err != nil {
			return done, err
		}
		done += n
	}
	return done, f.Sync()
}

// volumeMounts are the container's mounts for spec.Volumes.
func (r *Runtime) volumeMounts(spec suanli.InstanceSpec) []mount.Mount {
	var ms []mount.Mount
	for _, v := range spec.Volumes {
		ms = append(ms, mount.Mount{Type: mount.TypeVolume, Source: r.volumeName(v.ID), Target: v.Path})
	}
	return ms
}
