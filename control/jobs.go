package control

import (
	"context"
	"fmt"
	"slices"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sched"
	"github.com/suanli/suanli/sqlstore"
)

// restartAfterExit decides, for an instance whose workload just ended with
// exit code (nil: failed to start or run), whether its policy restarts it.
// It marks the restart pending: the agent first confirms the stop, then the
// instance is started again (see restartIfPending).
func restartAfterExit(in *suanli.Instance, code *int) bool {
	r := in.Restart
	failed := code == nil || *code != 0
	if r.Policy != suanli.RestartAlways && !(r.Policy == suanli.RestartOnFailure && failed) {
		return false
	}
	limit := r.Limit()
	why := "it failed"
	if code != nil {
		why = fmt.Sprintf("it exited with code %d", *code)
	}
	if in.Restarts >= limit {
		in.StatusMessage = fmt.Sprintf("%s; not restarted: %d of %d restarts used (--max-restarts)", why, in.Restarts, limit)
		return false
	}
	in.RestartPending = true
	in.StatusMessage = fmt.Sprintf("%s; restarting (%d of %d)", why, in.Restarts+1, limit)
	return true
}

// restartIfPending starts an instance again once the agent confirmed that
// its exited workload is stopped.
func restartIfPending(in *suanli.Instance) {
	if !in.RestartPending {
		return
	}
	in.RestartPending = false
	in.Restarts++
	in.Desired, in.Status, in.ExitCode = suanli.DesiredRunning, suanli.StatusPending, nil
	in.StatusMessage = fmt.Sprintf("restart %d after the workload ended", in.Restarts)
}

// CheckRecoveries relaunches managed jobs (--recover elsewhere) whose host
// was lost or that were preempted on another matching offer, avoiding the
// hosts that failed them. A job that finds no offer says so and is retried
// on the next check.
func (s *Service) CheckRecoveries(ctx context.Context) error {
	live := true
	ins, _, err := s.Store.FindInstances(ctx, suanli.InstanceFilter{Live: &live, Limit: 1 << 30}, s.now())
	if err != nil {
		return err
	}
	for _, in := range ins {
		if in.Restart.Recover != "elsewhere" || in.Desired != suanli.DesiredRunning {
			continue
		}
		var reason string
		switch in.Status {
		case suanli.StatusLost:
			reason = fmt.Sprintf("its host (machine %d) was lost", in.MachineID)
		case suanli.StatusPreempted:
			reason = fmt.Sprintf("it was preempted on machine %d", in.MachineID)
		default:
			continue
		}
		if err := s.relaunch(ctx, in, reason); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) relaunch(ctx context.Context, in *suanli.Instance, reason string) error {
	maxPrice := in.Restart.MaxPrice
	if maxPrice == 0 {
		maxPrice = in.Rates.ComputePerHour * 3 / 2
	}
	avoid := append(slices.Clone(in.AvoidMachines), in.MachineID)
	q := "rentable=true"
	if in.GPUCount > 0 {
		q += fmt.Sprintf(" num_gpus>=%d gpu_name=%s", in.GPUCount, underscore(in.GPUName))
	} else {
		q += fmt.Sprintf(" cpu_cores>=%d", in.CPUCores)
	}
	res, err := s.Index.Search(suanli.OfferQuery{Query: q, Order: "dph_total", Limit: 50, StorageGB: float64(in.DiskGB)},
		s.viewer(&suanli.Principal{AccountID: in.AccountID}))
	if err != nil {
		return err
	}
	acct, err := s.Store.FindAccountByID(ctx, in.AccountID)
	if err != nil {
		return err
	}
	for _, o := range res.Offers {
		if slices.Contains(avoid, o.MachineID) {
			continue
		}
		m, err := s.Store.FindMachineByID(ctx, o.MachineID)
		if err != nil {
			return err
		}
		// Data residency holds for a relaunch as for the first placement.
		if sched.CheckResidency(m, acct.AllowedCountries, in.Allowed) != nil {
			continue
		}
		gpus, cores, ram, err := s.Store.MachineUsage(ctx, m.ID)
		if err != nil {
			return err
		}
		req := sched.Request{GPUCount: in.GPUCount, CPUCores: in.CPUCores, DiskGB: in.DiskGB, RentalType: in.RentalType, Bid: in.Bid, FeeBP: s.cfg.FeeBasisPoints}
		if in.GPUCount == 0 {
			req.GPUCount = 0
		}
		terms := rentTerms(m)
		plan, err := sched.Place(terms, sched.Usage{GPUs: gpus, CPUCores: cores, RAMMB: ram}, req)
		if err != nil || plan.Rates.ComputePerHour > maxPrice {
			continue
		}
		if in.RentalType != suanli.RentalInterruptible {
			plan.Rates.GreenDiscountBP = terms.Listing.GreenDiscountBP
		}
		now := s.now()
		out, err := s.Store.MoveInstance(ctx, sqlstore.Move{InstanceID: in.ID, MachineID: m.ID, HostID: m.OwnerID, GPUIndexes: plan.GPUIndexes,
			CPUCores: plan.CPUCores, RAMMB: plan.RAMMB, Rates: plan.Rates, Reason: reason}, now, now)
		if suanli.ErrorCode(err) == suanli.ECONFLICT {
			continue
		} else if err != nil {
			return err
		}
		s.afterChange(ctx, in.MachineID)
		s.afterChange(ctx, out.MachineID)
		s.Logger.Warn("managed job relaunched", "instance_id", in.ID, "from", in.MachineID, "to", out.MachineID, "reason", reason)
		s.RecordAudit(ctx, suanli.AuditEvent{AccountID: in.AccountID, Action: "instance.relaunched", Target: fmt.Sprintf("instance %d", in.ID),
			Result: "ok", Detail: fmt.Sprintf("moved from machine %d to machine %d: %s", in.MachineID, out.MachineID, reason)})
		s.alert(ctx, &suanli.Alert{AccountID: in.AccountID, Kind: "recovery", InstanceID: in.ID,
			Message: fmt.Sprintf("instance %d relaunched on machine %d at %s/h: %s", in.ID, out.MachineID, plan.Rates.ComputePerHour, reason)}, "", "", "")
		return nil
	}
	msg := fmt.Sprintf("%s; recovering elsewhere: no matching offer yet (%d× %s at most %s/h, avoiding machines %v); retrying",
		reason, in.GPUCount, orCPU(in.GPUName), maxPrice, avoid)
	if in.StatusMessage != msg {
		_, err := s.Store.UpdateInstance(ctx, in.ID, s.now(), s.now(), func(i *suanli.Instance) error {
			i.StatusMessage = msg
			return nil
		})
		return err
	}
	return nil
}

func underscore(s string) string {
	out := []byte(s)
	for i, c := range out {
		if c == ' ' {
			out[i] = '_'
		}
	}
	return string(out)
}

func orCPU(s string) string {
	if s == "" {
		return "CPU"
	}
	return s
}
