package docker

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/suanli/suanli"
)

// Workspace is where an instance's encrypted disk is mounted in its
// container when the runtime has a Vault: the one directory of the
// instance whose release is a crypto-erase. Files written elsewhere go to
// the container's writable layer, which the storage driver deletes on
// release without overwriting. The workload finds the path in
// SUANLI_WORKSPACE.
const Workspace = "/workspace"

func instanceObject(id int64) string { return "instance-" + strconv.FormatInt(id, 10) }

func volumeObject(id int64) string { return "volume-" + strconv.FormatInt(id, 10) }

// encrypted reports whether spec's disk is to be encrypted here: with a
// vault and a key, unless a volume is mounted at Workspace (it takes the
// place, and is encrypted on its own).
func (r *Runtime) encrypted(spec suanli.InstanceSpec) bool {
	if r.vault == nil || len(spec.DiskKey) == 0 {
		return false
	}
	for _, v := range spec.Volumes {
		if path.Clean(v.Path) == Workspace {
			return false
		}
	}
	return true
}

// openWorkspace creates the instance's encrypted workspace or gives the
// kernel its key again (after a reboot), before the container is created
// or started. A container made before encryption was on keeps running
// without one.
func (r *Runtime) openWorkspace(spec suanli.InstanceSpec, c *container.InspectResponse) error {
	if !r.encrypted(spec) || (c != nil && !hasWorkspace(c)) {
		return nil
	}
	if _, err := r.vault.Ensure(instanceObject(spec.ID), spec.DiskKey); err != nil {
		return fmt.Errorf("instance %d: unlock the disk: %w", spec.ID, err)
	}
	return nil
}

func hasWorkspace(c *container.InspectResponse) bool {
	for _, m := range c.Mounts {
		if m.Destination == Workspace && m.Type == mount.TypeBind {
			return true
		}
	}
	return false
}

// workspaceMount is the bind mount of the encrypted workspace, if any.
func (r *Runtime) workspaceMount(spec suanli.InstanceSpec) []mount.Mount {
	if !r.encrypted(spec) {
		return nil
	}
	return []mount.Mount{{Type: mount.TypeBind, Source: filepath.Join(r.vault.Root(), instanceObject(spec.ID)), Target: Workspace}}
}

// eraseWorkspace crypto-erases the instance's workspace, if it has one,
// after its container is gone, and says so in rel.
func (r *Runtime) eraseWorkspace(id int64, rel *suanli.Release) error {
	if r.vault == nil {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(r.vault.Root(), instanceObject(id))); err != nil {
		return nil
	}
	rep, err := r.vault.Erase(instanceObject(id))
	if err != nil {
		return fmt.Errorf("instance %d: erase the disk: %w", id, err)
	}
	if rep.Method != suanli.ReleaseCryptoErase {
		return nil
	}
	rel.Method = suanli.ReleaseCryptoErase
	rel.Detail = fmt.Sprintf("%s: %s; files written outside %s were in the container's writable layer, deleted by the storage driver (%s) without overwriting",
		Workspace, strings.TrimSuffix(rep.Detail, "."), Workspace, r.storageDriver)
	return nil
}
