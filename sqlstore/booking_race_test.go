package sqlstore_test

import (
	"testing"
	"time"

	"github.com/suanli/suanli"
)

// TestApplyPlacementsSeesNewBookings: a plan made before a booking on its
// machine is refused as stale (the booking may hold the GPUs the plan
// gives away), and nothing is written; a plan that saw it goes through.
func TestApplyPlacementsSeesNewBookings(t *testing.T) {
	EachBackend(t, testApplyPlacementsSeesNewBookings)
}

func testApplyPlacementsSeesNewBookings(t *testing.T, b Backend) {
	db := b.MustOpen(t)
	ctx := t.Context()
	host := MustAccount(t, db, "host", 0)
	renter := MustAccount(t, db, "renter", suanli.Dollars(100))
	m := MustMachine(t, db, host.ID, 2)

	w := &suanli.Window{MachineID: m.ID, HostID: host.ID, GPUs: 2, Start: t0.Add(time.Hour), End: t0.Add(48 * time.Hour), PriceGPU: suanli.Dollars(1)}
	if err := db.CreateWindow(ctx, w, 2, t0); err != nil {
		t.Fatal(err)
	}
	stale := plan(renter, m, []int{0, 1})
	stale.Bookings = []int64{} // planned when the machine had no booking
	bk := &suanli.Booking{WindowID: w.ID, AccountID: renter.ID, GPUs: 2, Start: w.Start, End: w.Start.Add(2 * time.Hour),
		PriceGPU: suanli.Dollars(1), Cost: suanli.Dollars(4), Image: "img"}
	if err := db.CreateBooking(ctx, bk, t0); err != nil {
		t.Fatal(err)
	}
	_, err := db.ApplyPlan(ctx, stale, t0)
	if suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Fatalf("plan made before booking %d: %v, want ECONFLICT", bk.ID, err)
	}
	if _, n, _ := db.FindInstances(ctx, suanli.InstanceFilter{}, t0); n != 0 {
		t.Fatalf("%d instances after a refused plan, want 0", n)
	}
	seen := plan(renter, m, []int{0})
	seen.Bookings = []int64{bk.ID}
	if _, err := db.ApplyPlan(ctx, seen, t0); err != nil {
		t.Fatalf("plan that saw the booking: %v", err)
	}
}

// TestBookingNoteOutlivesMessage: a booking's note (why it was booked) is
// stored with it and survives the start and the settlement, which
// overwrite its message.
func TestBookingNoteOutlivesMessage(t *testing.T) {
	EachBackend(t, func(t *testing.T, b Backend) {
		db := b.MustOpen(t)
		ctx := t.Context()
		host := MustAccount(t, db, "host", 0)
		renter := MustAccount(t, db, "renter", suanli.Dollars(100))
		m := MustMachine(t, db, host.ID, 1)
		w := &suanli.Window{MachineID: m.ID, HostID: host.ID, GPUs: 1, Start: t0.Add(time.Hour), End: t0.Add(4 * time.Hour), PriceGPU: suanli.Dollars(1)}
		if err := db.CreateWindow(ctx, w, 1, t0); err != nil {
			t.Fatal(err)
		}
		const note = "deferred job: booked window 1, $2.00 less than running now"
		bk := &suanli.Booking{WindowID: w.ID, AccountID: renter.ID, GPUs: 1, Start: w.Start, End: w.Start.Add(time.Hour),
			PriceGPU: suanli.Dollars(1), Cost: suanli.Dollars(1), Image: "img", Note: note}
		if err := db.CreateBooking(ctx, bk, t0); err != nil {
			t.Fatal(err)
		}
		if err := db.MarkBookingStarted(ctx, bk.ID, 7, w.Start); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SettleBooking(ctx, bk.ID, suanli.BookingCompleted, 0, "delivered", w.Start.Add(time.Hour), suanli.BookingRunning); err != nil {
			t.Fatal(err)
		}
		got, err := db.FindBookingByID(ctx, bk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Note != note || got.Message != "delivered" {
			t.Errorf("booking after settling: note %q, message %q; want note %q, message %q", got.Note, got.Message, note, "delivered")
		}
	})
}
