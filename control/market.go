package control

import (
	"context"
	"fmt"
	"strings"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sched"
	"github.com/suanli/suanli/sqlstore"
)

var _ suanli.RentalService = (*Service)(nil)

// rebalance arbitrates a machine's claims after units were freed or ranks
// changed (a destroy, a stop, a preemption that ended, a new bid): waiting
// instances that now win are resumed, owners that now lose are preempted.
// A stale decision is made again, a bounded number of times.
func (s *Service) rebalance(ctx context.Context, machineID int64) error {
	var lastErr error
	for attempt := 0; attempt < maxPlanAttempts; attempt++ {
		snap, err := s.snapshot(ctx, []int64{machineID})
		if err != nil || len(snap.Hosts) == 0 {
			return err
		}
		h := snap.Hosts[0]
		if h.Status != suanli.MachineOnline {
			return nil // a silent host's instances are lost, not rearranged; it is arbitrated when it is back
		}
		d := sched.Arbitrate(h)
		if d.Empty() {
			return nil
		}
		var preempt []sqlstore.Victim
		var resume []sqlstore.Resume
		var pids, rids []int64
		for _, v := range d.Preempt {
			preempt = append(preempt, sqlstore.Victim{ID: v.ID, Version: v.Version})
			pids = append(pids, v.ID)
		}
		for _, g := range d.Resume {
			idx := []int{}
			if h.IsGPU() {
				idx = h.Indexes(g.GPUs)
			}
			resume = append(resume, sqlstore.Resume{ID: g.ID, Version: g.Version, GPUIndexes: idx})
			rids = append(rids, g.ID)
		}
		err = s.Store.ApplyRebalance(ctx, machineID, preempt, resume, s.now())
		if suanli.ErrorCode(err) == suanli.ECONFLICT {
			lastErr = err
			continue
		} else if err != nil {
			return err
		}
		s.Logger.Info("machine rebalanced", "machine_id", machineID, "preempted", pids, "resumed", rids)
		return nil
	}
	return lastErr
}

// StartInstance starts a stopped instance on its machine, with whichever
// of its GPUs are free; ECONFLICT when they are taken (see StartInstanceWith).
func (s *Service) StartInstance(ctx context.Context, id int64) (*suanli.Instance, error) {
	return s.StartInstanceWith(ctx, id, suanli.StartOptions{})
}

// StartInstanceWith starts a stopped (or exited, or failed) instance on its
// machine. When the GPUs it needs are held by rentals that outrank it, the
// start is refused with who holds them and the two ways on: opt.Wait queues
// the start (in order, behind earlier waits of the same rank; it starts by
// itself when it wins GPUs), or RecreateInstance elsewhere. An on-demand
// start preempts interruptible rentals like a new on-demand rental would.
func (s *Service) StartInstanceWith(ctx context.Context, id int64, opt suanli.StartOptions) (*suanli.Instance, error) {
	p, in, err := s.ownInstance(ctx, suanli.ScopeInstanceWrite, id, false)
	if err != nil {
		return nil, err
	}
	switch {
	case in.Status == suanli.StatusDestroyed:
		return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d is destroyed: create a new one", id)
	case in.RentalType == suanli.RentalBooked && in.Desired == suanli.DesiredStopped:
		return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d ran a booking that has ended: book again (`suanli windows search`) or rent on-demand", id)
	case in.Status == suanli.StatusStopping:
		// It still holds its GPUs: take the stop back.
		return s.changeInstance(ctx, id, false, func(in *suanli.Instance) error {
			in.Desired = suanli.DesiredRunning
			in.Status, in.StatusMessage, in.ExitCode = suanli.StatusPending, "start requested", nil
			return nil
		})
	case in.Waiting():
		return in, nil // preempted or queued: it starts by itself when it wins GPUs
	case in.Status == suanli.StatusPreempting && in.Desired == suanli.DesiredRunning:
		return in, nil
	case in.Status == suanli.StatusStopped, in.Status == suanli.StatusExited, in.Status == suanli.StatusFailed,
		in.Status == suanli.StatusPreempted, in.Status == suanli.StatusPreempting:
	default:
		return in, nil // already running or on its way
	}
	if err := s.checkBudgetsForCreate(ctx, in.AccountID, in.Project, in.Tags); err != nil {
		return nil, err
	}
	if err := s.checkQuota(ctx, p, in.GPUCount, in.ID); err != nil {
		return nil, err
	}
	now := s.now()
	if in.Status != suanli.StatusPreempting {
		snap, err := s.snapshot(ctx, []int64{in.MachineID})
		if err != nil {
			return nil, err
		}
		if len(snap.Hosts) == 0 {
			return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d: its machine %d is gone", id, in.MachineID)
		}
		h := snap.Hosts[0]
		probe := *in
		probe.Status, probe.Desired = suanli.StatusStopped, suanli.DesiredRunning
		c, _ := sched.ClaimOf(h, &probe, now.UnixMicro())
		h.Claims = append(h.Claims, c)
		d := sched.Arbitrate(h)
		wins := false
		for _, g := range d.Resume {
			wins = wins || g.ID == id
		}
		if !wins && !opt.Wait {
			return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d: %s; to wait for them, queue the start with `suanli start %d --wait` "+
				"(it starts by itself, in order, when they free up), or recreate it elsewhere with `suanli start %d --elsewhere`",
				id, takenBy(h, &c), id, id)
		}
	}
	return s.changeInstance(ctx, id, false, func(in *suanli.Instance) error {
		if in.Status == suanli.StatusDestroyed {
			return suanli.Errorf(suanli.ECONFLICT, "instance %d is destroyed", id)
		}
		in.Desired, in.ExitCode = suanli.DesiredRunning, nil
		t := now
		in.WaitingSince = &t
		if in.Status != suanli.StatusPreempting && in.Status != suanli.StatusPreempted {
			in.Status = suanli.StatusStopped
		}
		in.StatusMessage = "start queued: it starts by itself when it wins GPUs on machine " + fmt.Sprint(in.MachineID)
		return nil
	})
}

// takenBy says who holds the units a waiting claim cannot have.
func takenBy(h *sched.Host, c *sched.Claim) string {
	unit := "GPUs"
	if !h.IsGPU() {
		unit = "CPU cores"
	}
	var who []string
	for _, o := range h.Claims {
		if o.State != sched.Owner || o.ID == c.ID {
			continue
		}
		kind := "on-demand"
		if o.Class == sched.ClassBid {
			kind = "bid " + o.Bid.String() + "/h"
		}
		who = append(who, fmt.Sprintf("instance %d (%s)", o.ID, kind))
	}
	return fmt.Sprintf("machine %d has %d free %s, it needs %d; they were taken while it was stopped by %s",
		h.ID, h.FreeUnits(), unit, c.Units, strings.Join(who, ", "))
}

// ChangeBid sets an interruptible instance's bid. The compute meter is
// settled at the old bid up to now, then runs at the new one; the machine is
// arbitrated again, so a raised bid may resume the instance (preempting a
// lower one) and a lowered bid may lose its GPUs to a waiting higher one.
func (s *Service) ChangeBid(ctx context.Context, id int64, bid suanli.Money) (*suanli.Instance, error) {
	_, in, err := s.ownInstance(ctx, suanli.ScopeInstanceWrite, id, false)
	if err != nil {
		return nil, err
	}
	if bid <= 0 {
		return nil, suanli.FieldErrorf("bid", "%s: give a positive price per hour", bid)
	}
	if in.Status == suanli.StatusDestroyed {
		return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d is destroyed", id)
	}
	if in.RentalType != suanli.RentalInterruptible {
		return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d is %s: only an interruptible rental has a bid", id, in.RentalType)
	}
	m, err := s.Store.FindMachineByID(ctx, in.MachineID)
	if err != nil {
		return nil, err
	}
	units, word := in.GPUCount, "GPU"
	if !m.IsGPU() {
		units, word = in.CPUCores, "core"
	}
	if units != 1 {
		word += "s"
	}
	if min := rentTerms(m).Listing.MinBid * suanli.Money(units); bid < min {
		return nil, suanli.FieldErrorf("bid", "%s/h is below offer %d's minimum bid of %s/h for %d %s", bid, m.ID, min, units, word)
	}
	now := s.now()
	old := in.Bid
	if _, err := s.Store.ChangeRate(ctx, id, now, now, func(i *suanli.Instance) error {
		if i.Status == suanli.StatusDestroyed || i.RentalType != suanli.RentalInterruptible {
			return suanli.Errorf(suanli.ECONFLICT, "instance %d changed meanwhile (%s, %s): try again", id, i.Status, i.RentalType)
		}
		i.Bid, i.Rates.ComputePerHour = bid, bid
		return nil
	}); err != nil {
		return nil, err
	}
	s.Logger.Info("bid changed", "instance_id", id, "old", old.String(), "new", bid.String())
	s.afterChange(ctx, in.MachineID)
	return s.Store.FindInstanceByID(ctx, id, s.now())
}

// RecreateInstance creates a new instance like id (image, command,
// environment, disk size, GPU count, rental type and bid) on another host
// that r.Query picks (default: the same GPU model). The old instance is left
// as it is (its disk too) for the renter to destroy once they have what they
// need from it; DiskNote says what "the same disk" means on its runtime.
func (s *Service) RecreateInstance(ctx context.Context, id int64, r suanli.Recreate) (*suanli.RecreateResult, error) {
	p, old, err := s.ownInstance(ctx, suanli.ScopeInstanceWrite, id, false)
	if err != nil {
		return nil, err
	}
	if old.Status == suanli.StatusDestroyed {
		return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d is destroyed: its disk is gone; create a new instance", id)
	}
	m, err := s.Store.FindMachineByID(ctx, old.MachineID)
	if err != nil {
		return nil, err
	}
	q := strings.TrimSpace(r.Query)
	if q == "" && old.GPUName != "" {
		q = fmt.Sprintf("gpu_name=%q", old.GPUName)
	}
	q = strings.TrimSpace(q + fmt.Sprintf(" machine_id!=%d", old.MachineID))
	c := suanli.InstanceCreate{Image: old.Image, Cmd: old.Cmd, Env: old.Env, DiskGB: old.DiskGB, GPUCount: old.GPUCount,
		Label: old.Label, RentalType: old.RentalType, Project: old.Project, Tags: old.Tags, Guards: old.Guards, Restart: old.Restart,
		Ports: old.Ports, Template: old.Template}
	if !m.IsGPU() {
		c.CPUCores = old.CPUCores
	}
	c.AllowedCountries = old.Allowed
	sec, err := s.openSecrets(old)
	if err != nil {
		return nil, err
	}
	if sec != nil {
		c.SecretEnv, c.RegistryAuth = sec.Env, sec.RegistryAuth
	}
	switch old.RentalType {
	case suanli.RentalInterruptible:
		b := old.Bid
		c.Bid = &b
	case suanli.RentalReserved:
		c.RentalType = suanli.RentalOnDemand // a reservation is with its host
	}
	fc := suanli.FleetCreate{InstanceCreate: c, Count: 1, Query: q, MaxPrice: r.MaxPrice}
	fc.OfferID = 1
	if err := validateCreate(&fc.InstanceCreate); err != nil {
		return nil, err
	}
	fc.OfferID = 0
	res, err := s.place(ctx, p, fc)
	if err != nil {
		return nil, err
	}
	in := res.Instances[0]
	return &suanli.RecreateResult{Instance: in, OldID: id, DiskNote: diskNote(m, old, in)}, nil
}

// diskNote says honestly what recreating elsewhere does with the disk.
func diskNote(m *suanli.Machine, old, in *suanli.Instance) string {
	where := "a directory under the agent's data dir"
	if m.Runtime == "docker" {
		where = "a Docker volume"
	}
	return fmt.Sprintf("instance %d's disk is %s on machine %d (the %s runtime keeps each disk on its host); it cannot follow to machine %d, "+
		"so instance %d starts with a fresh %d GB disk and the same image, command and environment. Instance %d keeps its disk "+
		"(billed while it exists), and so do its volumes (they stay attached to machine %d): start it again when its GPUs free up "+
		"(`suanli start %d --wait`) to copy what you need, then destroy it",
		old.ID, where, m.ID, orDefault(m.Runtime, "process"), in.MachineID, in.ID, in.DiskGB, old.ID, m.ID, old.ID)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
