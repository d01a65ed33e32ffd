package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/vault"
)

// An instance's disk is its work directory, dir/instances/<id>/work. With a
// Vault and a key from the control plane it is a symbolic link to the
// vault's encrypted directory instance-<id>; otherwise a plain directory.

func instanceObject(id int64) string { return "instance-" + strconv.FormatInt(id, 10) }

func volumeObject(id int64) string { return "volume-" + strconv.FormatInt(id, 10) }

// openWork makes the instance's work directory on first use and, when it is
// encrypted, gives the kernel its key (again after a reboot).
func (r *Runtime) openWork(inst *instance, spec suanli.InstanceSpec) error {
	work := filepath.Join(inst.dir, "work")
	fi, err := os.Lstat(work)
	switch {
	case err == nil && fi.Mode()&os.ModeSymlink == 0:
		return nil // plain: made before encryption, or without a key
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return err
	case r.Vault == nil || len(spec.DiskKey) == 0:
		if err == nil {
			return fmt.Errorf("work directory is encrypted but no key came with the spec: is disk encryption on for this machine?")
		}
		return os.MkdirAll(work, 0o700)
	}
	dir, verr := r.Vault.Ensure(instanceObject(inst.id), spec.DiskKey)
	if verr != nil {
		return fmt.Errorf("unlock disk: %w", verr)
	}
	if err != nil {
		return os.Symlink(dir, work)
	}
	return nil
}

// eraseWork makes the work files unrecoverable and says how in rel.
func (r *Runtime) eraseWork(inst *instance, rel *suanli.Release) error {
	work := filepath.Join(inst.dir, "work")
	if fi, err := os.Lstat(work); err == nil && fi.Mode()&os.ModeSymlink != 0 && r.Vault != nil {
		rep, err := r.Vault.Erase(instanceObject(inst.id))
		if err != nil {
			return fmt.Errorf("erase disk: %w", err)
		}
		rel.Method, rel.Detail = rep.Method, rep.Detail
		if rep.Method != suanli.ReleaseCryptoErase {
			rel.Method = suanli.ReleaseDelete
		}
		return nil
	}
	files, bytes, err := vault.Overwrite(work)
	if err != nil {
		return fmt.Errorf("overwrite work files: %w", err)
	}
	rel.Method = suanli.ReleaseOverwrite
	rel.Detail = fmt.Sprintf("overwrote %d work files (%d bytes) with zeros, then deleted the instance directory; the disk was not encrypted, so on copy-on-write or flash storage old blocks may remain until reused", files, bytes)
	return nil
}
