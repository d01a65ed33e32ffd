package control

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"

	"github.com/suanli/suanli"
)

// Disk keys: a machine whose agent encrypts at rest
// (Hardware.DiskEncryption) gets a key per instance disk and per volume with
// each sync. The store keeps them sealed and deletes each in the transaction
// that destroys its instance or deletes its volume (or moves the instance
// to another host), so the agent's release is a crypto-erase: the only key
// is gone and what it deletes is ciphertext.

// diskKeySize is the fscrypt master key size the agent's vault takes.
const diskKeySize = 64

func diskKeyPurpose(kind string, id int64) string {
	return fmt.Sprintf("disk key of %s %d", kind, id)
}

// diskKeys returns the opened keys of the given objects, minting and
// storing the missing ones.
func (s *Service) diskKeys(ctx context.Context, kind string, ids []int64) (map[int64][]byte, error) {
	sealed, err := s.Store.DiskKeys(ctx, kind, ids, func(id int64) ([]byte, error) {
		key := make([]byte, diskKeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		return s.sealer.Seal(key, diskKeyPurpose(kind, id)), nil
	}, s.now())
	if err != nil {
		return nil, fmt.Errorf("disk keys: %w", err)
	}
	out := make(map[int64][]byte, len(sealed))
	for id, b := range sealed {
		key, err := s.sealer.Open(b, diskKeyPurpose(kind, id))
		if err != nil {
			return nil, fmt.Errorf("disk key of %s %d: %w", kind, id, err)
		}
		out[id] = key
	}
	return out, nil
}

// addDiskKeys puts each live instance's and volume's key into resp, for a
// machine that encrypts at rest.
func (s *Service) addDiskKeys(ctx context.Context, m *suanli.Machine, resp *suanli.SyncResponse) error {
	if m.Hardware.DiskEncryption == "" {
		return nil
	}
	var ins, vols []int64
	for _, sp := range resp.Instances {
		if sp.Desired != suanli.DesiredDestroyed {
			ins = append(ins, sp.ID)
		}
	}
	for _, v := range resp.Volumes {
		vols = append(vols, v.ID)
	}
	ik, err := s.diskKeys(ctx, suanli.ReleaseInstance, ins)
	if err != nil {
		return err
	}
	vk, err := s.diskKeys(ctx, suanli.ReleaseVolume, vols)
	if err != nil {
		return err
	}
	for i := range resp.Instances {
		resp.Instances[i].DiskKey = ik[resp.Instances[i].ID]
	}
	for i := range resp.Volumes {
		resp.Volumes[i].Key = vk[resp.Volumes[i].ID]
	}
	return nil
}

// recordReleases writes what an agent did to the data of the instances and
// volumes it removed into the owners' audit logs. A report about an object
// that never was on this machine is dropped.
func (s *Service) recordReleases(ctx context.Context, m *suanli.Machine, rs []suanli.Release) error {
	for _, r := range rs {
		var account int64
		switch r.Kind {
		case suanli.ReleaseInstance:
			in, err := s.Store.FindInstanceByID(ctx, r.ID, s.now())
			if suanli.ErrorCode(err) == suanli.ENOTFOUND {
				continue
			} else if err != nil {
				return err
			}
			if in.MachineID != m.ID && !slices.Contains(in.AvoidMachines, m.ID) {
				s.Logger.Warn("release report for another machine's instance", "machine_id", m.ID, "instance_id", r.ID)
				continue
			}
			account = in.AccountID
		case suanli.ReleaseVolume:
			vs, err := s.Store.FindVolumes(ctx, 0, m.ID, true, s.now())
			if err != nil {
				return err
			}
			i := slices.IndexFunc(vs, func(v *suanli.Volume) bool { return v.ID == r.ID })
			if i < 0 {
				s.Logger.Warn("release report for another machine's volume", "machine_id", m.ID, "volume_id", r.ID)
				continue
			}
			account = vs[i].AccountID
		default:
			continue
		}
		s.RecordAudit(ctx, suanli.AuditEvent{AccountID: account, Action: r.Kind + ".released", Target: fmt.Sprintf("%s %d", r.Kind, r.ID),
			Result: "ok", Detail: fmt.Sprintf("%s on machine %d at %s: %s", r.Method, m.ID, r.At.UTC().Format("2006-01-02T15:04:05Z"), r.Detail)})
	}
	return nil
}
