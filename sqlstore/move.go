package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/suanli/suanli"
)

// Move is a plan to relaunch an instance on another machine (a managed job
// whose host was lost, or that was preempted).
type Move struct {
	InstanceID int64
	MachineID  int64 // the new machine
	HostID     int64
	GPUIndexes []int
	CPUCores   int
	RAMMB      int64
	Rates      suanli.Rates
	Reason     string // why it moves, for its history
}

// MoveInstance relaunches an instance on another machine in one
// transaction: it settles the old meters as of at (what ran on the old host
// is billed at the old rates), re-checks the new machine's GPUs, points the
// instance and its meters at the new host with the new rates, adds the old
// machine to the instance's avoid list, and wakes both agents. The old
// agent, if it ever comes back, no longer sees the instance and removes it,
// so exactly one copy runs. ECONFLICT when the GPUs were taken meanwhile.
func (s *DB) MoveInstance(ctx context.Context, mv Move, at, now time.Time) (*suanli.Instance, error) {
	var out *suanli.Instance
	err := s.withTx(ctx, func(tx *Tx) error {
		in, err := scanInstance(tx.queryRow(ctx, `SELECT `+instanceCols+` FROM instances WHERE id = ?`, mv.InstanceID))
		if isNoRows(err) {
			return notFound("instance", mv.InstanceID)
		} else if err != nil {
			return err
		}
		if in.Status == suanli.StatusDestroyed {
			return suanli.Errorf(suanli.ECONFLICT, "instance %d is destroyed", in.ID)
		}
		used, err := tx.gpusInUse(ctx, mv.MachineID, in.ID)
		if err != nil {
			return err
		}
		for _, g := range mv.GPUIndexes {
			if slices.Contains(used, g) {
				return suanli.Errorf(suanli.ECONFLICT, "machine %d: GPU %d was taken meanwhile", mv.MachineID, g)
			}
		}
		ms, err := tx.instanceMeters(ctx, in.ID)
		if err != nil {
			return err
		}
		atUS, nowUS := us(at), us(now)
		for _, kind := range []string{suanli.MeterCompute, suanli.MeterStorage, suanli.MeterInetUp, suanli.MeterInetDown} {
			m := ms[kind] // in a fixed order: the ledger rows it writes do not depend on map order
			if m == nil {
				continue
			}
			if err := tx.setActive(ctx, m, false, atUS, now); err != nil {
				return err
			}
			switch m.Kind {
			case suanli.MeterCompute:
				m.Rate = mv.Rates.ComputePerHour
			case suanli.MeterStorage:
				m.Rate = mv.Rates.StoragePerMonth * suanli.Money(in.DiskGB)
			case suanli.MeterInetUp:
				m.Rate = mv.Rates.InetUpPerGB
			case suanli.MeterInetDown:
				m.Rate = mv.Rates.InetDownPerGB
			}
			active := m.Kind == suanli.MeterStorage // the new disk exists from now
			if _, err := tx.exec(ctx, `UPDATE meters SET rate = ?, host_id = ?, fee_bp = ?, active = ?, since = ? WHERE id = ?`,
				int64(m.Rate), mv.HostID, mv.Rates.FeeBasisPoints, active, max(nowUS, m.Since), m.ID); err != nil {
				return err
			}
		}
		oldMachine := in.MachineID
		avoid := append(in.AvoidMachines, oldMachine)
		msg := fmt.Sprintf("relaunching on machine %d: %s", mv.MachineID, mv.Reason)
		if _, err := tx.exec(ctx, `UPDATE instances SET machine_id = ?, host_id = ?, gpu_indexes = ?, cpu_cores = ?, ram_mb = ?, rates = ?,
			status = ?, status_message = ?, desired = ?, exit_code = NULL, moves = moves + 1, avoid_machines = ?, updated_at = ?,
			version = version + 1, stopped_at = ?, waiting_since = NULL WHERE id = ?`, mv.MachineID, mv.HostID, jsonText(mv.GPUIndexes), mv.CPUCores, mv.RAMMB,
			jsonText(mv.Rates), suanli.StatusPending, msg, suanli.DesiredRunning, jsonText(avoid), nowUS, atUS, in.ID); err != nil {
			return err
		}
		if err := tx.addEvent(ctx, in.ID, now, suanli.StatusPending, msg); err != nil {
			return err
		}
		// The new host starts a fresh disk under a fresh key: the old host's
		// copy becomes unreadable now, not when the instance is destroyed.
		if err := tx.deleteDiskKey(ctx, suanli.ReleaseInstance, in.ID); err != nil {
			return err
		}
		for _, m := range []int64{oldMachine, mv.MachineID} {
			if err := tx.bumpDesired(ctx, m); err != nil {
				return err
			}
		}
		out, err = scanInstance(tx.queryRow(ctx, `SELECT `+instanceCols+` FROM instances WHERE id = ?`, in.ID))
		return err
	})
	return out, err
}
