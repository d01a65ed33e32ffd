package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/suanli/suanli"
)

// A meter accrues one kind of charge for one instance: rate per period while
// active, settled into the ledger with the remainder carried (DESIGN §4).
// Compute is active while the instance runs; storage from creation to
// destroy; traffic meters are never "active" but accrue per byte reported.
type meter struct {
	ID, InstanceID, AccountID, HostID int64
	Kind                              string
	Rate                              suanli.Money
	PeriodUS, FeeBP                   int64
	Active                            bool
	Since                             int64 // settled up to here (µs), meaningful while active
	Remainder                         int64
}

const meterCols = `id, instance_id, account_id, host_id, kind, rate, period_us, fee_bp, active, since, remainder`

func scanMeter(r scanner) (*meter, error) {
	var m meter
	var rate int64
	err := r.Scan(&m.ID, &m.InstanceID, &m.AccountID, &m.HostID, &m.Kind, &rate, &m.PeriodUS, &m.FeeBP, &m.Active, &m.Since, &m.Remainder)
	m.Rate = suanli.Money(rate)
	return &m, err
}

func (tx *Tx) createMeter(ctx context.Context, m *meter) error {
	id, err := tx.insert(ctx, `INSERT INTO meters (instance_id, account_id, host_id, kind, rate, period_us, fee_bp, active, since, remainder)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)`, m.InstanceID, m.AccountID, m.HostID, m.Kind, int64(m.Rate), m.PeriodUS, m.FeeBP, m.Active, m.Since)
	m.ID = id
	return err
}

func (tx *Tx) instanceMeters(ctx context.Context, instanceID int64) (map[string]*meter, error) {
	rows, err := tx.query(ctx, `SELECT `+meterCols+` FROM meters WHERE instance_id = ?`, instanceID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]*meter{}
	for rows.Next() {
		m, err := scanMeter(rows)
		if err != nil {
			return nil, err
		}
		out[m.Kind] = m
	}
	return out, rows.Err()
}

// settleTo accrues an active meter up to at and posts the charge. It never
// moves a meter backwards: at before Since settles nothing.
func (tx *Tx) settleTo(ctx context.Context, m *meter, at int64, now time.Time) error {
	if !m.Active || at <= m.Since {
		return nil
	}
	amount, rem := suanli.Accrue(m.Rate, at-m.Since, m.PeriodUS, m.Remainder)
	if amount > 0 {
		secs := float64(at-m.Since) / 1e6
		t := txn{Kind: m.Kind, AccountID: m.AccountID, InstanceID: m.InstanceID, Amount: amount,
			From: fromUS(m.Since), To: fromUS(at), Quantity: fmt.Sprintf("%.3f s", secs), At: now}
		if err := tx.post(ctx, t, chargePostings(m.AccountID, m.HostID, amount, m.FeeBP)); err != nil {
			return err
		}
	}
	m.Since, m.Remainder = at, rem
	_, err := tx.exec(ctx, `UPDATE meters SET since = ?, remainder = ? WHERE id = ?`, m.Since, m.Remainder, m.ID)
	return err
}

// setActive settles the meter up to at, then switches it on or off from at.
func (tx *Tx) setActive(ctx context.Context, m *meter, active bool, at int64, now time.Time) error {
	if m.Active == active {
		return nil
	}
	if err := tx.settleTo(ctx, m, at, now); err != nil {
		return err
	}
	if active && at < m.Since {
		at = m.Since // never bill a second twice
	}
	m.Active, m.Since = active, max(at, m.Since)
	_, err := tx.exec(ctx, `UPDATE meters SET active = ?, since = ? WHERE id = ?`, m.Active, m.Since, m.ID)
	return err
}

// accrueQuantity bills a quantity (bytes for traffic meters) at once.
func (tx *Tx) accrueQuantity(ctx context.Context, m *meter, qty int64, now time.Time, label string) error {
	if qty <= 0 {
		return nil
	}
	amount, rem := suanli.Accrue(m.Rate, qty, m.PeriodUS, m.Remainder)
	if amount > 0 {
		t := txn{Kind: m.Kind, AccountID: m.AccountID, InstanceID: m.InstanceID, Amount: amount, From: now, To: now,
			Quantity: label, At: now}
		if err := tx.post(ctx, t, chargePostings(m.AccountID, m.HostID, amount, m.FeeBP)); err != nil {
			return err
		}
	}
	m.Remainder = rem
	_, err := tx.exec(ctx, `UPDATE meters SET remainder = ? WHERE id = ?`, m.Remainder, m.ID)
	return err
}

// Settle posts what every active meter accrued up to now, in one
// transaction. It returns how many meters produced a posting.
//
// Compute is settled only up to the last heartbeat of the instance's
// machine: the control plane bills what a host has confirmed. Were it
// settled to now, a host that went silent would have the seconds after its
// last heartbeat posted before the lease check declares it lost, and those
// cannot be taken back (DESIGN §4: billing of a lost host stops at its last
// heartbeat). What lies between the heartbeat and now stays accrued on the
// meter (shown as pending cost) and is posted by the next settlement after a
// heartbeat, or ends where the instance's next status change says.
func (s *DB) Settle(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := s.withTx(ctx, func(tx *Tx) error {
		rows, err := tx.query(ctx, `SELECT `+meterCols+` FROM meters WHERE active = ?`, true)
		if err != nil {
			return err
		}
		var ms []*meter
		for rows.Next() {
			m, err := scanMeter(rows)
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
		beats, err := tx.computeHeartbeats(ctx)
		if err != nil {
			return err
		}
		for _, m := range ms {
			at := now.UnixMicro()
			if hb, ok := beats[m.InstanceID]; ok && m.Kind == suanli.MeterCompute {
				at = min(at, hb)
			}
			if err := tx.settleTo(ctx, m, at, now); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// computeHeartbeats returns, for each instance with an active compute
// meter, its machine's last heartbeat (µs).
func (tx *Tx) computeHeartbeats(ctx context.Context) (map[int64]int64, error) {
	rows, err := tx.query(ctx, `SELECT i.id, ma.last_heartbeat FROM meters me
		JOIN instances i ON i.id = me.instance_id JOIN machines ma ON ma.id = i.machine_id
		WHERE me.active = ? AND me.kind = ?`, true, suanli.MeterCompute)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var id, hb int64
		if err := rows.Scan(&id, &hb); err != nil {
			return nil, err
		}
		out[id] = hb
	}
	return out, rows.Err()
}

func (m *meter) pending(now int64) (suanli.Money, suanli.Money) {
	if !m.Active || m.PeriodUS <= 0 {
		return 0, 0
	}
	amt, _ := suanli.Accrue(m.Rate, now-m.Since, m.PeriodUS, m.Remainder)
	return amt, suanli.MulDiv(m.Rate, suanli.MicrosPerHour, m.PeriodUS)
}
