package process

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

// Volumes of the process runtime are directories under dir/volumes/<id>.
// An instance sees a mounted volume as a symbolic link at its mount path
// inside its work directory (/data → work/data) and as
// SUANLI_VOLUME_<NAME>=<directory> in its environment: without root, a
// process cannot mount at an absolute path.

func (r *Runtime) volumeDir(id int64) string {
	return filepath.Join(r.dir, "volumes", strconv.FormatInt(id, 10))
}

// EnsureVolume creates the volume's directory.
func (r *Runtime) EnsureVolume(ctx context.Context, v suanli.VolumeSpec) error {
	return os.MkdirAll(r.volumeDir(v.ID), 0o700)
}

// Volumes lists the volume directories.
func (r *Runtime) Volumes(ctx context.Context) ([]int64, error) {
	entries, err := os.ReadDir(filepath.Join(r.dir, "volumes"))
	if os.IsNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var ids []int64
	for _, e := range entries {
		if id, err := strconv.ParseInt(e.Name(), 10, 64); err == nil && e.IsDir() {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// RemoveVolume overwrites every regular file of the volume with zeros,
// syncs, and deletes the directory. On copy-on-write or flash storage the
// old blocks may survive the overwrite; the returned text says what was
// done so the audit log can record it honestly.
func (r *Runtime) RemoveVolume(ctx context.Context, id int64) (suanli.Release, error) {
	dir := r.volumeDir(id)
	var files, bytes int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		n, err := overwrite(p)
		files, bytes = files+1, bytes+n
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		return suanli.Release{}, fmt.Errorf("wipe volume %d: %w", id, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return suanli.Release{}, fmt.Errorf("remove volume %d: %w", id, err)
	}
	return suanli.Release{Kind: suanli.ReleaseVolume, ID: id, Method: suanli.ReleaseOverwrite,
		Detail: fmt.Sprintf("overwrote %d files (%d bytes) with zeros, then deleted them; on copy-on-write or flash storage old blocks may remain until reused", files, bytes)}, nil
}

func overwrite(path string) (int64, error) {
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
