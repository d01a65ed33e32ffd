package sqlstore

import (
	"context"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/billing"
)

// A meter accrues one kind of charge for one instance: rate per period while
// active, settled into the ledger with the remainder carried (DESIGN §4).
// Compute is active while the instance runs; storage from creation to
// destroy; traffic meters are never "active" but accrue per byte reported.
//
// Hour closes (closes.go) settle active meters without writing their rows:
// a row's Since and Remainder are its state as of close CloseID, and closes
// after that one billed it further — up to their time, or, for compute, no
// further than the machine's last heartbeat then (bill_caps). catchUp
// brings a row up to date before it is written again, recording what those
// closes billed as a span.
type meter struct {
	ID, InstanceID, AccountID, HostID int64
	Kind                              string
	Rate                              suanli.Money
	PeriodUS, FeeBP                   int64
	Active                            bool
	Since                             int64 // settled up to here (µs) as of close CloseID, meaningful while active
	Remainder                         int64
	CloseID                           int64 // the latest close that Since and Remainder account for
	// MachineID is the machine a compute meter runs on (0 for other kinds):
	// its heartbeats bound how far closes bill the meter.
	MachineID int64
	// Through is how far the latest close (as the meter was loaded) billed
	// meters like this one: its time, or its machine's bound for compute.
	Through int64
}

// meterSelect reads meters with their machine and the latest close's bound
// on it; its first two arguments are the latest close's id and the compute
// kind (meterArgs).
const meterSelect = `SELECT m.id, m.instance_id, m.account_id, m.host_id, m.kind, m.rate, m.period_us, m.fee_bp, m.active, m.since,
	m.remainder, m.close_id, COALESCE(i.machine_id, 0), COALESCE(c.through_us, 0)
	FROM meters m LEFT JOIN instances i ON i.id = m.instance_id
	LEFT JOIN bill_caps c ON c.machine_id = i.machine_id AND c.close_id = ? AND m.kind = ?`

func meterArgs(st billState, args ...any) []any {
	return append([]any{st.CloseID, suanli.MeterCompute}, args...)
}

func scanMeter(r scanner, st billState) (*meter, error) {
	var m meter
	var rate, machine, capped int64
	err := r.Scan(&m.ID, &m.InstanceID, &m.AccountID, &m.HostID, &m.Kind, &rate, &m.PeriodUS, &m.FeeBP, &m.Active, &m.Since, &m.Remainder,
		&m.CloseID, &machine, &capped)
	m.Rate = suanli.Money(rate)
	m.Through = st.Through
	if m.Kind == suanli.MeterCompute {
		m.MachineID = machine
		if capped != 0 {
			m.Through = capped
		}
	}
	return &m, err
}

// loadMeters reads the meters matching where (over meters m), as of the
// latest close st.
func (tx *Tx) loadMeters(ctx context.Context, st billState, where string, args ...any) ([]*meter, error) {
	rows, err := tx.query(ctx, meterSelect+` WHERE `+where, meterArgs(st, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*meter
	for rows.Next() {
		m, err := scanMeter(rows, st)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// closeThrough is how far the latest close st billed meters like m.
func (tx *Tx) closeThrough(ctx context.Context, m *meter, st billState) (int64, error) {
	if m.Kind != suanli.MeterCompute || m.MachineID == 0 || st.CloseID == 0 {
		return st.Through, nil
	}
	var t int64
	err := tx.queryRow(ctx, `SELECT through_us FROM bill_caps WHERE machine_id = ? AND close_id = ?`, m.MachineID, st.CloseID).Scan(&t)
	if isNoRows(err) {
		return st.Through, nil
	}
	return t, err
}

// span is the meter's open span: its state as its row holds it.
func (m *meter) span() billing.Span {
	return billing.Span{MeterID: m.ID, AccountID: m.AccountID, HostID: m.HostID, Rate: m.Rate, PeriodUS: m.PeriodUS, FeeBP: m.FeeBP,
		Since: m.Since, Remainder: m.Remainder}
}

// billedByCloses reports whether closes after the row was written billed
// the meter, the latest (st) up to through: it was active and that is
// past its Since. A machine's bound never goes back from close to close,
// so the latest close's bound is how far all of them billed it.
func (m *meter) billedByCloses(st billState, through int64) bool {
	return m.Active && m.CloseID < st.CloseID && through > m.Since
}

// caughtUp returns the meter as of the latest close st, which billed it up
// to through, without writing anything.
func (m *meter) caughtUp(st billState, through int64) meter {
	c := *m
	if m.billedByCloses(st, through) {
		c.Since, c.Remainder = m.span().State(through)
	}
	c.CloseID = max(c.CloseID, st.CloseID)
	return c
}

func (tx *Tx) createMeter(ctx context.Context, m *meter) error {
	st, err := tx.billState(ctx, false)
	if err != nil {
		return err
	}
	m.CloseID = st.CloseID
	id, err := tx.insert(ctx, `INSERT INTO meters (instance_id, account_id, host_id, kind, rate, period_us, fee_bp, active, since, remainder, close_id, dirty)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)`, m.InstanceID, m.AccountID, m.HostID, m.Kind, int64(m.Rate), m.PeriodUS, m.FeeBP, m.Active, m.Since,
		m.CloseID, m.Active)
	m.ID = id
	return err
}

func (tx *Tx) instanceMeters(ctx context.Context, instanceID int64) (map[string]*meter, error) {
	st, err := tx.readBillState(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := tx.loadMeters(ctx, st, `m.instance_id = ?`, instanceID)
	if err != nil {
		return nil, err
	}
	out := map[string]*meter{}
	for _, m := range ms {
		out[m.Kind] = m
	}
	return out, nil
}

// catchUp brings a meter about to be written up to the latest close: what
// closes billed it since its row was last written becomes a span (the
// sub-ledger derives those closes' lines from it), and its Since and
// Remainder move to where the closes left them. The caller writes the row.
func (tx *Tx) catchUp(ctx context.Context, m *meter) error {
	st, err := tx.billState(ctx, false)
	if err != nil {
		return err
	}
	through, err := tx.closeThrough(ctx, m, st)
	if err != nil {
		return err
	}
	if m.billedByCloses(st, through) {
		if amt := m.span().Total(through); amt > 0 {
			if _, err := tx.exec(ctx, `INSERT INTO meter_spans (meter_id, machine_id, host_id, rate, period_us, fee_bp, since, remainder, close_lo, close_hi, amount)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, m.ID, m.MachineID, m.HostID, int64(m.Rate), m.PeriodUS, m.FeeBP, m.Since, m.Remainder,
				m.CloseID, st.CloseID, int64(amt)); err != nil {
				return err
			}
		}
	}
	*m = m.caughtUp(st, through)
	m.Through = through
	return nil
}

// settleTo accrues an active, caught-up meter up to at and posts the charge
// inline (a status change settles the meters it affects in its own
// transaction). It never moves a meter backwards: at before Since settles
// nothing. The caller writes the row.
func (tx *Tx) settleTo(ctx context.Context, m *meter, at int64, now time.Time) error {
	if !m.Active || at <= m.Since {
		return nil
	}
	amount, rem := suanli.Accrue(m.Rate, at-m.Since, m.PeriodUS, m.Remainder)
	if amount > 0 {
		t := txn{Kind: m.Kind, AccountID: m.AccountID, InstanceID: m.InstanceID, Amount: amount,
			From: fromUS(m.Since), To: fromUS(at), Quantity: billing.Quantity(m.Since, at), At: now}
		if err := tx.post(ctx, t, chargePostings(m.AccountID, m.HostID, amount, m.FeeBP)); err != nil {
			return err
		}
	}
	m.Since, m.Remainder = at, rem
	return nil
}

// setActive settles the meter up to at, then switches it on or off from at.
// The row is marked dirty so that the next hour close re-reads it.
func (tx *Tx) setActive(ctx context.Context, m *meter, active bool, at int64, now time.Time) error {
	if m.Active == active {
		return nil
	}
	if err := tx.catchUp(ctx, m); err != nil {
		return err
	}
	if err := tx.settleTo(ctx, m, at, now); err != nil {
		return err
	}
	if active && at < m.Since {
		at = m.Since // never bill a second twice
	}
	m.Active, m.Since = active, max(at, m.Since)
	_, err := tx.exec(ctx, `UPDATE meters SET active = ?, since = ?, remainder = ?, close_id = ?, dirty = TRUE WHERE id = ?`,
		m.Active, m.Since, m.Remainder, m.CloseID, m.ID)
	return err
}

// setRate settles the meter up to at at its old rate, then bills it at rate
// from there (a reservation starts or ends). The row is marked dirty so
// that the next hour close re-reads it; what closes billed at the old rate
// stays in the span catchUp records.
func (tx *Tx) setRate(ctx context.Context, m *meter, rate suanli.Money, at int64, now time.Time) error {
	if err := tx.catchUp(ctx, m); err != nil {
		return err
	}
	if err := tx.settleTo(ctx, m, at, now); err != nil {
		return err
	}
	m.Rate = rate
	_, err := tx.exec(ctx, `UPDATE meters SET rate = ?, since = ?, remainder = ?, close_id = ?, dirty = TRUE WHERE id = ?`,
		int64(m.Rate), m.Since, m.Remainder, m.CloseID, m.ID)
	return err
}

// accrueQuantity bills a quantity (bytes for traffic meters) at once.
// Traffic meters are never active, so closes never touch them.
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

// Accrual is what an instance owes that is not yet settled, and what it
// burns per hour now.
type Accrual struct {
	Unsettled suanli.Money
	BurnRate  suanli.Money // per hour
}

// pending is what the meter (loaded as of st) accrued after its last
// settlement, inline or by a close, up to now, and its burn rate per hour.
func (m *meter) pending(now int64, st billState) (suanli.Money, suanli.Money) {
	if !m.Active || m.PeriodUS <= 0 {
		return 0, 0
	}
	c := m.caughtUp(st, m.Through)
	amt, _ := suanli.Accrue(c.Rate, now-c.Since, c.PeriodUS, c.Remainder)
	return amt, suanli.MulDiv(m.Rate, suanli.MicrosPerHour, m.PeriodUS)
}
