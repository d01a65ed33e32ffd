package control

import (
	"context"
	"path"
	"regexp"
	"strings"

	"github.com/suanli/suanli"
)

var volumeName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// CreateVolume makes a volume on a machine the caller could rent: billed
// per GB-month at the machine's disk price, locked now, until deleted. Its
// project and tags attribute that cost as an instance's do; a spent budget
// with action block or stop covering them refuses it (payment_required).
func (s *Service) CreateVolume(ctx context.Context, c suanli.VolumeCreate) (*suanli.Volume, error) {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return nil, err
	}
	if !volumeName.MatchString(c.Name) {
		return nil, suanli.FieldErrorf("name", "%q: use 1-63 lowercase letters, digits, '.', '_' or '-'", c.Name)
	}
	if c.SizeGB <= 0 || c.SizeGB > 100_000 {
		return nil, suanli.FieldErrorf("size_gb", "%d: give a size in GB between 1 and 100000", c.SizeGB)
	}
	if err := validateCostAttribution(c.Project, c.Tags); err != nil {
		return nil, err
	}
	m, err := s.Store.FindMachineByID(ctx, c.MachineID)
	if suanli.ErrorCode(err) == suanli.ENOTFOUND || (err == nil && !m.Listing.Listed && m.OwnerID != p.AccountID) {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "machine %d not found: volumes live on a listed machine (suanli search)", c.MachineID)
	} else if err != nil {
		return nil, err
	}
	if m.Hardware.DiskFreeGB > 0 && c.SizeGB > m.Hardware.DiskFreeGB {
		return nil, suanli.Errorf(suanli.ECONFLICT, "machine %d has %d GB of free disk, you asked for %d GB", m.ID, m.Hardware.DiskFreeGB, c.SizeGB)
	}
	if err := s.checkBudgetsForCreate(ctx, p.AccountID, c.Project, c.Tags); err != nil {
		return nil, err
	}
	v := &suanli.Volume{AccountID: p.AccountID, MachineID: m.ID, Name: c.Name, SizeGB: c.SizeGB, Rate: m.Listing.PriceDisk, Project: c.Project, Tags: c.Tags}
	if err := s.Store.CreateVolume(ctx, v, m.OwnerID, s.cfg.FeeBasisPoints, s.now()); err != nil {
		return nil, err
	}
	s.hub.wake(m.ID)
	s.Logger.Info("volume created", "volume_id", v.ID, "machine_id", m.ID, "size_gb", v.SizeGB)
	return v, nil
}

// FindVolumes lists the caller's volumes (deleted ones too when all).
func (s *Service) FindVolumes(ctx context.Context, all bool) ([]*suanli.Volume, error) {
	p, err := principal(ctx, suanli.ScopeInstanceRead)
	if err != nil {
		return nil, err
	}
	vs, err := s.Store.FindVolumes(ctx, p.AccountID, 0, all, s.now())
	if vs == nil {
		vs = []*suanli.Volume{}
	}
	return vs, err
}

// DeleteVolume deletes one of the caller's volumes by name or id: billing
// stops now and the agent wipes it.
func (s *Service) DeleteVolume(ctx context.Context, name string) (*suanli.Volume, error) {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return nil, err
	}
	vs, err := s.Store.FindVolumes(ctx, p.AccountID, 0, false, s.now())
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		if v.Name == name {
			out, err := s.Store.DeleteVolume(ctx, v.ID, s.now())
			if err != nil {
				return nil, err
			}
			s.hub.wake(v.MachineID)
			s.Logger.Info("volume deleted", "volume_id", v.ID, "machine_id", v.MachineID)
			return out, nil
		}
	}
	return nil, suanli.Errorf(suanli.ENOTFOUND, "volume %q not found (suanli volume ls)", name)
}

// resolveMounts checks an instance's volume mounts: the caller's live
// volumes, on the offer's machine, not attached elsewhere, at absolute,
// distinct paths. It fills each mount's volume id.
func (s *Service) resolveMounts(ctx context.Context, p *suanli.Principal, machineID int64, mounts []suanli.VolumeMount) error {
	if len(mounts) == 0 {
		return nil
	}
	vs, err := s.Store.FindVolumes(ctx, p.AccountID, 0, false, s.now())
	if err != nil {
		return err
	}
	paths := map[string]bool{}
	for i := range mounts {
		mt := &mounts[i]
		clean := path.Clean(mt.Path)
		if !strings.HasPrefix(mt.Path, "/") || clean == "/" || paths[clean] {
			return suanli.FieldErrorf("volumes", "%q: mount at an absolute path other than /, once per instance (-v data:/data)", mt.Path)
		}
		paths[clean] = true
		mt.Path = clean
		found := false
		for _, v := range vs {
			if v.Name != mt.Name {
				continue
			}
			found = true
			if v.MachineID != machineID {
				return suanli.Errorf(suanli.ECONFLICT, "volume %q is on machine %d: rent offer %d to use it, or create a volume on this machine", v.Name, v.MachineID, v.MachineID)
			}
			if v.AttachedTo != 0 {
				return suanli.Errorf(suanli.ECONFLICT, "volume %q is attached to instance %d: destroy that instance first", v.Name, v.AttachedTo)
			}
			mt.ID = v.ID
		}
		if !found {
			return suanli.FieldErrorf("volumes", "no volume named %q: create it with suanli volume create --machine %d --size GB %s", mt.Name, machineID, mt.Name)
		}
	}
	return nil
}
