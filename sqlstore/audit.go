package sqlstore

import (
	"context"
	"fmt"

	"github.com/suanli/suanli"
)

const auditCols = `seq, at, actor_id, account_id, key_id, action, target, source, request_id, result, detail, prev_hash, hash`

func scanAudit(r scanner) (*suanli.AuditEvent, error) {
	var e suanli.AuditEvent
	var at int64
	if err := r.Scan(&e.Seq, &at, &e.ActorID, &e.AccountID, &e.KeyID, &e.Action, &e.Target, &e.Source, &e.RequestID,
		&e.Result, &e.Detail, &e.PrevHash, &e.Hash); err != nil {
		return nil, err
	}
	e.At = fromUS(at)
	return &e, nil
}

// AppendAuditEvent appends one audit entry (audit.Store): in one
// transaction it reads the last entry, calls seal with its Seq and Hash,
// and inserts the result. On PostgreSQL the table is locked for the
// transaction so that replicas append one at a time; on SQLite the single
// writer connection already serialises.
func (s *DB) AppendAuditEvent(ctx context.Context, seal func(prevSeq int64, prevHash string) *suanli.AuditEvent) (*suanli.AuditEvent, error) {
	var out *suanli.AuditEvent
	err := s.withTx(ctx, func(tx *Tx) error {
		if s.dialect.Name == "postgres" {
			if _, err := tx.exec(ctx, `LOCK TABLE audit_events IN EXCLUSIVE MODE`); err != nil {
				return err
			}
		}
		var seq int64
		var hash string
		err := tx.queryRow(ctx, `SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1`).Scan(&seq, &hash)
		if isNoRows(err) {
			// Everything may have been purged: chain from the anchor.
			err = tx.queryRow(ctx, `SELECT seq, hash FROM audit_checkpoints ORDER BY seq DESC LIMIT 1`).Scan(&seq, &hash)
			if isNoRows(err) {
				seq, hash, err = 0, "", nil
			}
		}
		if err != nil {
			return err
		}
		e := seal(seq, hash)
		if e.Seq != seq+1 {
			return fmt.Errorf("audit: entry %d does not follow %d", e.Seq, seq)
		}
		_, err = tx.exec(ctx, `INSERT INTO audit_events (`+auditCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.Seq, us(e.At), e.ActorID, e.AccountID, e.KeyID, e.Action, e.Target, e.Source, e.RequestID, e.Result, e.Detail, e.PrevHash, e.Hash)
		out = e
		return err
	})
	return out, err
}

// ScanAuditEvents calls fn for every audit entry in Seq order; an error
// from fn stops the scan and is returned.
func (s *DB) ScanAuditEvents(ctx context.Context, fn func(*suanli.AuditEvent) error) error {
	const page = 1000
	var after int64 = -1
	for {
		rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+auditCols+` FROM audit_events WHERE seq > ? ORDER BY seq LIMIT `+fmt.Sprint(page)), after)
		if err != nil {
			return err
		}
		batch, err := collect(rows, scanAudit)
		if err != nil {
			return err
		}
		for _, e := range batch {
			if err := fn(e); err != nil {
				return err
			}
			after = e.Seq
		}
		if len(batch) < page {
			return nil
		}
	}
}

// FindAuditEvents lists audit entries by filter, newest first (an account
// filter matches entries acting on or by that account).
func (s *DB) FindAuditEvents(ctx context.Context, f suanli.AuditFilter) ([]*suanli.AuditEvent, error) {
	where, args := "1 = 1", []any{}
	if f.AccountID != nil {
		where += " AND (account_id = ? OR actor_id = ?)"
		args = append(args, *f.AccountID, *f.AccountID)
	}
	if f.BeforeSeq != nil {
		where += " AND seq < ?"
		args = append(args, *f.BeforeSeq)
	}
	limit := f.Limit
	if limit <= 0 || limit > 10000 {
		limit = 100
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+auditCols+` FROM audit_events WHERE `+where+` ORDER BY seq DESC LIMIT `+fmt.Sprint(limit)), args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanAudit)
}

// AppendAuditCheckpoint stores a signed checkpoint.
func (s *DB) AppendAuditCheckpoint(ctx context.Context, c *suanli.AuditCheckpoint) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO audit_checkpoints (seq, hash, prev_seq, at, key_id, signature) VALUES (?, ?, ?, ?, ?, ?)`),
		c.Seq, c.Hash, c.PrevSeq, us(c.At), c.KeyID, c.Signature)
	return err
}

// FindAuditCheckpoints returns every checkpoint in Seq order.
func (s *DB) FindAuditCheckpoints(ctx context.Context) ([]*suanli.AuditCheckpoint, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, hash, prev_seq, at, key_id, signature FROM audit_checkpoints ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*suanli.AuditCheckpoint
	for rows.Next() {
		var c suanli.AuditCheckpoint
		var at int64
		if err := rows.Scan(&c.Seq, &c.Hash, &c.PrevSeq, &at, &c.KeyID, &c.Signature); err != nil {
			return nil, err
		}
		c.At = fromUS(at)
		out = append(out, &c)
	}
	return out, rows.Err()
}

// PurgeAuditEvents deletes the audit entries up to and including through,
// and the checkpoints before it, in one transaction; the checkpoint at
// through stays as the anchor that the next entry chains from.
func (s *DB) PurgeAuditEvents(ctx context.Context, through int64) (int64, error) {
	var n int64
	err := s.withTx(ctx, func(tx *Tx) error {
		res, err := tx.exec(ctx, `DELETE FROM audit_events WHERE seq <= ?`, through)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		_, err = tx.exec(ctx, `DELETE FROM audit_checkpoints WHERE seq < ?`, through)
		return err
	})
	return n, err
}
