package sqlstore

import (
	"context"
	"time"

	"github.com/suanli/suanli"
)

// Lease is a named lease that one replica holds at a time, until ExpiresAt
// unless it renews it. Its Term grows by one each time the lease changes
// holder: a write that only the holder may make checks it (a Fence), so a
// replica that lost the lease without noticing (paused, partitioned) cannot
// make it. The zero value is a lease nobody ever held.
type Lease struct {
	Name       string
	Holder     string // the replica (an Origin); "" when never held
	Term       int64
	ExpiresAt  time.Time // zero once released
	AcquiredAt time.Time // when Holder took it
}

// HeldAt reports whether someone holds the lease at now.
func (l Lease) HeldAt(now time.Time) bool { return l.Holder != "" && now.Before(l.ExpiresAt) }

// Fence returns the fencing token of this holding of the lease.
func (l Lease) Fence() *Fence { return &Fence{Name: l.Name, Holder: l.Holder, Term: l.Term} }

// Fence is a holding of a lease that a transaction must still hold when
// it commits: the lease row has this holder and term. A nil *Fence fences
// nothing (one server alone, tools, tests).
type Fence struct {
	Name   string
	Holder string
	Term   int64
}

// check fails the transaction with ECONFLICT unless f still holds its lease.
// On PostgreSQL the lease row stays locked shared until the transaction
// ends, so a takeover waits for it: the write either commits under the old
// term or is refused under the new one.
func (tx *Tx) checkFence(ctx context.Context, f *Fence) error {
	if f == nil {
		return nil
	}
	var holder string
	var term int64
	err := tx.queryRow(ctx, `SELECT holder, term FROM leases WHERE name = ?`+tx.rowLock(false), f.Name).Scan(&holder, &term)
	if isNoRows(err) {
		holder, err = "nobody", nil
	}
	if err != nil {
		return err
	}
	if holder != f.Holder || term != f.Term {
		return suanli.Errorf(suanli.ECONFLICT, "lease %s moved to %s (term %d): this replica (%s, term %d) no longer holds it", f.Name, holder, term, f.Holder, f.Term)
	}
	return nil
}

// FindLease returns the named lease; the zero Lease (with Name set) when
// nobody ever held it.
func (s *DB) FindLease(ctx context.Context, name string) (Lease, error) {
	l := Lease{Name: name}
	var exp, acq int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT holder, term, expires_at, acquired_at FROM leases WHERE name = ?`), name).
		Scan(&l.Holder, &l.Term, &exp, &acq)
	if isNoRows(err) {
		return l, nil
	} else if err != nil {
		return l, err
	}
	l.ExpiresAt, l.AcquiredAt = fromUS(exp), fromUS(acq)
	return l, nil
}

// AcquireLease takes the named lease for holder until now+ttl, or renews
// it when holder has it already (same term). It takes a lease that was
// never held, was released, has expired at now, or is held by reclaim: a
// previous incarnation of this replica that is known to be dead (the next
// process on the same home; "" for none). A change of holder increments the
// term and is announced on the change feed. It reports whether holder has
// the lease, and returns the lease as it stands.
//
// Expiry is judged by the callers' clocks, which must agree to well within
// ttl; the term, not the clock, keeps fenced writes exclusive.
func (s *DB) AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration, reclaim string) (Lease, bool, error) {
	var out Lease
	got := false
	err := s.withTx(ctx, func(tx *Tx) error {
		out, got = Lease{Name: name}, false
		var exp, acq int64
		err := tx.queryRow(ctx, `SELECT holder, term, expires_at, acquired_at FROM leases WHERE name = ?`+tx.rowLock(true), name).
			Scan(&out.Holder, &out.Term, &exp, &acq)
		switch {
		case isNoRows(err):
			res, err := tx.exec(ctx, `INSERT INTO leases (name, holder, term, expires_at, acquired_at) VALUES (?, ?, 1, ?, ?)
				ON CONFLICT (name) DO NOTHING`, name, holder, us(now.Add(ttl)), us(now))
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return nil // taken meanwhile: the caller tries again later
			}
			out, got = Lease{Name: name, Holder: holder, Term: 1, ExpiresAt: now.Add(ttl), AcquiredAt: now}, true
			return tx.noteChange(ctx, ChangeLease, 0)
		case err != nil:
			return err
		}
		out.ExpiresAt, out.AcquiredAt = fromUS(exp), fromUS(acq)
		if out.Holder == holder {
			if _, err := tx.exec(ctx, `UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ? AND term = ?`,
				us(now.Add(ttl)), name, holder, out.Term); err != nil {
				return err
			}
			out.ExpiresAt, got = now.Add(ttl), true
			return nil
		}
		if out.HeldAt(now) && (reclaim == "" || out.Holder != reclaim) {
			return nil
		}
		res, err := tx.exec(ctx, `UPDATE leases SET holder = ?, term = term + 1, expires_at = ?, acquired_at = ? WHERE name = ? AND holder = ? AND term = ?`,
			holder, us(now.Add(ttl)), us(now), name, out.Holder, out.Term)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		out, got = Lease{Name: name, Holder: holder, Term: out.Term + 1, ExpiresAt: now.Add(ttl), AcquiredAt: now}, true
		return tx.noteChange(ctx, ChangeLease, 0)
	})
	if err != nil {
		return Lease{}, false, err
	}
	return out, got, nil
}

// RenewLease extends a lease its holder still holds (same holder and
// term) to now+ttl. ECONFLICT when it moved on.
func (s *DB) RenewLease(ctx context.Context, l Lease, now time.Time, ttl time.Duration) (Lease, error) {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ? AND term = ?`),
		us(now.Add(ttl)), l.Name, l.Holder, l.Term)
	if err != nil {
		return l, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		cur, err := s.FindLease(ctx, l.Name)
		if err != nil {
			return l, err
		}
		return cur, suanli.Errorf(suanli.ECONFLICT, "lease %s: held by %s (term %d) now, not %s (term %d)", l.Name, cur.Holder, cur.Term, l.Holder, l.Term)
	}
	l.ExpiresAt = now.Add(ttl)
	return l, nil
}

// ReleaseLease gives a lease up (a clean shutdown), so that another
// replica takes it at once rather than after it expires. Releasing a lease
// that moved on does nothing.
func (s *DB) ReleaseLease(ctx context.Context, l Lease) error {
	return s.withTx(ctx, func(tx *Tx) error {
		res, err := tx.exec(ctx, `UPDATE leases SET expires_at = 0 WHERE name = ? AND holder = ? AND term = ?`, l.Name, l.Holder, l.Term)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		return tx.noteChange(ctx, ChangeLease, 0)
	})
}

// CloseRecord is one hour close as the calendar keeps it.
type CloseRecord struct {
	ID      int64
	Through time.Time
	Term    int64 // the lease term of the replica that made it (0: none)
	Meters  int
	Amount  suanli.Money
}

// FindCloses returns every hour close in order (an operator's check that
// no period was settled twice, and by which lease term).
func (s *DB) FindCloses(ctx context.Context) ([]CloseRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, through_us, term, meters, amount FROM bill_closes ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []CloseRecord
	for rows.Next() {
		var c CloseRecord
		var through, amount int64
		if err := rows.Scan(&c.ID, &through, &c.Term, &c.Meters, &amount); err != nil {
			return nil, err
		}
		c.Through, c.Amount = fromUS(through), suanli.Money(amount)
		out = append(out, c)
	}
	return out, rows.Err()
}
