package agent

import (
	"context"
	"slices"

	"github.com/suanli/suanli"
)

// VolumeManager is implemented by runtimes that keep volumes: storage on
// this machine that outlives instances (attached through
// InstanceSpec.Volumes).
type VolumeManager interface {
	// EnsureVolume creates the volume if it does not exist.
	EnsureVolume(ctx context.Context, v suanli.VolumeSpec) error
	// RemoveVolume makes the volume's data unrecoverable as far as the
	// storage allows, then deletes it, and says what was done.
	RemoveVolume(ctx context.Context, id int64) (suanli.Release, error)
	// Volumes lists the ids of the volumes it holds.
	Volumes(ctx context.Context) ([]int64, error)
}

// reconcileVolumes creates the volumes the server lists and wipes those it
// no longer lists. It runs on the Run goroutine after each sync; volume
// operations are quick (a directory or a Docker volume).
func (a *Agent) reconcileVolumes(ctx context.Context, want []suanli.VolumeSpec) {
	vm, ok := a.rt.(VolumeManager)
	if !ok {
		return
	}
	have, err := vm.Volumes(ctx)
	if err != nil {
		a.log.Warn("list volumes failed", "err", err)
		return
	}
	listed := map[int64]bool{}
	if a.volsEnsured == nil {
		a.volsEnsured = map[int64]bool{}
	}
	for _, v := range want {
		listed[v.ID] = true
		// An encrypted volume that exists still needs its key given to
		// the kernel once per agent run (after a reboot it has none).
		if slices.Contains(have, v.ID) && (len(v.Key) == 0 || a.volsEnsured[v.ID]) {
			continue
		}
		if err := vm.EnsureVolume(ctx, v); err != nil {
			a.log.Error("create volume failed", "volume_id", v.ID, "err", err)
			continue
		}
		a.volsEnsured[v.ID] = true
	}
	for _, id := range have {
		if listed[id] {
			continue
		}
		rel, err := vm.RemoveVolume(ctx, id)
		if err != nil {
			a.log.Error("remove volume failed", "volume_id", id, "err", err)
			continue
		}
		a.log.Info("volume released", "volume_id", id, "method", rel.Method, "detail", rel.Detail)
		a.addRelease(rel)
	}
}
