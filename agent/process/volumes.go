package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/vault"
)

// Volumes of the process runtime are directories under dir/volumes/<id>.
// An instance sees a mounted volume as a symbolic link at its mount path
// inside its work directory (/data → work/data) and as
// SUANLI_VOLUME_<NAME>=<directory> in its environment: without root, a
// process cannot mount at an absolute path.

func (r *Runtime) volumeDir(id int64) string {
	if r.Vault != nil {
		if d := filepath.Join(r.Vault.Root(), volumeObject(id)); exists(d) {
			return d
		}
	}
	return r.plainVolumeDir(id)
}

func (r *Runtime) plainVolumeDir(id int64) string {
	return filepath.Join(r.dir, "volumes", strconv.FormatInt(id, 10))
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// EnsureVolume creates the volume's directory: encrypted with v.Key when
// the runtime has a Vault and the control plane sent a key, plain
// otherwise. For an encrypted volume that exists it gives the kernel the
// key again (after a reboot).
func (r *Runtime) EnsureVolume(ctx context.Context, v suanli.VolumeSpec) error {
	if r.Vault == nil || len(v.Key) == 0 || exists(r.plainVolumeDir(v.ID)) {
		return os.MkdirAll(r.plainVolumeDir(v.ID), 0o700)
	}
	_, err := r.Vault.Ensure(volumeObject(v.ID), v.Key)
	return err
}

// Volumes lists the volume directories, plain and encrypted.
func (r *Runtime) Volumes(ctx context.Context) ([]int64, error) {
	entries, err := os.ReadDir(filepath.Join(r.dir, "volumes"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var ids []int64
	for _, e := range entries {
		if id, err := strconv.ParseInt(e.Name(), 10, 64); err == nil && e.IsDir() {
			ids = append(ids, id)
		}
	}
	if r.Vault != nil {
		objs, err := r.Vault.Objects()
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if rest, ok := strings.CutPrefix(o, "volume-"); ok {
				if id, err := strconv.ParseInt(rest, 10, 64); err == nil && !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
		}
	}
	return ids, nil
}

// RemoveVolume makes the volume's data unrecoverable and deletes it: a
// crypto-erase when it was encrypted, else every regular file overwritten
// with zeros and synced (on copy-on-write or flash storage the old blocks
// may survive that). The Release says what was done so that the audit log
// can record it honestly.
func (r *Runtime) RemoveVolume(ctx context.Context, id int64) (suanli.Release, error) {
	rel := suanli.Release{Kind: suanli.ReleaseVolume, ID: id}
	if r.Vault != nil && exists(filepath.Join(r.Vault.Root(), volumeObject(id))) {
		rep, err := r.Vault.Erase(volumeObject(id))
		if err != nil {
			return rel, fmt.Errorf("erase volume %d: %w", id, err)
		}
		rel.Method, rel.Detail = rep.Method, rep.Detail
		return rel, nil
	}
	dir := r.plainVolumeDir(id)
	files, bytes, err := vault.Overwrite(dir)
	if err != nil {
		return rel, fmt.Errorf("wipe volume %d: %w", id, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return rel, fmt.Errorf("remove volume %d: %w", id, err)
	}
	rel.Method = suanli.ReleaseOverwrite
	rel.Detail = fmt.Sprintf("overwrote %d files (%d bytes) with zeros, then deleted them; on copy-on-write or flash storage old blocks may remain until reused", files, bytes)
	return rel, nil
}

// mountVolumes links each volume into the instance's work directory and
// returns their environment entries.
func (r *Runtime) mountVolumes(spec suanli.InstanceSpec, work string) ([]string, error) {
	var env []string
	for _, m := range spec.Volumes {
		vdir := r.volumeDir(m.ID)
		if err := os.MkdirAll(vdir, 0o700); err != nil {
			return nil, err
		}
		link := filepath.Join(work, filepath.Clean("/"+m.Path))
		if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
			return nil, err
		}
		if cur, err := os.Readlink(link); err != nil || cur != vdir {
			os.Remove(link)
			if err := os.Symlink(vdir, link); err != nil {
				return nil, fmt.Errorf("mount volume %s at %s: %w", m.Name, m.Path, err)
			}
		}
		key := strings.ToUpper(strings.Map(func(c rune) rune {
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
				return c
			}
			return '_'
		}, m.Name))
		env = append(env, "SUANLI_VOLUME_"+key+"="+vdir)
	}
	return env, nil
}
