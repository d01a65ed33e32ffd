package audit_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/audit"
	"github.com/suanli/suanli/sqlstore"
)

// fixture is a log on a real SQLite store with a fake clock.
type fixture struct {
	log   *audit.Log
	store *sqlstore.DB
	now   time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlstore.Open(context.Background(), filepath.Join(dir, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	key, err := audit.LoadOrCreateKey(filepath.Join(dir, "audit.key"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: db, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f.log = &audit.Log{Store: db, Key: key, Now: func() time.Time { return f.now }, HeadFile: filepath.Join(dir, "audit.head")}
	return f
}

// record appends n entries, a second apart.
func (f *fixture) record(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		f.now = f.now.Add(time.Second)
		if _, err := f.log.Record(t.Context(), suanli.AuditEvent{ActorID: 2, AccountID: 2, KeyID: 3, Action: "POST /v1/instances",
			Target: fmt.Sprintf("instance %d", i+1), Source: "127.0.0.1", RequestID: fmt.Sprintf("req%d", i), Result: "201"}); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) checkpoint(t *testing.T) {
	t.Helper()
	f.now = f.now.Add(time.Second)
	if _, err := f.log.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := f.store.SQL().ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (f *fixture) verify(t *testing.T) *suanli.AuditReport {
	t.Helper()
	r, err := f.log.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustFind(t *testing.T, r *suanli.AuditReport, want string) {
	t.Helper()
	if r.OK {
		t.Fatalf("Verify found nothing, want a problem containing %q", want)
	}
	for _, p := range r.Problems {
		if strings.Contains(p, want) {
			return
		}
	}
	t.Fatalf("Verify problems %q, want one containing %q", r.Problems, want)
}

func TestCleanLogVerifies(t *testing.T) {
	f := newFixture(t)
	f.record(t, 5)
	f.checkpoint(t)
	f.record(t, 2)
	r := f.verify(t)
	if !r.OK || r.Entries != 7 || r.LastSeq != 7 || r.Checkpoints != 1 || r.LastCheckpoint != 5 || r.Unanchored != 2 {
		t.Fatalf("Verify = %+v, want ok with 7 entries, 1 checkpoint at 5, 2 unanchored", r)
	}
	if _, err := f.log.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c, _ := f.log.Checkpoint(t.Context()); c != nil {
		t.Errorf("a second checkpoint with nothing new: %+v", c)
	}
}

// Each kind of tampering, done directly in the SQLite file, is found.
func TestTamperingIsDetected(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, f *fixture)
		want   string
	}{
		{"edit a field", func(t *testing.T, f *fixture) {
			f.exec(t, `UPDATE audit_events SET result = '200' WHERE seq = 3`)
		}, "entry 3: its contents do not match its hash (edited)"},
		{"edit and rehash the rest of the chain", func(t *testing.T, f *fixture) {
			rehashFrom(t, f, 3, func(e *suanli.AuditEvent) {
				if e.Seq == 3 {
					e.Source = "10.0.0.1"
				}
			})
		}, "entry 5 differs from what checkpoint 5 signed"},
		{"delete an entry", func(t *testing.T, f *fixture) {
			f.exec(t, `DELETE FROM audit_events WHERE seq = 4`)
		}, "entries 4 to 4 are missing (deleted)"},
		{"delete the first entries", func(t *testing.T, f *fixture) {
			f.exec(t, `DELETE FROM audit_events WHERE seq <= 2`)
		}, "entries 1 to 2 are missing"},
		{"reorder two entries", func(t *testing.T, f *fixture) {
			swap(t, f, 2, 3)
		}, "entry 2 does not link"},
		{"insert an entry", func(t *testing.T, f *fixture) {
			// Shift entries 3.. up by one, put a forged entry at 3 and
			// rehash everything after it: only the checkpoint can tell.
			f.exec(t, `UPDATE audit_events SET seq = seq + 100 WHERE seq >= 3`)
			f.exec(t, `UPDATE audit_events SET seq = seq - 99 WHERE seq >= 103`)
			f.exec(t, `INSERT INTO audit_events (seq, at, action, result, prev_hash, hash) VALUES (3, 0, 'POST /v1/admin/credit', '200', '', '')`)
			rehashFrom(t, f, 3, nil)
		}, "differs from what checkpoint 5 signed"},
		{"insert without rehashing", func(t *testing.T, f *fixture) {
			f.exec(t, `INSERT INTO audit_events (seq, at, action, result, prev_hash, hash) VALUES (8, 0, 'POST /v1/admin/credit', '200', 'x', 'y')`)
		}, "entry 8 does not link"},
		{"truncate past a checkpoint", func(t *testing.T, f *fixture) {
			f.exec(t, `DELETE FROM audit_events WHERE seq >= 4`)
		}, "checkpoint signed entry 5, but the log ends at entry 3 (truncated)"},
		{"truncate entries and checkpoints together", func(t *testing.T, f *fixture) {
			f.exec(t, `DELETE FROM audit_events WHERE seq >= 4`)
			f.exec(t, `DELETE FROM audit_checkpoints`)
		}, "head file says entry 5 was checkpointed, but the log ends at entry 3 (truncated)"},
		{"forge a checkpoint", func(t *testing.T, f *fixture) {
			f.exec(t, `UPDATE audit_checkpoints SET hash = (SELECT hash FROM audit_events WHERE seq = 4) WHERE seq = 5`)
		}, "checkpoint at entry 5: signature does not verify"},
		{"sign a checkpoint with another key", func(t *testing.T, f *fixture) {
			_, other, _ := ed25519.GenerateKey(nil)
			c := &suanli.AuditCheckpoint{Seq: 6, Hash: "00", PrevSeq: 5, At: f.now}
			audit.Sign(other, c)
			if err := f.store.AppendAuditCheckpoint(t.Context(), c); err != nil {
				t.Fatal(err)
			}
		}, "checkpoint at entry 6: signature does not verify"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.record(t, 5)
			f.checkpoint(t)
			f.record(t, 2)
			if r := f.verify(t); !r.OK {
				t.Fatalf("before tampering: %q", r.Problems)
			}
			tc.tamper(t, f)
			mustFind(t, f.verify(t), tc.want)
		})
	}
}

// rehashFrom recomputes the chain from entry seq on, after edit (as an
// attacker without the signing key would), so that only checkpoints tell.
func rehashFrom(t *testing.T, f *fixture, seq int64, edit func(*suanli.AuditEvent)) {
	t.Helper()
	var all []*suanli.AuditEvent
	if err := f.store.ScanAuditEvents(t.Context(), func(e *suanli.AuditEvent) error { all = append(all, e); return nil }); err != nil {
		t.Fatal(err)
	}
	prev := audit.Genesis
	for _, e := range all {
		if e.Seq >= seq {
			if edit != nil {
				edit(e)
			}
			e.PrevHash = prev
			e.Hash = audit.Hash(e)
			f.exec(t, `UPDATE audit_events SET source = ?, prev_hash = ?, hash = ? WHERE seq = ?`, e.Source, e.PrevHash, e.Hash, e.Seq)
		}
		prev = e.Hash
	}
}

func swap(t *testing.T, f *fixture, a, b int64) {
	t.Helper()
	f.exec(t, `UPDATE audit_events SET seq = -1 WHERE seq = ?`, a)
	f.exec(t, `UPDATE audit_events SET seq = ? WHERE seq = ?`, a, b)
	f.exec(t, `UPDATE audit_events SET seq = ? WHERE seq = -1`, b)
}

func TestPurgeIsAuditedAndVerifies(t *testing.T) {
	f := newFixture(t)
	f.log.Retention = 24 * time.Hour
	start := f.now
	f.record(t, 4)
	f.checkpoint(t) // checkpoint at 4
	f.now = f.now.Add(20 * time.Hour)
	f.record(t, 3)
	f.checkpoint(t) // checkpoint at 7
	// Nothing is old enough yet.
	if n, err := f.log.Purge(t.Context()); err != nil || n != 0 {
		t.Fatalf("early purge = %d, %v", n, err)
	}
	f.now = start.Add(25 * time.Hour) // past the first checkpoint's retention, not the second's
	n, err := f.log.Purge(t.Context())
	if err != nil || n != 4 {
		t.Fatalf("purge = %d, %v; want the 4 entries up to the first checkpoint", n, err)
	}
	f.record(t, 2)
	r := f.verify(t)
	if !r.OK || r.FirstSeq != 5 || r.PurgedThrough != 4 || r.LastSeq != 10 {
		t.Fatalf("after purge: %+v", r)
	}
	evs, _ := f.store.FindAuditEvents(t.Context(), suanli.AuditFilter{Limit: 100})
	found := false
	for _, e := range evs {
		found = found || (e.Action == "audit.purge" && strings.Contains(e.Detail, "through=4"))
	}
	if !found {
		t.Errorf("the purge is not in the log: %+v", evs)
	}
	// Deleting more by hand, up to the other checkpoint, is not a purge.
	f.exec(t, `DELETE FROM audit_events WHERE seq <= 7`)
	mustFind(t, f.verify(t), "no audit.purge entry records purging them")
}

func TestEverythingPurgedStillChains(t *testing.T) {
	f := newFixture(t)
	f.log.Retention = time.Hour
	f.record(t, 3)
	f.checkpoint(t)
	f.now = f.now.Add(2 * time.Hour)
	if _, err := f.log.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := f.verify(t); !r.OK {
		t.Fatalf("after purging all but the purge entry: %q", r.Problems)
	}
	f.exec(t, `DELETE FROM audit_events WHERE action = 'audit.purge'`) // tampering: hide the purge
	mustFind(t, f.verify(t), "truncated")
}

func TestKeyFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.key")
	k1, err := audit.LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := audit.LoadOrCreateKey(path)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("reload: %v", err)
	}
}
