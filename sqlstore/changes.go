package sqlstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Kinds of change on the change feed.
const (
	ChangeListing     = "listing"     // a machine's listing or location
	ChangeStatus      = "status"      // a machine's lease status or hardware
	ChangeDesired     = "desired"     // a machine's desired state: its instances, volumes (rent, stop, release…)
	ChangeReliability = "reliability" // a machine's reliability score crossed a step
	ChangeMachine     = "machine"     // a machine joined
	ChangeLease       = "lease"       // a lease changed holder or was released (machine 0)
	ChangeKeys        = "keys"        // an API key was revoked or cut short (machine 0)
	ChangeAll         = "all"         // reload everything (machine 0)
)

// Change is one entry of the change feed: the changes table, written in
// the same transaction as what it announces, which every replica reads to
// keep what it holds in memory (the offer index, waiting agents) fresh.
type Change struct {
	Seq       int64
	Kind      string
	MachineID int64  // 0 when the change is not about one machine
	Origin    string // the store handle (replica) that wrote it
	At        time.Time
}

// newOrigin returns an id for this store handle: the host name, the
// process id and a random part, so that a restarted process is a new one.
func newOrigin() string {
	host, _ := os.Hostname()
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	b := make([]byte, 3)
	rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Origin names this store handle on the change feed and in leases: one
// replica of the server. It is fixed when the store is opened.
func (s *DB) Origin() string { return s.origin }

// SetDead names the origins of earlier server processes known to be dead
// (the server that held the same home before this one, which a lock file
// proves gone): request claims they left are taken over at once rather
// than after they go stale.
func (s *DB) SetDead(origins []string) {
	o := slices.Clone(origins)
	s.dead.Store(&o)
}

func (s *DB) deadOrigin(origin string) bool {
	d := s.dead.Load()
	return origin != "" && d != nil && slices.Contains(*d, origin)
}

// noteChange appends a change to the feed, in tx.
func (tx *Tx) noteChange(ctx context.Context, kind string, machineID int64) error {
	_, err := tx.exec(ctx, `INSERT INTO changes (kind, machine_id, origin, at) VALUES (?, ?, ?, ?)`, kind, machineID, tx.s.origin, time.Now().UnixMicro())
	return err
}

// NoteChange appends a change to the feed on its own.
func (s *DB) NoteChange(ctx context.Context, kind string, machineID int64) error {
	return s.withTx(ctx, func(tx *Tx) error { return tx.noteChange(ctx, kind, machineID) })
}

// LastChange returns the newest change's sequence number (0: none). A
// reader starts after it, having loaded everything it keeps.
func (s *DB) LastChange(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM changes`).Scan(&n)
	return n, err
}

// Changes returns up to limit changes after seq after, in order, and the
// changes numbered in also (sequence numbers the reader saw skipped, which
// a transaction still open may yet commit; see control's follower).
func (s *DB) Changes(ctx context.Context, after int64, also []int64, limit int) ([]Change, error) {
	query := `SELECT id, kind, machine_id, origin, at FROM changes WHERE id > ?`
	args := []any{after}
	if len(also) > 0 {
		query += ` OR id IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(also)), ", ") + `)`
		for _, v := range also {
			args = append(args, v)
		}
	}
	query += fmt.Sprintf(` ORDER BY id LIMIT %d`, limit)
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Change
	for rows.Next() {
		var c Change
		var at int64
		if err := rows.Scan(&c.Seq, &c.Kind, &c.MachineID, &c.Origin, &at); err != nil {
			return nil, err
		}
		c.At = fromUS(at)
		out = append(out, c)
	}
	return out, rows.Err()
}

// PruneChanges deletes changes written before before, keeping the newest
// (so that sequence numbers never restart). It returns how many it deleted.
func (s *DB) PruneChanges(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM changes WHERE at < ? AND id < (SELECT MAX(id) FROM changes)`), before.UnixMicro())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
