package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/suanli/suanli"
)

// CreateVolume stores a volume and starts its storage meter, in one
// transaction. ECONFLICT when the account already has a live volume of
// that name, or the machine lacks the disk.
func (s *DB) CreateVolume(ctx context.Context, v *suanli.Volume, hostID, feeBP int64, now time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error {
		var n int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM volumes WHERE account_id = ? AND name = ? AND status <> ?`,
			v.AccountID, v.Name, suanli.VolumeDeleted).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return suanli.Errorf(suanli.ECONFLICT, "you already have a volume named %q: pick another name or delete it", v.Name)
		}
		v.Status, v.CreatedAt = suanli.VolumeReady, now
		tags := "{}"
		if len(v.Tags) > 0 {
			tags = jsonText(v.Tags)
		}
		id, err := tx.insert(ctx, `INSERT INTO volumes (account_id, machine_id, host_id, name, size_gb, rate, status, project, tags, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, v.AccountID, v.MachineID, hostID, v.Name, v.SizeGB, int64(v.Rate), v.Status, v.Project, tags, us(now))
		if err != nil {
			return err
		}
		v.ID = id
		m := &meter{InstanceID: -id, AccountID: v.AccountID, HostID: hostID, Kind: suanli.MeterVolume,
			Rate: v.Rate * suanli.Money(v.SizeGB), PeriodUS: suanli.MicrosPerMonth, FeeBP: feeBP, Active: true, Since: us(now)}
		if err := tx.createMeter(ctx, m); err != nil {
			return err
		}
		return tx.bumpDesired(ctx, v.MachineID)
	})
}

const volumeCols = `id, account_id, machine_id, name, size_gb, rate, status, project, tags, created_at, deleted_at`

func scanVolume(r scanner) (*suanli.Volume, error) {
	var v suanli.Volume
	var rate, created int64
	var tags string
	var deleted sql.NullInt64
	if err := r.Scan(&v.ID, &v.AccountID, &v.MachineID, &v.Name, &v.SizeGB, &rate, &v.Status, &v.Project, &tags, &created, &deleted); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(tags), &v.Tags); err != nil {
		return nil, fmt.Errorf("volume %d tags: %w", v.ID, err)
	}
	v.Rate, v.CreatedAt, v.DeletedAt = suanli.Money(rate), fromUS(created), fromUSPtr(deleted)
	return &v, nil
}

// FindVolumes lists volumes of an account (accountID 0: any) or a machine
// (machineID 0: any), live ones unless all, with cost so far as of now.
func (s *DB) FindVolumes(ctx context.Context, accountID, machineID int64, all bool, now time.Time) ([]*suanli.Volume, error) {
	q := `SELECT ` + volumeCols + ` FROM volumes WHERE 1 = 1`
	var args []any
	if accountID != 0 {
		q, args = q+` AND account_id = ?`, append(args, accountID)
	}
	if machineID != 0 {
		q, args = q+` AND machine_id = ?`, append(args, machineID)
	}
	if !all {
		q, args = q+` AND status <> ?`, append(args, suanli.VolumeDeleted)
	}
	var out []*suanli.Volume
	err := s.read(ctx, func(tx *Tx) error {
		rows, err := tx.query(ctx, q+` ORDER BY id`, args...)
		if err != nil {
			return err
		}
		if out, err = collect(rows, scanVolume); err != nil {
			return err
		}
		st, err := tx.readBillState(ctx)
		if err != nil {
			return err
		}
		for _, v := range out {
			// A volume's meter is filed under instance -id: settled (ledger
			// rows and hour closes) plus accrued since.
			ms, err := tx.instanceMeters(ctx, -v.ID)
			if err != nil {
				return err
			}
			if v.CostSoFar, err = tx.instanceSettled(ctx, -v.ID, ms, st); err != nil {
				return err
			}
			for _, m := range ms {
				p, _ := m.pending(us(now), st)
				v.CostSoFar += p
			}
			if err := tx.queryRow(ctx, `SELECT COALESCE(MAX(id), 0) FROM instances WHERE machine_id = ? AND status <> ? AND volumes LIKE ?`,
				v.MachineID, suanli.StatusDestroyed, fmt.Sprintf(`%%"id":%d}%%`, v.ID)).Scan(&v.AttachedTo); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// DeleteVolume ends a volume: its meter settles and stops, it is marked
// deleted (the agent then wipes it), in one transaction. ECONFLICT while a
// live instance uses it.
func (s *DB) DeleteVolume(ctx context.Context, id int64, now time.Time) (*suanli.Volume, error) {
	var out *suanli.Volume
	err := s.withTx(ctx, func(tx *Tx) error {
		v, err := scanVolume(tx.queryRow(ctx, `SELECT `+volumeCols+` FROM volumes WHERE id = ?`, id))
		if isNoRows(err) {
			return notFound("volume", id)
		} else if err != nil {
			return err
		}
		if v.Status == suanli.VolumeDeleted {
			out = v
			return nil
		}
		var inUse int64
		if err := tx.queryRow(ctx, `SELECT COALESCE(MAX(id), 0) FROM instances WHERE machine_id = ? AND status <> ? AND volumes LIKE ?`,
			v.MachineID, suanli.StatusDestroyed, fmt.Sprintf(`%%"id":%d}%%`, v.ID)).Scan(&inUse); err != nil {
			return err
		}
		if inUse != 0 {
			return suanli.Errorf(suanli.ECONFLICT, "volume %q is attached to instance %d: destroy the instance first", v.Name, inUse)
		}
		ms, err := tx.instanceMeters(ctx, -v.ID)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if err := tx.setActive(ctx, m, false, us(now), now); err != nil {
				return err
			}
		}
		if _, err := tx.exec(ctx, `UPDATE volumes SET status = ?, deleted_at = ? WHERE id = ?`, suanli.VolumeDeleted, us(now), id); err != nil {
			return err
		}
		if err := tx.deleteDiskKey(ctx, suanli.ReleaseVolume, id); err != nil {
			return err
		}
		v.Status, v.DeletedAt = suanli.VolumeDeleted, &now
		out = v
		return tx.bumpDesired(ctx, v.MachineID)
	})
	return out, err
}
