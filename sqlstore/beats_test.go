package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// insertMachines adds n bare machines of owner, beating last at t0.
func insertMachines(tb testing.TB, db *sqlstore.DB, owner int64, n int) []int64 {
	tb.Helper()
	ctx := context.Background()
	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	q := `INSERT INTO machines (owner_id, hardware, simulated, status, last_heartbeat, listing, created_at) VALUES (?, '{}', FALSE, ?, ?, '{}', ?) RETURNING id`
	if db.Dialect().Dollar {
		q = `INSERT INTO machines (owner_id, hardware, simulated, status, last_heartbeat, listing, created_at) VALUES ($1, '{}', FALSE, $2, $3, '{}', $4) RETURNING id`
	}
	ids := make([]int64, n)
	for i := range ids {
		if err := tx.QueryRowContext(ctx, q, owner, suanli.MachineOnline, t0.UnixMicro(), t0.UnixMicro()).Scan(&ids[i]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	return ids
}

// TestRecordBeats: a batch larger than one statement lands whole; a time
// never moves back; a machine that is gone is skipped; statuses stay.
func TestRecordBeats(t *testing.T) {
	EachBackend(t, testRecordBeats)
}

func testRecordBeats(t *testing.T, b Backend) {
	ctx := context.Background()
	db := b.MustOpen(t)
	host := MustAccount(t, db, "host", 0)
	ids := insertMachines(t, db, host.ID, 2500)
	if err := db.SetMachineStatus(ctx, ids[1], suanli.MachineSuspect); err != nil {
		t.Fatal(err)
	}
	at := func(i int) time.Time { return t0.Add(time.Duration(i+1) * time.Millisecond) }
	var beats []suanli.MachineBeat
	for i, id := range ids {
		beats = append(beats, suanli.MachineBeat{MachineID: id, At: at(i)})
	}
	beats = append(beats, suanli.MachineBeat{MachineID: ids[len(ids)-1] + 1000, At: t0.Add(time.Hour)}) // gone
	if err := db.RecordBeats(ctx, beats); err != nil {
		t.Fatal(err)
	}
	// An older time for machine 0 (a flush racing a sync) is ignored.
	if err := db.RecordBeats(ctx, []suanli.MachineBeat{{MachineID: ids[0], At: t0}}); err != nil {
		t.Fatal(err)
	}
	leases, err := db.MachineLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != len(ids) {
		t.Fatalf("MachineLeases: %d rows, want %d", len(leases), len(ids))
	}
	for i, l := range leases {
		if l.ID != ids[i] || !l.LastHeartbeat.Equal(at(i)) || l.OwnerID != host.ID || l.DesiredVersion != 1 {
			t.Fatalf("lease %d = %+v, want machine %d beating at %v", i, l, ids[i], at(i))
		}
		want := suanli.MachineOnline
		if i == 1 {
			want = suanli.MachineSuspect
		}
		if l.Status != want {
			t.Errorf("machine %d status %s, want %s: a flush must not change it", l.ID, l.Status, want)
		}
	}
}
