package sqlstore_test

import (
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// TestLeaseMovesOnlyWhenFree: a lease is held by one replica at a time; it
// moves when it expires, is released or is reclaimed from a dead previous
// incarnation, and every move increments the term that fences closes.
func TestLeaseMovesOnlyWhenFree(t *testing.T) { EachBackend(t, testLeaseMovesOnlyWhenFree) }

func testLeaseMovesOnlyWhenFree(t *testing.T, b Backend) {
	db := b.MustOpen(t)
	ctx := t.Context()
	const ttl = 10 * time.Second
	acquire := func(holder string, now time.Time, reclaim string) (sqlstore.Lease, bool) {
		t.Helper()
		l, ok, err := db.AcquireLease(ctx, "singleton", holder, now, ttl, reclaim)
		if err != nil {
			t.Fatalf("AcquireLease(%s): %v", holder, err)
		}
		return l, ok
	}
	a, ok := acquire("a", t0, "")
	if !ok || a.Term != 1 || a.Holder != "a" {
		t.Fatalf("first acquire = %+v, %v; want a at term 1", a, ok)
	}
	if l, ok := acquire("b", t0.Add(ttl-time.Millisecond), ""); ok || l.Holder != "a" {
		t.Fatalf("b acquired a held lease: %+v", l)
	}
	// a renews: same term, later expiry.
	a, err := db.RenewLease(ctx, a, t0.Add(5*time.Second), ttl)
	if err != nil || a.Term != 1 {
		t.Fatalf("RenewLease = %+v, %v", a, err)
	}
	if _, ok := acquire("b", t0.Add(ttl), ""); ok {
		t.Fatal("b acquired a lease renewed until t0+15s at t0+10s")
	}
	// a falls silent: b takes the lease when it expires, at term 2.
	lb, ok := acquire("b", t0.Add(5*time.Second+ttl), "")
	if !ok || lb.Term != 2 {
		t.Fatalf("b after expiry = %+v, %v; want term 2", lb, ok)
	}
	if _, err := db.RenewLease(ctx, a, t0.Add(16*time.Second), ttl); suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Fatalf("a renews a lease b holds: err = %v, want conflict", err)
	}
	// a's fenced close is refused; b's goes through.
	if _, err := db.CloseBooksFenced(ctx, t0.Add(time.Hour), a.Fence()); suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Fatalf("close fenced by a stale term: err = %v, want conflict", err)
	}
	if _, err := db.CloseBooksFenced(ctx, t0.Add(time.Hour), lb.Fence()); err != nil {
		t.Fatalf("close fenced by the holder: %v", err)
	}
	// b releases: a takes it at once.
	if err := db.ReleaseLease(ctx, lb); err != nil {
		t.Fatal(err)
	}
	a, ok = acquire("a", t0.Add(16*time.Second), "")
	if !ok || a.Term != 3 {
		t.Fatalf("a after release = %+v, %v; want term 3", a, ok)
	}
	// a's process dies; its successor on the same home reclaims at once.
	a2, ok := acquire("a2", t0.Add(17*time.Second), "a")
	if !ok || a2.Term != 4 {
		t.Fatalf("reclaim from a dead predecessor = %+v, %v; want term 4", a2, ok)
	}
	if l, err := db.FindLease(ctx, "singleton"); err != nil || l.Holder != "a2" || l.Term != 4 {
		t.Fatalf("FindLease = %+v, %v", l, err)
	}
}

// TestFencedCloseRecordsTerm: a close made under a lease records its term,
// and a second close for the same period posts nothing.
func TestFencedCloseRecordsTerm(t *testing.T) { EachBackend(t, testFencedCloseRecordsTerm) }

func testFencedCloseRecordsTerm(t *testing.T, b Backend) {
	db := b.MustOpen(t)
	ctx := t.Context()
	host := MustAccount(t, db, "host", 0)
	renter := MustAccount(t, db, "renter", suanli.Dollars(10))
	m := MustMachine(t, db, host.ID, 2)
	in, err := db.ApplyPlan(ctx, plan(renter, m, []int{0}), t0)
	if err != nil {
		t.Fatal(err)
	}
	setStatus(t, db, in.ID, suanli.StatusRunning, t0)
	if err := db.RecordHeartbeat(ctx, m.ID, sqlstore.Heartbeat{At: t0.Add(2 * time.Hour), Status: suanli.MachineOnline}); err != nil {
		t.Fatal(err)
	}
	l, ok, err := db.AcquireLease(ctx, "singleton", db.Origin(), time.Now(), time.Minute, "")
	if err != nil || !ok {
		t.Fatalf("AcquireLease = %v, %v", ok, err)
	}
	c, err := db.CloseBooksFenced(ctx, t0.Add(time.Hour), l.Fence())
	if err != nil || c.ID != 1 {
		t.Fatalf("close = %+v, %v", c, err)
	}
	again, err := db.CloseBooksFenced(ctx, t0.Add(time.Hour), l.Fence())
	if err != nil || again.ID != 0 {
		t.Fatalf("second close of the same period = %+v, %v; want nothing", again, err)
	}
	cs, err := db.FindCloses(ctx)
	if err != nil || len(cs) != 1 || cs[0].Term != l.Term || !cs[0].Through.Equal(t0.Add(time.Hour)) || cs[0].Amount != c.Amount || c.Amount < 400_000 {
		t.Fatalf("FindCloses = %+v, %v", cs, err)
	}
}

// TestChangeFeed: listing, desired-state and status changes are on the
// feed with their machine; a plain heartbeat is not; pruning keeps the
// newest entry so that sequence numbers never restart.
func TestChangeFeed(t *testing.T) { EachBackend(t, testChangeFeed) }

func testChangeFeed(t *testing.T, b Backend) {
	db := b.MustOpen(t)
	ctx := t.Context()
	host := MustAccount(t, db, "host", 0)
	renter := MustAccount(t, db, "renter", suanli.Dollars(10))
	m := MustMachine(t, db, host.ID, 2)
	start, err := db.LastChange(ctx)
	if err != nil || start == 0 {
		t.Fatalf("LastChange after join and listing = %d, %v", start, err)
	}
	kinds := func(after int64) []string {
		t.Helper()
		cs, err := db.Changes(ctx, after, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			if c.MachineID != m.ID && c.MachineID != 0 || c.Origin != db.Origin() || c.Seq <= after {
				t.Errorf("change %+v: want machine %d, origin %s, after %d", c, m.ID, db.Origin(), after)
			}
			out = append(out, c.Kind)
		}
		return out
	}
	if err := db.RecordHeartbeat(ctx, m.ID, sqlstore.Heartbeat{At: t0.Add(time.Second), Status: suanli.MachineOnline}); err != nil {
		t.Fatal(err)
	}
	if got := kinds(start); len(got) != 0 {
		t.Fatalf("a plain heartbeat wrote changes %v", got)
	}
	if _, err := db.ApplyPlan(ctx, plan(renter, m, []int{0}), t0); err != nil {
		t.Fatal(err)
	}
	if err := db.SetMachineStatus(ctx, m.ID, suanli.MachineSuspect); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordHeartbeat(ctx, m.ID, sqlstore.Heartbeat{At: t0.Add(2 * time.Second), Status: suanli.MachineOnline}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateListing(ctx, m.ID, suanli.Listing{Listed: false}, "DE", "eu"); err != nil {
		t.Fatal(err)
	}
	got := kinds(start)
	want := []string{sqlstore.ChangeDesired, sqlstore.ChangeStatus, sqlstore.ChangeStatus, sqlstore.ChangeListing}
	if len(got) != len(want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("changes = %v, want %v", got, want)
		}
	}
	// also re-reads sequence numbers below after.
	if cs, err := db.Changes(ctx, start+4, []int64{start + 1}, 10); err != nil || len(cs) != 1 || cs[0].Seq != start+1 {
		t.Fatalf("Changes(after %d, also %d) = %+v, %v", start+4, start+1, cs, err)
	}
	last, _ := db.LastChange(ctx)
	if n, err := db.PruneChanges(ctx, time.Now().Add(time.Hour)); err != nil || n == 0 {
		t.Fatalf("PruneChanges = %d, %v", n, err)
	}
	if after, _ := db.LastChange(ctx); after != last {
		t.Fatalf("LastChange after prune = %d, want %d (the newest stays)", after, last)
	}
	if err := db.NoteChange(ctx, sqlstore.ChangeAll, 0); err != nil {
		t.Fatal(err)
	}
	if after, _ := db.LastChange(ctx); after != last+1 {
		t.Fatalf("LastChange after a new change = %d, want %d", after, last+1)
	}
}
