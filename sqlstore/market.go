package sqlstore

import (
	"context"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// addPricePoint records one price per GPU-hour (or core-hour) in the price
// history. Points without a GPU model (CPU-only machines) are not kept.
func (tx *Tx) addPricePoint(ctx context.Context, at time.Time, gpuName, kind string, price suanli.Money, machineID int64) error {
	if gpuName == "" {
		return nil
	}
	_, err := tx.exec(ctx, `INSERT INTO price_points (at, gpu_name, kind, price, machine_id) VALUES (?, ?, ?, ?, ?)`,
		us(at), gpuName, kind, int64(price), machineID)
	return err
}

// Snapshot reads machines by id and their live instances in one consistent
// read (no costs filled): what the scheduler plans from. Unknown ids are
// left out.
func (s *DB) Snapshot(ctx context.Context, ids []int64) ([]*suanli.Machine, []*suanli.Instance, error) {
	if len(ids) == 0 {
		return nil, nil, nil
	}
	var ms []*suanli.Machine
	var ins []*suanli.Instance
	err := s.read(ctx, func(tx *Tx) error {
		ms, ins = ms[:0], ins[:0]
		for start := 0; start < len(ids); start += 500 {
			chunk := ids[start:min(start+500, len(ids))]
			in, args := inList(chunk)
			rows, err := tx.query(ctx, `SELECT `+machineCols+` FROM machines WHERE id IN (`+in+`) ORDER BY id`, args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				m, _, err := scanMachine(rows)
				if err != nil {
					rows.Close()
					return err
				}
				ms = append(ms, m)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			rows, err = tx.query(ctx, `SELECT `+instanceCols+` FROM instances WHERE machine_id IN (`+in+`) AND status <> ? ORDER BY id`,
				append(args, suanli.StatusDestroyed)...)
			if err != nil {
				return err
			}
			more, err := collect(rows, scanInstance)
			if err != nil {
				return err
			}
			ins = append(ins, more...)
		}
		return nil
	})
	return ms, ins, err
}

func inList(ids []int64) (string, []any) {
	var b strings.Builder
	args := make([]any, len(ids))
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('?')
		args[i] = id
	}
	return b.String(), args
}

// ChangeRate changes an instance's compute rate (a new bid, a reservation
// starting or ending) in one transaction: the compute meter is settled up to
// at at the old rate, then fn edits a copy of the instance (Rates, Bid,
// RentalType, ReservedUntil …) and the meter takes the new
// Rates.ComputePerHour from at on. fn's error aborts without change.
// ENOTFOUND.
func (s *DB) ChangeRate(ctx context.Context, id int64, at, now time.Time, fn func(in *suanli.Instance) error) (*suanli.Instance, error) {
	var out *suanli.Instance
	err := s.withTx(ctx, func(tx *Tx) error {
		var err error
		out, err = tx.changeRate(ctx, id, at, now, fn)
		return err
	})
	return out, err
}

func (tx *Tx) changeRate(ctx context.Context, id int64, at, now time.Time, fn func(in *suanli.Instance) error) (*suanli.Instance, error) {
	old, err := tx.instance(ctx, id)
	if err != nil {
		return nil, err
	}
	in := *old
	if err := fn(&in); err != nil {
		return nil, err
	}
	ms, err := tx.instanceMeters(ctx, id)
	if err != nil {
		return nil, err
	}
	if m := ms[suanli.MeterCompute]; m != nil && m.Rate != in.Rates.ComputePerHour {
		if err := tx.setRate(ctx, m, in.Rates.ComputePerHour, us(at), now); err != nil {
			return nil, err
		}
	}
	return tx.writeInstance(ctx, old, &in, at, now)
}

// RecordMarketSample stores one sampling of the market: listed prices and
// fill per GPU model.
func (s *DB) RecordMarketSample(ctx context.Context, points []suanli.PricePoint, fills []suanli.FillSample) error {
	return s.withTx(ctx, func(tx *Tx) error {
		for _, p := range points {
			if err := tx.addPricePoint(ctx, p.At, p.GPUName, p.Kind, p.Price, p.MachineID); err != nil {
				return err
			}
		}
		for _, f := range fills {
			if _, err := tx.exec(ctx, `INSERT INTO fill_samples (at, gpu_name, gpus_listed, gpus_rented) VALUES (?, ?, ?, ?)`,
				us(f.At), f.GPUName, f.Listed, f.Rented); err != nil {
				return err
			}
		}
		return nil
	})
}

// PriceHistory returns the price points, fill samples and preemption times
// of GPU models (case-insensitive names) in [since, until), oldest first.
func (s *DB) PriceHistory(ctx context.Context, gpuNames []string, since, until time.Time) ([]suanli.PricePoint, []suanli.FillSample, []time.Time, error) {
	var points []suanli.PricePoint
	var fills []suanli.FillSample
	var preempts []time.Time
	if len(gpuNames) == 0 {
		return nil, nil, nil, nil
	}
	lower := make([]any, len(gpuNames))
	marks := make([]string, len(gpuNames))
	for i, n := range gpuNames {
		lower[i], marks[i] = strings.ToLower(n), "?"
	}
	in := strings.Join(marks, ", ")
	window := append(lower, us(since), us(until))
	err := s.read(ctx, func(tx *Tx) error {
		rows, err := tx.query(ctx, `SELECT at, gpu_name, kind, price, machine_id FROM price_points WHERE LOWER(gpu_name) IN (`+in+`) AND at >= ? AND at < ? ORDER BY at, id`, window...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var p suanli.PricePoint
			var at, price int64
			if err := rows.Scan(&at, &p.GPUName, &p.Kind, &price, &p.MachineID); err != nil {
				rows.Close()
				return err
			}
			p.At, p.Price = fromUS(at), suanli.Money(price)
			points = append(points, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.query(ctx, `SELECT at, gpu_name, gpus_listed, gpus_rented FROM fill_samples WHERE LOWER(gpu_name) IN (`+in+`) AND at >= ? AND at < ? ORDER BY at, id`, window...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var f suanli.FillSample
			var at int64
			if err := rows.Scan(&at, &f.GPUName, &f.Listed, &f.Rented); err != nil {
				rows.Close()
				return err
			}
			f.At = fromUS(at)
			fills = append(fills, f)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.query(ctx, `SELECT at FROM preemptions WHERE LOWER(gpu_name) IN (`+in+`) AND at >= ? AND at < ? ORDER BY at`, window...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var at int64
			if err := rows.Scan(&at); err != nil {
				return err
			}
			preempts = append(preempts, fromUS(at))
		}
		return rows.Err()
	})
	return points, fills, preempts, err
}

// InterruptionRate is the share of a machine's interruptible rentals alive
// since since that were preempted at least once since then (0 when it had
// none).
func (s *DB) InterruptionRate(ctx context.Context, machineID int64, since time.Time) (float64, error) {
	var rentals, preempted int
	err := s.read(ctx, func(tx *Tx) error {
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM instances WHERE machine_id = ? AND rental_type = ? AND (destroyed_at IS NULL OR destroyed_at >= ?)`,
			machineID, suanli.RentalInterruptible, us(since)).Scan(&rentals); err != nil {
			return err
		}
		return tx.queryRow(ctx, `SELECT COUNT(DISTINCT instance_id) FROM preemptions WHERE machine_id = ? AND at >= ?`, machineID, us(since)).Scan(&preempted)
	})
	if err != nil || rentals == 0 {
		return 0, err
	}
	return min(1, float64(preempted)/float64(rentals)), nil
}
