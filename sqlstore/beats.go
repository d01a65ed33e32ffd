package sqlstore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/suanli/suanli"
)

// A machine's last heartbeat lives in two places: machine_heartbeats, one
// narrow row per machine that the control plane's heartbeat table (package
// heartbeat) writes in batches (RecordBeats), and machines.last_heartbeat,
// which a sync that changed something writes at once (RecordHeartbeat, which
// writes both). Every read takes the later of the two (lastBeatCol).
//
// The narrow table is what makes batches cheap: upserting a 16-byte row
// costs SQLite about a seventh of rewriting a machine's row with its
// hardware and listing JSON, and the lease checker's scan for silent
// machines (SilentMachines) reads only it.

// beatChunk is how many machines one statement of RecordBeats writes: two
// parameters each, well under every dialect's limit.
const beatChunk = 500

// lastBeatCol is a machine's last heartbeat in a query over machines m LEFT
// JOIN machine_heartbeats h (beatJoin).
const (
	lastBeatCol = `CASE WHEN h.last_heartbeat > m.last_heartbeat THEN h.last_heartbeat ELSE m.last_heartbeat END`
	beatJoin    = `machines m LEFT JOIN machine_heartbeats h ON h.machine_id = m.id`
)

// RecordBeats writes machines' last heartbeats in one transaction,
// beatChunk machines per statement (a multi-row INSERT … ON CONFLICT DO
// UPDATE, which SQLite and PostgreSQL both take), so that the database sees
// one write per flush however many agents beat. A heartbeat never moves
// back (a sync may have written a later one meanwhile); status is left
// alone (a machine that is not online comes back through a full sync).
func (s *DB) RecordBeats(ctx context.Context, beats []suanli.MachineBeat) error {
	if len(beats) == 0 {
		return nil
	}
	return s.withTx(ctx, func(tx *Tx) error {
		var full *sql.Stmt
		args := make([]any, 0, 2*min(len(beats), beatChunk))
		for lo := 0; lo < len(beats); lo += beatChunk {
			part := beats[lo:min(lo+beatChunk, len(beats))]
			args = args[:0]
			for _, b := range part {
				args = append(args, b.MachineID, us(b.At))
			}
			var err error
			if len(part) < beatChunk {
				_, err = tx.exec(ctx, upsertBeats(len(part)), args...)
			} else {
				if full == nil {
					if full, err = tx.tx.PrepareContext(ctx, s.q(upsertBeats(beatChunk))); err != nil {
						return err
					}
					defer full.Close()
				}
				_, err = full.ExecContext(ctx, args...)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func upsertBeats(n int) string {
	return `INSERT INTO machine_heartbeats (machine_id, last_heartbeat) VALUES ` + strings.Repeat("(?, ?),", n-1) + `(?, ?)
		ON CONFLICT (machine_id) DO UPDATE SET last_heartbeat = excluded.last_heartbeat
		WHERE machine_heartbeats.last_heartbeat < excluded.last_heartbeat`
}

// upsertBeat writes one machine's heartbeat into the narrow table.
func (tx *Tx) upsertBeat(ctx context.Context, id int64, at int64) error {
	_, err := tx.exec(ctx, upsertBeats(1), id, at)
	return err
}

// SilentMachines returns the machines whose batched heartbeat is older than
// before, with that heartbeat: the lease checker's candidates, found by one
// scan of the narrow table that returns only them. A machine may have beaten
// since through a sync that wrote machines.last_heartbeat; FindMachineByID
// says.
func (s *DB) SilentMachines(ctx context.Context, before int64) ([]suanli.MachineBeat, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT machine_id, last_heartbeat FROM machine_heartbeats WHERE last_heartbeat < ? ORDER BY machine_id`), before)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []suanli.MachineBeat
	for rows.Next() {
		var id, hb int64
		if err := rows.Scan(&id, &hb); err != nil {
			return nil, err
		}
		out = append(out, suanli.MachineBeat{MachineID: id, At: fromUS(hb)})
	}
	return out, rows.Err()
}

// MachineLeases returns every machine's lease fields (owner, status, last
// heartbeat, desired-state version), in id order: one narrow read for the
// lease checker and the heartbeat table, without the per-machine GPU
// lookups of FindMachines.
func (s *DB) MachineLeases(ctx context.Context) ([]suanli.MachineLease, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT m.id, m.owner_id, m.status, `+lastBeatCol+`, m.desired_version FROM `+beatJoin+` ORDER BY m.id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []suanli.MachineLease
	for rows.Next() {
		var l suanli.MachineLease
		var hb int64
		if err := rows.Scan(&l.ID, &l.OwnerID, &l.Status, &hb, &l.DesiredVersion); err != nil {
			return nil, err
		}
		l.LastHeartbeat = fromUS(hb)
		out = append(out, l)
	}
	return out, rows.Err()
}

// MachineLeasesByID returns the lease fields of the machines in ids that
// exist, in id order.
func (s *DB) MachineLeasesByID(ctx context.Context, ids []int64) ([]suanli.MachineLease, error) {
	var out []suanli.MachineLease
	for lo := 0; lo < len(ids); lo += beatChunk {
		in, args := inList(ids[lo:min(lo+beatChunk, len(ids))])
		rows, err := s.db.QueryContext(ctx, s.q(`SELECT m.id, m.owner_id, m.status, `+lastBeatCol+`, m.desired_version FROM `+beatJoin+
			` WHERE m.id IN (`+in+`) ORDER BY m.id`), args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var l suanli.MachineLease
			var hb int64
			if err := rows.Scan(&l.ID, &l.OwnerID, &l.Status, &hb, &l.DesiredVersion); err != nil {
				rows.Close()
				return nil, err
			}
			l.LastHeartbeat = fromUS(hb)
			out = append(out, l)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SetMachinesStatus changes the lease status of the machines in ids, in one
// transaction (a lease check that finds many hosts gone at once).
func (s *DB) SetMachinesStatus(ctx context.Context, ids []int64, status string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.withTx(ctx, func(tx *Tx) error {
		for lo := 0; lo < len(ids); lo += beatChunk {
			in, args := inList(ids[lo:min(lo+beatChunk, len(ids))])
			if _, err := tx.exec(ctx, `UPDATE machines SET status = ? WHERE id IN (`+in+`)`, append([]any{status}, args...)...); err != nil {
				return err
			}
		}
		for _, id := range ids { // other replicas reload these machines' offers
			if err := tx.noteChange(ctx, ChangeStatus, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// lastBeats returns every machine's last heartbeat (µs).
func (tx *Tx) lastBeats(ctx context.Context) (map[int64]int64, error) {
	rows, err := tx.query(ctx, `SELECT m.id, `+lastBeatCol+` FROM `+beatJoin)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	beat := map[int64]int64{}
	for rows.Next() {
		var id, hb int64
		if err := rows.Scan(&id, &hb); err != nil {
			return nil, err
		}
		beat[id] = hb
	}
	return beat, rows.Err()
}

// overlayBeats sets each machine's LastHeartbeat to the later of its row's
// and its batched one.
func (tx *Tx) overlayBeats(ctx context.Context, ms []*suanli.Machine) error {
	if len(ms) == 0 {
		return nil
	}
	q, args := `SELECT machine_id, last_heartbeat FROM machine_heartbeats`, []any(nil)
	if len(ms) <= 100 {
		ids := make([]int64, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
		}
		in, a := inList(ids)
		q, args = q+` WHERE machine_id IN (`+in+`)`, a
	}
	rows, err := tx.query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	beat := make(map[int64]int64, len(ms))
	for rows.Next() {
		var id, hb int64
		if err := rows.Scan(&id, &hb); err != nil {
			return err
		}
		beat[id] = hb
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, m := range ms {
		if hb, ok := beat[m.ID]; ok && hb > us(m.LastHeartbeat) {
			m.LastHeartbeat = fromUS(hb)
		}
	}
	return nil
}
