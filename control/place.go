package control

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/market"
	"github.com/suanli/suanli/sched"
	"github.com/suanli/suanli/sqlstore"
)

// maxCandidates bounds the hosts a query-picked placement plans over.
const maxCandidates = 500

// derivedFields are offer fields computed from the GPUs free now: a create
// query's conditions on them describe the request, not the host, so they
// leave the host filter (num_gpus, cpu_cores, cpu_ram and dph become the
// request's size and price; the rest is dropped).
var derivedFields = []string{"num_gpus", "rentable", "gpu_total_ram", "dph_base", "dph_total", "dlperf", "total_flops",
	"dlperf_per_dphtotal", "flops_per_dphtotal", "cpu_cores", "cpu_ram", "min_bid"}

// createQuery splits a create query into the host filter (for the offer
// index, with rentable=any: capacity is the scheduler's to judge, including
// what a higher claim may preempt) and what it says about the request.
func createQuery(text string, req *sched.Request, fc *suanli.FleetCreate) (string, error) {
	q, err := market.Parse(text)
	if err != nil {
		return "", err
	}
	keep := &market.Query{Any: slices.Clone(q.Any)}
	for _, c := range q.Conds {
		if !slices.Contains(derivedFields, c.Field) {
			keep.Conds = append(keep.Conds, c)
			continue
		}
		if len(c.Values) != 1 {
			continue
		}
		v := c.Values[0]
		atLeast := c.Op == market.OpEQ || c.Op == market.OpGE || c.Op == market.OpGT
		atMost := c.Op == market.OpLE || c.Op == market.OpLT
		switch c.Field {
		case "num_gpus":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return "", suanli.FieldErrorf("query", "num_gpus %q: give a whole number of GPUs per instance", v)
			}
			if c.Op == market.OpGT {
				n++
			}
			if atLeast && fc.GPUCount == 0 {
				fc.GPUCount = n
			}
		case "cpu_cores":
			if n, err := strconv.Atoi(v); err == nil && atLeast {
				req.MinCPUCores = n
			}
		case "cpu_ram":
			if gb, err := strconv.ParseFloat(strings.TrimSuffix(strings.ToUpper(v), "GB"), 64); err == nil && atLeast {
				req.MinRAMMB = int64(gb * 1024)
			}
		case "dph_total", "dph_base":
			if m, err := suanli.ParseMoney(v); err == nil && atMost && fc.MaxPrice == 0 {
				fc.MaxPrice = m
			}
		}
	}
	if !slices.Contains(keep.Any, "rentable") {
		keep.Any = append(keep.Any, "rentable")
	}
	return keep.String(), nil
}

// CreateFleet rents fc.Count instances on one offer or on the offers a
// query picks; see suanli.RentalService.
func (s *Service) CreateFleet(ctx context.Context, fc suanli.FleetCreate) (*suanli.FleetResult, error) {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return nil, err
	}
	if fc.Count < 0 || fc.Count > suanli.MaxFleet {
		return nil, suanli.FieldErrorf("count", "%d: ask for 1 to %d instances", fc.Count, suanli.MaxFleet)
	}
	if fc.MaxPrice < 0 {
		return nil, suanli.FieldErrorf("max_price", "%s is negative", fc.MaxPrice)
	}
	if fc.OfferID == 0 && strings.TrimSpace(fc.Query) == "" {
		return nil, suanli.FieldErrorf("offer_id", "give an offer id from `suanli search`, or a query (--query 'gpu_name=RTX_4090 num_gpus=2')")
	}
	if fc.OfferID != 0 && fc.Query != "" {
		return nil, suanli.FieldErrorf("query", "give an offer id or a query, not both")
	}
	offer := fc.OfferID
	if offer == 0 {
		fc.OfferID = 1 // validateCreate checks the other fields
	}
	if err := validateCreate(&fc.InstanceCreate); err != nil {
		return nil, err
	}
	fc.OfferID = offer
	if prior, err := s.priorCreate(ctx, p); err != nil || prior != nil {
		if prior == nil {
			return nil, err
		}
		return &suanli.FleetResult{Instances: prior, Wanted: max(fc.Count, 1), Message: fmt.Sprintf("placed %d earlier by this request (Idempotency-Key)", len(prior))}, nil
	}
	fc.RequestKey = suanli.RequestKeyFromContext(ctx)
	return s.place(ctx, p, fc)
}

// priorCreate returns the instances an earlier try of this request (same
// account and Idempotency-Key) created, if any: a retry after a crash that
// came between the create and its recorded reply gets them back rather
// than renting again.
func (s *Service) priorCreate(ctx context.Context, p *suanli.Principal) ([]*suanli.Instance, error) {
	key := suanli.RequestKeyFromContext(ctx)
	if key == "" {
		return nil, nil
	}
	prior, err := s.Store.FindInstancesByRequestKey(ctx, p.AccountID, key, s.now())
	if err != nil || len(prior) == 0 {
		return nil, err
	}
	s.decorate(prior...)
	return prior, nil
}

// request builds the scheduler's request and the candidate hosts.
func (s *Service) request(ctx context.Context, p *suanli.Principal, fc *suanli.FleetCreate) (sched.Request, []int64, error) {
	req := sched.Request{CPUCores: fc.CPUCores, DiskGB: fc.DiskGB, RentalType: fc.RentalType, FeeBP: s.cfg.FeeBasisPoints,
		AccountID: p.AccountID, AllowSimulated: s.cfg.AllowSimulated, Count: max(fc.Count, 1), AllOrNothing: fc.AllOrNothing,
		At: s.now().UnixMicro()}
	if fc.Bid != nil {
		req.Bid = *fc.Bid
	}
	if fc.OfferID != 0 {
		req.GPUCount, req.MaxPrice = fc.GPUCount, fc.MaxPrice
		return req, []int64{fc.OfferID}, nil
	}
	filter, err := createQuery(fc.Query, &req, fc)
	if err != nil {
		return req, nil, err
	}
	req.GPUCount, req.MaxPrice = fc.GPUCount, fc.MaxPrice
	if req.GPUCount == 0 && fc.CPUCores == 0 {
		req.GPUCount = 1 // a query rents one GPU per instance unless it says more
	}
	res, err := s.Index.Search(suanli.OfferQuery{Query: filter, Order: "dph", Limit: maxCandidates, StorageGB: float64(fc.DiskGB)}, s.viewer(p))
	if err != nil {
		return req, nil, err
	}
	ids := make([]int64, 0, len(res.Offers))
	for _, o := range res.Offers {
		ids = append(ids, o.MachineID)
	}
	if len(ids) == 0 {
		shown := strings.TrimSpace(strings.ReplaceAll(filter, "rentable=any", ""))
		return req, nil, suanli.Errorf(suanli.ECONFLICT, "no listed offer matches %s: see why with `suanli search '%s' --explain`", shown, shown)
	}
	return req, ids, nil
}

// snapshot reads the hosts the scheduler plans over.
func (s *Service) snapshot(ctx context.Context, ids []int64) (*sched.Snapshot, error) {
	snap, _, err := s.snapshotMachines(ctx, ids)
	return snap, err
}

// snapshotMachines is snapshot with the machines it was built from, by id.
func (s *Service) snapshotMachines(ctx context.Context, ids []int64) (*sched.Snapshot, map[int64]*suanli.Machine, error) {
	ms, live, err := s.Store.Snapshot(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	now := s.now()
	bookings, err := s.liveBookings(ctx)
	if err != nil {
		return nil, nil, err
	}
	snap := &sched.Snapshot{}
	byID := make(map[int64]*suanli.Machine, len(ms))
	for _, m := range ms {
		h := hostOf(m, live, now)
		h.Holds = holdsOf(bookings, m.ID)
		snap.Hosts = append(snap.Hosts, h)
		byID[m.ID] = m
	}
	return snap, byID, nil
}

// hostOf builds a machine's scheduler host; a wait's start orders the
// queue, creation order breaks ties.
func hostOf(m *suanli.Machine, live []*suanli.Instance, now time.Time) *sched.Host {
	wait := map[int64]int64{}
	for _, in := range live {
		if in.WaitingSince != nil && in.MachineID == m.ID {
			wait[in.ID] = in.WaitingSince.UnixMicro()
		}
	}
	expired := m.Listing.EndDate != nil && !m.Listing.EndDate.After(now)
	return sched.HostFromMachine(rentTerms(m), live, expired, wait)
}

// place plans a fleet request on a snapshot of its candidate hosts and
// applies the plan in one store transaction, planning again (a bounded
// number of times) when the store finds it stale.
func (s *Service) place(ctx context.Context, p *suanli.Principal, fc suanli.FleetCreate) (*suanli.FleetResult, error) {
	req, ids, err := s.request(ctx, p, &fc)
	if err != nil {
		return nil, err
	}
	if len(fc.Volumes) > 0 && fc.OfferID == 0 {
		return nil, suanli.FieldErrorf("volumes", "a volume lives on one machine: name its offer instead of a query")
	}
	acct, err := s.prepareCreate(ctx, p, &fc.InstanceCreate)
	if err != nil {
		return nil, err
	}
	req.AccountResidency, req.RentalResidency = acct.AllowedCountries, fc.AllowedCountries
	if fc.GPUCount > 0 {
		// The quota is known before planning: say so before any capacity talk.
		if err := s.checkQuotaN(ctx, p, fc.GPUCount*req.Count, req.Count, 0); err != nil {
			return nil, err
		}
	}
	var lastErr error
	for attempt := 0; attempt < maxPlanAttempts; attempt++ {
		snap, machines, err := s.snapshotMachines(ctx, ids)
		if err != nil {
			return nil, err
		}
		if fc.OfferID != 0 && len(snap.Hosts) == 0 {
			return nil, suanli.Errorf(suanli.ENOTFOUND, "offer %d not found: it is not listed (search again)", fc.OfferID)
		}
		res := sched.Schedule(snap, req)
		if len(res.Placements) == 0 {
			return nil, s.unplacedError(fc, snap, res)
		}
		if err := s.admit(ctx, p, fc, machines, res); err != nil {
			return nil, err
		}
		byID := map[int64]*sched.Host{}
		for _, h := range snap.Hosts {
			byID[h.ID] = h
		}
		ps := make([]sqlstore.Placement, 0, len(res.Placements))
		for _, pl := range res.Placements {
			sp, err := s.storePlacement(p, acct, fc, req, byID[pl.HostID], pl)
			if err != nil {
				return nil, err
			}
			ps = append(ps, sp)
		}
		ins, err := s.Store.ApplyPlacements(ctx, ps, s.now())
		if suanli.ErrorCode(err) == suanli.ECONFLICT {
			lastErr = err
			continue
		} else if err != nil {
			return nil, err
		}
		return s.placed(ctx, p, fc, res, ins)
	}
	return nil, lastErr
}

// admit runs the checks a plan must pass before anything is written: the
// account's quota for all its instances, the volume mounts on their
// machine, and each machine's pre-flight (once per machine).
func (s *Service) admit(ctx context.Context, p *suanli.Principal, fc suanli.FleetCreate, machines map[int64]*suanli.Machine, res *sched.Result) error {
	gpus := 0
	for _, pl := range res.Placements {
		gpus += len(pl.GPUIndexes)
	}
	if err := s.checkQuotaN(ctx, p, gpus, len(res.Placements), 0); err != nil {
		return err
	}
	checked := map[int64]bool{}
	for _, pl := range res.Placements {
		if checked[pl.HostID] {
			continue
		}
		checked[pl.HostID] = true
		if err := s.resolveMounts(ctx, p, pl.HostID, fc.Volumes); err != nil {
			return err
		}
		plan := &sched.Plan{GPUIndexes: pl.GPUIndexes, GPUUUIDs: pl.GPUUUIDs, CPUCores: pl.CPUCores, RAMMB: pl.RAMMB, Rates: pl.Rates, HourlyCost: pl.HourlyCost}
		if err := s.preflight(ctx, machines[pl.HostID], fc.InstanceCreate, plan); err != nil {
			return err
		}
	}
	return nil
}

// prepareCreate does what every rental checks before it is planned: the
// rental's residency list is valid and within the account's, and the
// account's budgets allow a new rental. It returns the account.
func (s *Service) prepareCreate(ctx context.Context, p *suanli.Principal, c *suanli.InstanceCreate) (*suanli.Account, error) {
	var err error
	if c.AllowedCountries, err = normalizeResidency("allowed_countries", c.AllowedCountries); err != nil {
		return nil, err
	}
	acct, err := s.Store.FindAccountByID(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	for _, v := range c.AllowedCountries {
		if len(acct.AllowedCountries) > 0 && !slices.Contains(acct.AllowedCountries, v) {
			return nil, suanli.FieldErrorf("allowed_countries", "%s is outside what your account allows (%s)", v, strings.Join(acct.AllowedCountries, ", "))
		}
	}
	if err := s.checkBudgetsForCreate(ctx, p.AccountID, c.Project, c.Tags); err != nil {
		return nil, err
	}
	return acct, nil
}

// storePlacement turns a scheduler placement into the instance to write,
// its secrets sealed.
func (s *Service) storePlacement(p *suanli.Principal, acct *suanli.Account, fc suanli.FleetCreate, req sched.Request, h *sched.Host, pl sched.Placement) (sqlstore.Placement, error) {
	c := fc.InstanceCreate
	in := &suanli.Instance{
		AccountID: p.AccountID, MachineID: h.ID, HostID: h.OwnerID, Label: c.Label, Image: c.Image, Cmd: c.Cmd, Env: c.Env,
		Project: c.Project, Tags: c.Tags, Guards: c.Guards, Restart: c.Restart, Ports: c.Ports, Template: c.Template, Volumes: c.Volumes,
		DiskGB: c.DiskGB, GPUCount: len(pl.GPUIndexes), GPUIndexes: pl.GPUIndexes, CPUCores: pl.CPUCores,
		RentalType: c.RentalType, Bid: req.Bid, Rates: pl.Rates, Simulated: h.Simulated,
		Status: suanli.StatusPending, Desired: suanli.DesiredRunning, StatusMessage: "waiting for the host agent",
		RequestKey: c.RequestKey,
	}
	if in.RentalType != suanli.RentalInterruptible {
		in.Rates.GreenDiscountBP = h.Listing.GreenDiscountBP // 0 unless it applied (rentTerms)
	}
	if in.GPUCount > 0 {
		in.GPUName = h.GPUName
	}
	if in.GPUIndexes == nil {
		in.GPUIndexes = []int{}
	}
	if in.Cmd == nil {
		in.Cmd = []string{}
	}
	if in.Env == nil {
		in.Env = map[string]string{}
	}
	in.Allowed = c.AllowedCountries
	if len(in.Allowed) == 0 {
		in.Allowed = acct.AllowedCountries
	}
	if len(c.SecretEnv) > 0 || c.RegistryAuth != nil {
		plain, err := json.Marshal(suanli.InstanceSecrets{Env: c.SecretEnv, RegistryAuth: c.RegistryAuth})
		if err != nil {
			return sqlstore.Placement{}, err
		}
		in.Sealed = s.sealer.Seal(plain, secretsPurpose(p.AccountID))
		if len(c.SecretEnv) > 0 {
			in.SecretEnv = map[string]string{}
			for k := range c.SecretEnv {
				in.SecretEnv[k] = suanli.SecretMask
			}
		}
		if r := c.RegistryAuth; r != nil {
			in.RegistryAuth = &suanli.RegistryAuth{Server: r.Server, Username: r.Username, Password: suanli.SecretMask}
		}
	}
	sp := sqlstore.Placement{Instance: in, HourlyCost: pl.HourlyCost, RAMMB: pl.RAMMB, Bookings: []int64{}}
	for _, hd := range h.Holds {
		sp.Bookings = append(sp.Bookings, hd.BookingID)
	}
	for _, v := range pl.Preempt {
		sp.Preempt = append(sp.Preempt, sqlstore.Victim{ID: v.ID, Version: v.Version})
	}
	return sp, nil
}

// placed wakes the agents, refreshes the offers and says what was rented.
func (s *Service) placed(ctx context.Context, p *suanli.Principal, fc suanli.FleetCreate, res *sched.Result, ins []*suanli.Instance) (*suanli.FleetResult, error) {
	machines := map[int64]bool{}
	out := &suanli.FleetResult{Wanted: res.Wanted, Unplaced: res.Wanted - len(ins)}
	for i, in := range ins {
		machines[in.MachineID] = true
		var victims []int64
		for _, v := range res.Placements[i].Preempt {
			victims = append(victims, v.ID)
		}
		s.Logger.Info("instance created", "instance_id", in.ID, "machine_id", in.MachineID, "account_id", p.AccountID,
			"gpus", in.GPUIndexes, "rental", in.RentalType, "rate", in.Rates.ComputePerHour.String(), "preempted", victims)
		full, err := s.Store.FindInstanceByID(ctx, in.ID, s.now())
		if err != nil {
			return nil, err
		}
		s.decorate(full)
		out.Instances = append(out.Instances, full)
	}
	for id := range machines {
		s.hub.wake(id)
		if err := s.refreshOffer(ctx, id); err != nil {
			s.Logger.Error("refresh offer", "machine_id", id, "err", err)
		}
	}
	ids := make([]string, len(ins))
	for i, in := range ins {
		ids[i] = strconv.FormatInt(in.ID, 10)
	}
	out.Message = fmt.Sprintf("placed %d of %d: instance %s", len(ins), res.Wanted, strings.Join(ids, ", "))
	if out.Unplaced > 0 {
		out.Message += fmt.Sprintf("; %d not placed: %s", out.Unplaced, res.Why(5))
		out.Rejections = rejections(res)
	}
	return out, nil
}

func rejections(res *sched.Result) []suanli.HostRejection {
	out := make([]suanli.HostRejection, 0, len(res.Rejections))
	for _, r := range res.Rejections {
		out = append(out, suanli.HostRejection{HostID: r.HostID, Step: r.Step, Reason: r.Reason})
	}
	return out
}

// unplacedError says why nothing was placed. On one offer it keeps the
// codes of a single rental: the offer not listed is ENOTFOUND, a simulated
// offer EFORBIDDEN, a bid below the minimum or a bad rental type EINVALID
// naming the field, anything else ECONFLICT.
func (s *Service) unplacedError(fc suanli.FleetCreate, snap *sched.Snapshot, res *sched.Result) error {
	if res.Dropped > 0 {
		return suanli.Errorf(suanli.ECONFLICT, "all or nothing: only %d of %d instances could be placed, so nothing was rented: %s",
			res.Dropped, res.Wanted, res.Why(5))
	}
	if fc.OfferID != 0 && len(res.Rejections) == 1 {
		r := res.Rejections[0]
		switch r.Step {
		case "listed":
			return suanli.Errorf(suanli.ENOTFOUND, "offer %d not found: it is not listed (search again)", fc.OfferID)
		case "simulated", "residency":
			return suanli.Errorf(suanli.EFORBIDDEN, "%s", r.Reason)
		case "online":
			h := snap.Hosts[0]
			return suanli.Errorf(suanli.ECONFLICT, "offer %d: its host is %s (it missed heartbeats): pick another offer", h.ID, h.Status)
		case "bid", "rental_type":
			return &suanli.Error{Code: suanli.EINVALID, Field: r.Field, Message: r.Field + ": " + r.Reason}
		}
		return suanli.Errorf(suanli.ECONFLICT, "%s", r.Reason)
	}
	return suanli.Errorf(suanli.ECONFLICT, "no offer could take it: %s", res.Why(8))
}

// CreateInstance rents an offer: the one-instance case of CreateFleet. It
// plans on the offer's machine, preempting lower interruptible rentals when
// the request outranks them, and applies the plan in one store transaction
// (re-checking capacity and balance), retrying a stale plan a bounded
// number of times.
func (s *Service) CreateInstance(ctx context.Context, c suanli.InstanceCreate) (*suanli.Instance, error) {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return nil, err
	}
	if err := validateCreate(&c); err != nil {
		return nil, err
	}
	if prior, err := s.priorCreate(ctx, p); err != nil {
		return nil, err
	} else if prior != nil {
		return prior[0], nil
	}
	c.RequestKey = suanli.RequestKeyFromContext(ctx)
	res, err := s.place(ctx, p, suanli.FleetCreate{InstanceCreate: c, Count: 1})
	if err != nil {
		return nil, err
	}
	return res.Instances[0], nil
}
