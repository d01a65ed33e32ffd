package control

import (
	"context"
	"regexp"
	"strings"

	"github.com/suanli/suanli"
)

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// maxPlanAttempts bounds retries when the store finds the plan stale.
const maxPlanAttempts = 3

func validateCreate(c *suanli.InstanceCreate) error {
	if c.OfferID <= 0 {
		return suanli.FieldErrorf("offer_id", "give the id of an offer from `suanli search`")
	}
	c.Image = strings.TrimSpace(c.Image)
	if c.Image == "" {
		return suanli.FieldErrorf("image", "must not be empty: name a Docker image such as ubuntu:24.04")
	}
	if c.DiskGB == 0 {
		c.DiskGB = suanli.DefaultDiskGB
	}
	if c.DiskGB < 0 {
		return suanli.FieldErrorf("disk_gb", "%d is not a size: give a positive number of GB", c.DiskGB)
	}
	if c.GPUCount < 0 {
		return suanli.FieldErrorf("num_gpus", "%d is not a GPU count", c.GPUCount)
	}
	if c.CPUCores < 0 {
		return suanli.FieldErrorf("cpu_cores", "%d is not a core count", c.CPUCores)
	}
	for k := range c.Env {
		if !envKey.MatchString(k) {
			return suanli.FieldErrorf("env", "%q is not a valid variable name (letters, digits, _; not starting with a digit)", k)
		}
		if strings.HasPrefix(k, "SUANLI_") {
			return suanli.FieldErrorf("env", "%s: names starting with SUANLI_ are reserved", k)
		}
	}
	if len(c.Label) > 200 {
		return suanli.FieldErrorf("label", "longer than 200 characters")
	}
	switch c.RentalType {
	case "":
		c.RentalType = suanli.RentalOnDemand
		if c.Bid != nil {
			c.RentalType = suanli.RentalInterruptible
		}
	case suanli.RentalOnDemand, suanli.RentalInterruptible:
	default:
		return suanli.FieldErrorf("rental_type", "%q is not a rental type: use on-demand or interruptible", c.RentalType)
	}
	if c.RentalType == suanli.RentalInterruptible && (c.Bid == nil || *c.Bid <= 0) {
		return suanli.FieldErrorf("bid", "an interruptible rental needs a positive bid per hour")
	}
	if c.RentalType == suanli.RentalOnDemand && c.Bid != nil {
		return suanli.FieldErrorf("bid", "an on-demand rental takes no bid: drop --bid, or rent interruptible")
	}
	return nil
}

// ownInstance loads an instance the caller may see: their own, or any for
// an operator. Another tenant's instance is ENOTFOUND.
func (s *Service) ownInstance(ctx context.Context, scope string, id int64) (*suanli.Principal, *suanli.Instance, error) {
	p, err := principal(ctx, scope)
	if err != nil {
		return nil, nil, err
	}
	in, err := s.Store.FindInstanceByID(ctx, id, s.now())
	if err != nil {
		return nil, nil, err
	}
	if in.AccountID != p.AccountID && p.Role != suanli.RoleOperator {
		return nil, nil, suanli.Errorf(suanli.ENOTFOUND, "instance %d not found", id)
	}
	return p, in, nil
}

// FindInstanceByID returns one of the caller's instances.
func (s *Service) FindInstanceByID(ctx context.Context, id int64) (*suanli.Instance, error) {
	_, in, err := s.ownInstance(ctx, suanli.ScopeInstanceRead, id)
	return in, err
}

// FindInstances lists the caller's instances.
func (s *Service) FindInstances(ctx context.Context, f suanli.InstanceFilter) ([]*suanli.Instance, int, error) {
	p, err := principal(ctx, suanli.ScopeInstanceRead)
	if err != nil {
		return nil, 0, err
	}
	f.AccountID = &p.AccountID
	return s.Store.FindInstances(ctx, f, s.now())
}

// StopInstance asks the agent to stop the workload; compute billing ends
// now. A preempted or queued instance stops waiting for GPUs.
func (s *Service) StopInstance(ctx context.Context, id int64) (*suanli.Instance, error) {
	out, err := s.changeInstance(ctx, id, func(in *suanli.Instance) error {
		in.WaitingSince = nil
		switch in.Status {
		case suanli.StatusDestroyed:
			return suanli.Errorf(suanli.ECONFLICT, "instance %d is destroyed", id)
		case suanli.StatusPreempted:
			in.Desired = suanli.DesiredStopped
			in.Status, in.StatusMessage = suanli.StatusStopped, "stopped by the renter while preempted: it no longer waits for GPUs"
			return nil
		case suanli.StatusStopped, suanli.StatusExited, suanli.StatusFailed, suanli.StatusStopping, suanli.StatusPreempting:
			in.Desired = suanli.DesiredStopped
			if in.Status == suanli.StatusStopped {
				in.StatusMessage = "stopped by the renter"
			}
			return nil
		}
		in.Desired = suanli.DesiredStopped
		in.Status, in.StatusMessage = suanli.StatusStopping, "stop requested"
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.afterChange(ctx, out.MachineID)
	return out, nil
}

// DestroyInstance ends the rental: all billing stops now; the agent removes
// the workload and its data. Its GPUs go to whoever waits for them.
func (s *Service) DestroyInstance(ctx context.Context, id int64) (*suanli.Instance, error) {
	out, err := s.changeInstance(ctx, id, func(in *suanli.Instance) error {
		in.Desired, in.WaitingSince = suanli.DesiredDestroyed, nil
		in.Status, in.StatusMessage = suanli.StatusDestroyed, "destroyed by the renter"
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.afterChange(ctx, out.MachineID)
	return s.Store.FindInstanceByID(ctx, id, s.now())
}

func (s *Service) changeInstance(ctx context.Context, id int64, fn func(*suanli.Instance) error) (*suanli.Instance, error) {
	_, in, err := s.ownInstance(ctx, suanli.ScopeInstanceWrite, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out, err := s.Store.UpdateInstance(ctx, in.ID, now, now, fn)
	if err != nil {
		return nil, err
	}
	s.hub.wake(out.MachineID)
	if err := s.refreshOffer(ctx, out.MachineID); err != nil {
		s.Logger.Error("refresh offer", "machine_id", out.MachineID, "err", err)
	}
	s.Logger.Info("instance changed", "instance_id", id, "status", out.Status, "desired", out.Desired)
	return s.Store.FindInstanceByID(ctx, id, now)
}

// InstanceLogs returns up to 256 KiB of an instance's log from offset.
func (s *Service) InstanceLogs(ctx context.Context, id int64, offset int64) (*suanli.LogChunk, error) {
	_, in, err := s.ownInstance(ctx, suanli.ScopeInstanceRead, id)
	if err != nil {
		return nil, err
	}
	c, err := s.Store.ReadLog(ctx, id, offset, 256<<10)
	if err != nil {
		return nil, err
	}
	c.Done = in.Status == suanli.StatusDestroyed
	return c, nil
}
