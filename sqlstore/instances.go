package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

const instanceCols = `id, account_id, machine_id, host_id, label, image, cmd, env, disk_gb, gpu_name, gpu_count, gpu_indexes, cpu_cores, ram_mb,
	rental_type, bid, rates, simulated, status, status_message, desired, exit_code, created_at, started_at, destroyed_at, updated_at, version,
	project, tags, guards, stopped_at, restart, restarts, moves, restart_pending, avoid_machines, ports, port_map, template, volumes,
	secrets, secret_meta, allowed_countries, waiting_since, reserved_until, preempted_by`

// secretMeta is what the store keeps in the clear about an instance's
// secrets: their names and the registry user, never a value.
type secretMeta struct {
	Env      []string             `json:"env,omitempty"`
	Registry *suanli.RegistryAuth `json:"registry,omitempty"`
}

func metaOf(in *suanli.Instance) string {
	var m secretMeta
	for k := range in.SecretEnv {
		m.Env = append(m.Env, k)
	}
	slices.Sort(m.Env)
	if in.RegistryAuth != nil {
		m.Registry = &suanli.RegistryAuth{Server: in.RegistryAuth.Server, Username: in.RegistryAuth.Username}
	}
	if m.Env == nil && m.Registry == nil {
		return ""
	}
	return jsonText(m)
}

func scanInstance(r scanner) (*suanli.Instance, error) {
	var i suanli.Instance
	var cmd, env, idx, rates, tags, guards, restart, avoid, ports, portMap, vols string
	var ramMB, bid, created, updated int64
	var exit, started, destroyed, stopped, waiting, reserved sql.NullInt64
	var meta, allowed string
	if err := r.Scan(&i.ID, &i.AccountID, &i.MachineID, &i.HostID, &i.Label, &i.Image, &cmd, &env, &i.DiskGB, &i.GPUName, &i.GPUCount, &idx,
		&i.CPUCores, &ramMB, &i.RentalType, &bid, &rates, &i.Simulated, &i.Status, &i.StatusMessage, &i.Desired, &exit, &created,
		&started, &destroyed, &updated, &i.Version, &i.Project, &tags, &guards, &stopped, &restart, &i.Restarts, &i.Moves,
		&i.RestartPending, &avoid, &ports, &portMap, &i.Template, &vols, &i.Sealed, &meta, &allowed, &waiting, &reserved, &i.PreemptedBy); err != nil {
		return nil, err
	}
	i.StoppedAt = fromUSPtr(stopped)
	if meta != "" {
		var m secretMeta
		if err := json.Unmarshal([]byte(meta), &m); err != nil {
			return nil, fmt.Errorf("instance %d secret names: %w", i.ID, err)
		}
		if len(m.Env) > 0 {
			i.SecretEnv = map[string]string{}
			for _, k := range m.Env {
				i.SecretEnv[k] = suanli.SecretMask
			}
		}
		if m.Registry != nil {
			i.RegistryAuth = m.Registry
			i.RegistryAuth.Password = suanli.SecretMask
		}
	}
	if allowed != "" {
		i.Allowed = strings.Split(allowed, ",")
	}
	for _, f := range []struct {
		s string
		v any
	}{{cmd, &i.Cmd}, {env, &i.Env}, {idx, &i.GPUIndexes}, {rates, &i.Rates}, {tags, &i.Tags}, {guards, &i.Guards},
		{restart, &i.Restart}, {avoid, &i.AvoidMachines}, {ports, &i.Ports}, {portMap, &i.PortMap}, {vols, &i.Volumes}} {
		if err := json.Unmarshal([]byte(f.s), f.v); err != nil {
			return nil, fmt.Errorf("instance %d: %w", i.ID, err)
		}
	}
	i.RAMGB = float64(ramMB) / 1024
	i.Bid = suanli.Money(bid)
	if exit.Valid {
		c := int(exit.Int64)
		i.ExitCode = &c
	}
	i.CreatedAt, i.UpdatedAt = fromUS(created), fromUS(updated)
	i.StartedAt, i.DestroyedAt = fromUSPtr(started), fromUSPtr(destroyed)
	i.WaitingSince, i.ReservedUntil = fromUSPtr(waiting), fromUSPtr(reserved)
	return &i, nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Placement is a plan for one instance, made by the scheduler from a
// snapshot: the instance with its machine, GPUs, cores and locked rates
// chosen, and the interruptible instances it preempts. ApplyPlan re-checks
// it against the database.
type Placement struct {
	Instance *suanli.Instance
	// HourlyCost is what the instance costs per hour (compute + storage); the
	// renter's balance must cover one hour of it on top of what is running.
	HourlyCost suanli.Money
	// RAMMB is the memory given to the instance.
	RAMMB int64
	// Preempt are the instances that lose their GPUs (or cores) to this one,
	// at the versions the plan saw.
	Preempt []Victim
	// Bookings are the live bookings on the machine the plan saw (nil: not
	// checked). A booking made since makes the plan stale: it may hold the
	// GPUs the plan gives away.
	Bookings []int64
}

// Victim is an instance a plan preempts, at the version the plan saw: when
// it changed since, the plan is stale.
type Victim struct {
	ID      int64
	Version int64
}

// ApplyPlan writes one placement; see ApplyPlacements.
func (s *DB) ApplyPlan(ctx context.Context, p Placement, now time.Time) (*suanli.Instance, error) {
	ins, err := s.ApplyPlacements(ctx, []Placement{p}, now)
	if err != nil {
		return nil, err
	}
	return ins[0], nil
}

// ApplyPlacements writes placements (one instance, or a fleet) in one
// transaction after re-checking each against the database: the machine is
// listed; the GPUs (or cores) are owned by nobody but the placement's
// victims; each victim is still an owning interruptible instance at the
// version the plan saw; and the renter's balance covers one hour of all of
// them on top of what runs. It creates the instances (pending, or
// scheduling while victims drain), their meters and first events, moves the
// victims to preempting (with an event, a preemption record and the
// machine's grace in the message), records winning bids in the price
// history, and bumps each machine's desired version. ECONFLICT when the
// snapshot was stale (the message says what is free), EPAYMENTREQUIRED with
// the numbers.
func (s *DB) ApplyPlacements(ctx context.Context, ps []Placement, now time.Time) ([]*suanli.Instance, error) {
	out := make([]*suanli.Instance, 0, len(ps))
	err := s.withTx(ctx, func(tx *Tx) error {
		out = out[:0]
		var need suanli.Money
		var burn, bal suanli.Money
		for i, p := range ps {
			in := p.Instance
			m, _, err := scanMachine(tx.queryRow(ctx, `SELECT `+machineCols+` FROM machines WHERE id = ?`, in.MachineID))
			if isNoRows(err) {
				return suanli.Errorf(suanli.ENOTFOUND, "offer %d not found", in.MachineID)
			} else if err != nil {
				return err
			}
			if !m.Listing.Listed {
				return suanli.Errorf(suanli.ECONFLICT, "offer %d is no longer listed: search again", m.ID)
			}
			if p.Bookings != nil {
				ids, err := tx.int64s(ctx, `SELECT id FROM bookings WHERE machine_id = ? AND `+liveBookings, m.ID)
				if err != nil {
					return err
				}
				for _, id := range ids {
					if !slices.Contains(p.Bookings, id) {
						return suanli.Errorf(suanli.ECONFLICT, "offer %d was booked ahead (booking %d) while planning: plan again", m.ID, id)
					}
				}
			}
			victims := make([]int64, 0, len(p.Preempt))
			for _, v := range p.Preempt {
				vin, err := tx.instance(ctx, v.ID)
				if err != nil {
					return err
				}
				if vin.Version != v.Version || vin.MachineID != m.ID || !vin.OwnsGPUs() || vin.RentalType != suanli.RentalInterruptible {
					return suanli.Errorf(suanli.ECONFLICT, "offer %d changed while planning (instance %d is now %s): plan again", m.ID, v.ID, vin.Status)
				}
				victims = append(victims, v.ID)
			}
			used, err := tx.gpusInUse(ctx, m.ID, victims...)
			if err != nil {
				return err
			}
			for _, g := range in.GPUIndexes {
				if slices.Contains(used, g) {
					free := len(m.Hardware.GPUs) - len(used)
					return suanli.Errorf(suanli.ECONFLICT, "offer %d has %d free GPUs, you asked for %d: rent %d or pick another offer",
						m.ID, free, len(in.GPUIndexes), free)
				}
			}
			cores, ram, err := tx.coresInUse(ctx, m.ID, victims...)
			if err != nil {
				return err
			}
			if !m.IsGPU() {
				if free := m.Hardware.CPUCores - cores; in.CPUCores > free {
					return suanli.Errorf(suanli.ECONFLICT, "offer %d has %d free CPU cores, you asked for %d", m.ID, free, in.CPUCores)
				}
				if free := m.Hardware.RAMMB - ram; p.RAMMB > free {
					return suanli.Errorf(suanli.ECONFLICT, "offer %d has %d MB of free RAM, you asked for %d", m.ID, free, p.RAMMB)
				}
			}
			if i == 0 || in.AccountID != ps[0].Instance.AccountID {
				if bal, err = tx.ledgerBalance(ctx, suanli.LedgerBalance(in.AccountID)); err != nil {
					return err
				}
				acc, err := tx.accountAccrual(ctx, in.AccountID, now)
				if err != nil {
					return err
				}
				// What running meters accrued since the last close is owed already.
				bal -= acc.Unsettled
				burn = acc.BurnRate
				need = 0
			}
			need += p.HourlyCost
			// A booking's launch was paid for up front, from escrow.
			if bal < burn+need && in.RentalType != suanli.RentalBooked {
				what := "this rental costs"
				if len(ps) > 1 {
					what = fmt.Sprintf("these %d rentals cost", len(ps))
				}
				if burn > 0 {
					return suanli.Errorf(suanli.EPAYMENTREQUIRED, "balance %s does not cover one hour: your running instances burn %s/h and %s %s/h; add credit or stop something first",
						bal, burn, what, need)
				}
				if len(ps) == 1 {
					return suanli.Errorf(suanli.EPAYMENTREQUIRED, "balance %s does not cover one hour of this rental (%s/h): add credit first", bal, need)
				}
				return suanli.Errorf(suanli.EPAYMENTREQUIRED, "balance %s does not cover one hour: %s %s/h; add credit first", bal, what, need)
			}
			if len(victims) > 0 {
				in.Status = suanli.StatusScheduling
				in.StatusMessage = fmt.Sprintf("waiting up to %d s for preempted instance %s to stop", m.Listing.PreemptGraceS, joinIDs(victims))
			}
			if err := tx.insertInstance(ctx, in, p.RAMMB, now); err != nil {
				return err
			}
			what := "an on-demand rental"
			switch in.RentalType {
			case suanli.RentalInterruptible:
				what = "a bid of " + in.Bid.String() + "/h"
				if err := tx.addPricePoint(ctx, now, in.GPUName, suanli.PriceBid, perUnit(in.Bid, in), m.ID); err != nil {
					return err
				}
			case suanli.RentalReserved:
				what = "a reserved rental"
			}
			for _, vid := range victims {
				if err := tx.preempt(ctx, vid, in.ID, what, m, now); err != nil {
					return err
				}
			}
			out = append(out, in)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}

// perUnit is a whole-instance price per GPU (or core) hour.
func perUnit(price suanli.Money, in *suanli.Instance) suanli.Money {
	n := in.GPUCount
	if n == 0 {
		n = in.CPUCores
	}
	return price / suanli.Money(max(n, 1))
}

// insertInstance creates an instance row, its meters and its first event,
// and wakes the machine's agent.
func (tx *Tx) insertInstance(ctx context.Context, in *suanli.Instance, ramMB int64, now time.Time) error {
	in.CreatedAt, in.UpdatedAt, in.Version = now, now, 1
	id, err := tx.insert(ctx, `INSERT INTO instances (account_id, machine_id, host_id, label, image, cmd, env, disk_gb, gpu_name, gpu_count,
		gpu_indexes, cpu_cores, ram_mb, rental_type, bid, rates, simulated, status, status_message, desired, created_at, updated_at, version,
		project, tags, guards, restart, ports, template, volumes, secrets, secret_meta, allowed_countries, request_key)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		in.AccountID, in.MachineID, in.HostID, in.Label, in.Image, jsonText(in.Cmd), jsonText(in.Env), in.DiskGB, in.GPUName, in.GPUCount,
		jsonText(orEmptyInts(in.GPUIndexes)), in.CPUCores, ramMB, in.RentalType, int64(in.Bid), jsonText(in.Rates), in.Simulated, in.Status,
		in.StatusMessage, in.Desired, us(now), us(now), in.Version, in.Project, jsonText(orEmpty(in.Tags)), jsonText(in.Guards),
		jsonText(in.Restart), jsonText(orEmptyInts(in.Ports)), in.Template, jsonText(orEmptyMounts(in.Volumes)), in.Sealed, metaOf(in),
		strings.Join(in.Allowed, ","), in.RequestKey)
	if err != nil {
		return err
	}
	in.ID = id
	in.RAMGB = float64(ramMB) / 1024
	nowUS := us(now)
	fee := in.Rates.FeeBasisPoints
	for _, m := range []*meter{
		{Kind: suanli.MeterCompute, Rate: in.Rates.ComputePerHour, PeriodUS: suanli.MicrosPerHour},
		{Kind: suanli.MeterStorage, Rate: in.Rates.StoragePerMonth * suanli.Money(in.DiskGB), PeriodUS: suanli.MicrosPerMonth, Active: true},
		{Kind: suanli.MeterInetUp, Rate: in.Rates.InetUpPerGB, PeriodUS: 1_000_000_000},
		{Kind: suanli.MeterInetDown, Rate: in.Rates.InetDownPerGB, PeriodUS: 1_000_000_000},
	} {
		m.InstanceID, m.AccountID, m.HostID, m.FeeBP, m.Since = id, in.AccountID, in.HostID, fee, nowUS
		if err := tx.createMeter(ctx, m); err != nil {
			return err
		}
	}
	msg := "created on machine " + fmt.Sprint(in.MachineID)
	if in.StatusMessage != "" {
		msg += ": " + in.StatusMessage
	}
	if err := tx.addEvent(ctx, id, now, in.Status, msg); err != nil {
		return err
	}
	return tx.bumpDesired(ctx, in.MachineID)
}

// preempt moves an owning instance to preempting: its agent gets desired
// stopped with the machine's grace (SIGTERM, then SIGKILL after it). by is
// the instance it lost to (0 for a rebalance), what describes that claim.
func (tx *Tx) preempt(ctx context.Context, id, by int64, what string, m *suanli.Machine, now time.Time) error {
	old, err := tx.instance(ctx, id)
	if err != nil {
		return err
	}
	in := *old
	in.Status, in.PreemptedBy = suanli.StatusPreempting, by
	who := what
	if by != 0 {
		who = fmt.Sprintf("instance %d (%s)", by, what)
	}
	in.StatusMessage = fmt.Sprintf("preempted by %s: SIGTERM now, stopped within %d s; the disk stays and it resumes by itself when it wins GPUs again",
		who, m.Listing.PreemptGraceS)
	if _, err := tx.writeInstance(ctx, old, &in, now, now); err != nil {
		return err
	}
	_, err = tx.exec(ctx, `INSERT INTO preemptions (machine_id, instance_id, by_instance_id, gpu_name, at) VALUES (?, ?, ?, ?, ?)`,
		m.ID, id, by, old.GPUName, us(now))
	return err
}

// Resume gives a waiting instance (preempted, or queued to start) GPUs it
// won, at the version the decision saw.
type Resume struct {
	ID         int64
	Version    int64
	GPUIndexes []int
}

// ApplyRebalance writes a machine's arbitration in one transaction: victims
// go preempting (as in ApplyPlacements), waiting instances that won go
// pending on the GPUs given (their agent starts them once no preempted
// workload occupies those GPUs), winning bids are recorded. Every instance
// is re-checked at the version the decision saw and every GPU given must be
// owned by nobody but the victims: ECONFLICT when stale.
func (s *DB) ApplyRebalance(ctx context.Context, machineID int64, preempt []Victim, resume []Resume, now time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error {
		m, _, err := scanMachine(tx.queryRow(ctx, `SELECT `+machineCols+` FROM machines WHERE id = ?`, machineID))
		if isNoRows(err) {
			return notFound("machine", machineID)
		} else if err != nil {
			return err
		}
		victims := make([]int64, 0, len(preempt))
		for _, v := range preempt {
			vin, err := tx.instance(ctx, v.ID)
			if err != nil {
				return err
			}
			if vin.Version != v.Version || vin.MachineID != m.ID || !vin.OwnsGPUs() || vin.RentalType != suanli.RentalInterruptible {
				return suanli.Errorf(suanli.ECONFLICT, "machine %d changed while arbitrating (instance %d is now %s)", m.ID, v.ID, vin.Status)
			}
			victims = append(victims, v.ID)
		}
		used, err := tx.gpusInUse(ctx, m.ID, victims...)
		if err != nil {
			return err
		}
		var by int64
		what := "a higher claim"
		for _, r := range resume {
			old, err := tx.instance(ctx, r.ID)
			if err != nil {
				return err
			}
			if old.Version != r.Version || old.MachineID != m.ID || !old.Waiting() {
				return suanli.Errorf(suanli.ECONFLICT, "machine %d changed while arbitrating (instance %d is now %s)", m.ID, r.ID, old.Status)
			}
			for _, g := range r.GPUIndexes {
				if slices.Contains(used, g) {
					return suanli.Errorf(suanli.ECONFLICT, "machine %d changed while arbitrating (GPU %d is taken)", m.ID, g)
				}
			}
			used = append(used, r.GPUIndexes...)
			in := *old
			in.GPUIndexes = slices.Clone(r.GPUIndexes)
			if in.GPUIndexes == nil {
				in.GPUIndexes = []int{}
			}
			in.WaitingSince = nil
			if old.Status == suanli.StatusPreempted {
				in.Status, in.StatusMessage = suanli.StatusPending, "resuming: it won GPUs again"
			} else {
				in.Status, in.StatusMessage = suanli.StatusPending, "starting: its queued start won GPUs"
			}
			if _, err := tx.writeInstance(ctx, old, &in, now, now); err != nil {
				return err
			}
			if in.RentalType == suanli.RentalInterruptible {
				if err := tx.addPricePoint(ctx, now, in.GPUName, suanli.PriceBid, perUnit(in.Bid, &in), m.ID); err != nil {
					return err
				}
			}
			if by == 0 {
				by = in.ID
				what = in.RentalType
			}
		}
		for _, vid := range victims {
			if err := tx.preempt(ctx, vid, by, what, m, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// accountAccrual is what an account's active meters cost per hour now, and
// what they accrued since their last settlement (inline or by a close) up
// to now.
func (tx *Tx) accountAccrual(ctx context.Context, accountID int64, now time.Time) (Accrual, error) {
	var a Accrual
	st, err := tx.readBillState(ctx)
	if err != nil {
		return a, err
	}
	// "active <> FALSE": the index on account_id beats the one on active.
	ms, err := tx.loadMeters(ctx, st, `m.account_id = ? AND m.active <> ?`, accountID, false)
	if err != nil {
		return a, err
	}
	for _, m := range ms {
		p, b := m.pending(us(now), st)
		a.Unsettled += p
		a.BurnRate += b
	}
	return a, nil
}

// AccountBurn is what an account's active meters cost per hour now.
func (s *DB) AccountBurn(ctx context.Context, accountID int64) (suanli.Money, error) {
	a, err := s.AccountAccrual(ctx, accountID, time.Time{})
	return a.BurnRate, err
}

// AccountAccrual is what an account's active meters burn per hour, and
// what they accrued up to now that the ledger does not hold yet (the next
// close settles it).
func (s *DB) AccountAccrual(ctx context.Context, accountID int64, now time.Time) (Accrual, error) {
	var a Accrual
	err := s.read(ctx, func(tx *Tx) error {
		var err error
		a, err = tx.accountAccrual(ctx, accountID, now)
		return err
	})
	return a, err
}

// AddInstanceEvent records a note in an instance's history (a workload's
// progress report) without changing its status.
func (s *DB) AddInstanceEvent(ctx context.Context, id int64, at time.Time, status, msg string) error {
	return s.withTx(ctx, func(tx *Tx) error { return tx.addEvent(ctx, id, at, status, msg) })
}

func (tx *Tx) addEvent(ctx context.Context, instanceID int64, at time.Time, status, msg string) error {
	_, err := tx.exec(ctx, `INSERT INTO instance_events (instance_id, at, status, message) VALUES (?, ?, ?, ?)`, instanceID, us(at), status, msg)
	return err
}

// computeBilled reports whether compute is billed in a status (DESIGN §4).
func computeBilled(status string) bool {
	return status == suanli.StatusRunning || status == suanli.StatusPreempting
}

// UpdateInstance changes an instance in one transaction: fn edits a copy
// (status, message, desired state, exit code, GPUs, wait); the meters follow
// the status change as of at (compute runs while running or preempting,
// storage until destroyed), an event is recorded, and the agent is woken
// when anything it sees changed.
// fn's error aborts without change. ENOTFOUND.
func (s *DB) UpdateInstance(ctx context.Context, id int64, at, now time.Time, fn func(i *suanli.Instance) error) (*suanli.Instance, error) {
	var out *suanli.Instance
	err := s.withTx(ctx, func(tx *Tx) error {
		old, err := tx.instance(ctx, id)
		if err != nil {
			return err
		}
		in := *old
		if err := fn(&in); err != nil {
			return err
		}
		out, err = tx.writeInstance(ctx, old, &in, at, now)
		return err
	})
	return out, err
}

// instance reads one instance row (no cost). ENOTFOUND.
func (tx *Tx) instance(ctx context.Context, id int64) (*suanli.Instance, error) {
	in, err := scanInstance(tx.queryRow(ctx, `SELECT `+instanceCols+` FROM instances WHERE id = ?`, id))
	if isNoRows(err) {
		return nil, notFound("instance", id)
	}
	return in, err
}

// sameInstance reports whether writeInstance would store nothing new.
func sameInstance(a, b *suanli.Instance) bool {
	return a.Status == b.Status && a.Desired == b.Desired && a.StatusMessage == b.StatusMessage && equalExit(a.ExitCode, b.ExitCode) &&
		slices.Equal(a.GPUIndexes, b.GPUIndexes) && equalTime(a.WaitingSince, b.WaitingSince) && equalTime(a.ReservedUntil, b.ReservedUntil) &&
		a.PreemptedBy == b.PreemptedBy && a.RentalType == b.RentalType && a.Bid == b.Bid && a.Rates == b.Rates &&
		a.Label == b.Label && a.Project == b.Project && jsonText(a.Tags) == jsonText(b.Tags) && jsonText(a.Guards) == jsonText(b.Guards) &&
		a.Restarts == b.Restarts && a.RestartPending == b.RestartPending && jsonText(a.Restart) == jsonText(b.Restart) &&
		jsonText(a.PortMap) == jsonText(b.PortMap)
}

func equalTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// writeInstance stores in, an edited copy of old, as of at: on a status
// change the meters follow and an event is recorded; the machine's desired
// version is bumped when anything its agent sees may have changed. It
// returns what was stored.
func (tx *Tx) writeInstance(ctx context.Context, old, in *suanli.Instance, at, now time.Time) (*suanli.Instance, error) {
	if sameInstance(old, in) {
		return old, nil
	}
	if in.Status != old.Status {
		if in.Status == suanli.StatusRunning && !computeBilled(old.Status) {
			t := at
			in.StartedAt, in.StoppedAt = &t, nil
		}
		if !computeBilled(in.Status) && in.Status != suanli.StatusStopping && in.StoppedAt == nil && in.StartedAt != nil {
			t := at
			in.StoppedAt = &t
		}
		if in.Status == suanli.StatusDestroyed {
			t := at
			in.DestroyedAt = &t
			// The disk's key dies with the instance: what the agent then
			// deletes is ciphertext nobody can read.
			if err := tx.deleteDiskKey(ctx, suanli.ReleaseInstance, in.ID); err != nil {
				return nil, err
			}
		}
		ms, err := tx.instanceMeters(ctx, in.ID)
		if err != nil {
			return nil, err
		}
		atUS := us(at)
		if m := ms[suanli.MeterCompute]; m != nil {
			if err := tx.setActive(ctx, m, computeBilled(in.Status), atUS, now); err != nil {
				return nil, err
			}
		}
		if m := ms[suanli.MeterStorage]; m != nil {
			if err := tx.setActive(ctx, m, in.Status != suanli.StatusDestroyed, atUS, now); err != nil {
				return nil, err
			}
		}
		if err := tx.addEvent(ctx, in.ID, at, in.Status, in.StatusMessage); err != nil {
			return nil, err
		}
	}
	in.UpdatedAt = now
	in.Version = old.Version + 1
	var exit any
	if in.ExitCode != nil {
		exit = *in.ExitCode
	}
	if _, err := tx.exec(ctx, `UPDATE instances SET status = ?, status_message = ?, desired = ?, exit_code = ?, started_at = ?,
		destroyed_at = ?, updated_at = ?, version = ?, label = ?, project = ?, tags = ?, guards = ?, stopped_at = ?, restart = ?,
		restarts = ?, restart_pending = ?, port_map = ?, gpu_indexes = ?, waiting_since = ?, reserved_until = ?, preempted_by = ?,
		rental_type = ?, bid = ?, rates = ? WHERE id = ?`,
		in.Status, in.StatusMessage, in.Desired, exit, usPtr(in.StartedAt), usPtr(in.DestroyedAt), us(now), in.Version,
		in.Label, in.Project, jsonText(orEmpty(in.Tags)), jsonText(in.Guards), usPtr(in.StoppedAt), jsonText(in.Restart),
		in.Restarts, in.RestartPending, jsonText(orEmptyPorts(in.PortMap)), jsonText(orEmptyInts(in.GPUIndexes)), usPtr(in.WaitingSince),
		usPtr(in.ReservedUntil), in.PreemptedBy, in.RentalType, int64(in.Bid), jsonText(in.Rates), in.ID); err != nil {
		return nil, err
	}
	if in.Desired != old.Desired || in.Status != old.Status || !slices.Equal(in.GPUIndexes, old.GPUIndexes) {
		if err := tx.bumpDesired(ctx, in.MachineID); err != nil {
			return nil, err
		}
	}
	return in, nil
}

func orEmptyMounts(v []suanli.VolumeMount) []suanli.VolumeMount {
	if v == nil {
		return []suanli.VolumeMount{}
	}
	return v
}

func orEmptyInts(v []int) []int {
	if v == nil {
		return []int{}
	}
	return v
}

func orEmptyPorts(m map[int]int) map[int]int {
	if m == nil {
		return map[int]int{}
	}
	return m
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func equalExit(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// FindInstanceByID returns an instance with its cost so far as of now. ENOTFOUND.
func (s *DB) FindInstanceByID(ctx context.Context, id int64, now time.Time) (*suanli.Instance, error) {
	is, _, err := s.FindInstances(ctx, suanli.InstanceFilter{ID: &id}, now)
	if err != nil {
		return nil, err
	} else if len(is) == 0 {
		return nil, notFound("instance", id)
	}
	return is[0], nil
}

// FindInstances lists instances by filter, newest first, with the total
// count; each has CostSoFar (settled plus accrued as of now) and BurnRate.
func (s *DB) FindInstances(ctx context.Context, f suanli.InstanceFilter, now time.Time) ([]*suanli.Instance, int, error) {
	var where []string
	var args []any
	add := func(cond string, v any) { where, args = append(where, cond), append(args, v) }
	if f.ID != nil {
		add("id = ?", *f.ID)
	}
	if f.AccountID != nil {
		add("account_id = ?", *f.AccountID)
	}
	if f.MachineID != nil {
		add("machine_id = ?", *f.MachineID)
	}
	if f.HostID != nil {
		add("host_id = ?", *f.HostID)
	}
	if f.Live != nil {
		if *f.Live {
			add("status <> ?", suanli.StatusDestroyed)
		} else {
			add("status = ?", suanli.StatusDestroyed)
		}
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	var out []*suanli.Instance
	var total int
	err := s.read(ctx, func(tx *Tx) error {
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM instances`+cond, args...).Scan(&total); err != nil {
			return err
		}
		limit := f.Limit
		if limit <= 0 {
			limit = 1000
		}
		rows, err := tx.query(ctx, `SELECT `+instanceCols+` FROM instances`+cond+fmt.Sprintf(` ORDER BY id DESC LIMIT %d OFFSET %d`, limit, max(f.Offset, 0)), args...)
		if err != nil {
			return err
		}
		if out, err = collect(rows, scanInstance); err != nil {
			return err
		}
		for _, in := range out {
			if err := tx.fillCost(ctx, in, now); err != nil {
				return err
			}
		}
		return nil
	})
	return out, total, err
}

// fillCost sets an instance's cost so far (settled, by the ledger and hour
// closes, plus accrued since) and burn rate as of now.
func (tx *Tx) fillCost(ctx context.Context, in *suanli.Instance, now time.Time) error {
	st, err := tx.readBillState(ctx)
	if err != nil {
		return err
	}
	ms, err := tx.instanceMeters(ctx, in.ID)
	if err != nil {
		return err
	}
	settled, err := tx.instanceSettled(ctx, in.ID, ms, st)
	if err != nil {
		return err
	}
	in.CostSoFar, in.BurnRate = settled, 0
	for _, m := range ms {
		p, b := m.pending(us(now), st)
		in.CostSoFar += p
		in.BurnRate += b
	}
	return nil
}

// InstanceEvent is one status change in an instance's story.
type InstanceEvent struct {
	At      time.Time `json:"at"`
	Status  string    `json:"status"`
	Message string    `json:"message,omitempty"`
}

// InstanceEvents returns an instance's status changes, oldest first.
func (s *DB) InstanceEvents(ctx context.Context, id int64) ([]InstanceEvent, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT at, status, message FROM instance_events WHERE instance_id = ? ORDER BY id`), id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []InstanceEvent
	for rows.Next() {
		var e InstanceEvent
		var at int64
		if err := rows.Scan(&at, &e.Status, &e.Message); err != nil {
			return nil, err
		}
		e.At = fromUS(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// FindInstancesByRequestKey returns an account's instances created by the
// request with idempotency key key, oldest first (none for "").
func (s *DB) FindInstancesByRequestKey(ctx context.Context, accountID int64, key string, now time.Time) ([]*suanli.Instance, error) {
	if key == "" {
		return nil, nil
	}
	var ids []int64
	err := s.read(ctx, func(tx *Tx) error {
		var err error
		ids, err = tx.int64s(ctx, `SELECT id FROM instances WHERE account_id = ? AND request_key = ? ORDER BY id`, accountID, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]*suanli.Instance, 0, len(ids))
	for _, id := range ids {
		in, err := s.FindInstanceByID(ctx, id, now)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}
