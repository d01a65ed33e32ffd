package control_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// TestBookByQuery: a query books the cheapest open window that matches and
// holds the booking (lowest price per GPU-hour, then earliest start), says
// so on the booking, passes over a window whose GPUs are rented with no
// end, and refuses with what to change when nothing fits.
func TestBookByQuery(t *testing.T) {
	mk := newMarket(t)
	m1 := mk.machine(2, suanli.Dollars(1), 100_000, 4)
	m2 := mk.machine(2, suanli.Dollars(1), 100_000, 4)
	mk.tick(2*time.Second, nil)
	at := mk.now.Add(time.Hour)
	mk.window(m1, 1, at, at.Add(10*time.Hour), 2_000_000, time.Hour, 0)                        // $2.00
	late := mk.window(m1, 1, at.Add(time.Hour), at.Add(11*time.Hour), 1_500_000, time.Hour, 0) // $1.50, later
	cheap := mk.window(m2, 1, at, at.Add(10*time.Hour), 1_500_000, time.Hour, 0)               // $1.50, earlier
	mk.window(m2, 1, at, at.Add(4*time.Hour), 500_000, time.Hour, 0)                           // $0.50, but only 4 h

	const q = "gpu_name=RTX_4090 hours>=8"
	b, err := mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{Query: q, Hours: 2, GPUs: 1, Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if b.WindowID != cheap.ID || b.PriceGPU != 1_500_000 || !b.Start.Equal(at) || b.End.Sub(b.Start) != 2*time.Hour || b.Cost != 3_000_000 {
		t.Fatalf("booked %+v, want window %d (the cheapest, earliest) from %s for 2 h at $1.50", b, cheap.ID, at)
	}
	if !strings.Contains(b.Note, "booked by query") || !strings.Contains(b.Note, "window") {
		t.Errorf("note = %q, want it to say the query chose the window", b.Note)
	}
	if got, _ := mk.svc.FindBookingByID(mk.renter, b.ID); got == nil || got.Note != b.Note {
		t.Errorf("stored note = %+v, want %q", got, b.Note)
	}

	// Window cheap is full now: the next is the $1.50 one that starts later.
	b2, err := mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{Query: q, Hours: 2, GPUs: 1, Image: "img"})
	if err != nil || b2.WindowID != late.ID {
		t.Fatalf("second booking = %+v, %v; want window %d", b2, err, late.ID)
	}

	// Nothing matches the query: ENOTFOUND saying what to change.
	_, err = mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{Query: "gpu_name=H100", Hours: 2, Image: "img"})
	if suanli.ErrorCode(err) != suanli.ENOTFOUND || !strings.Contains(err.Error(), "loosen the query") {
		t.Errorf("no matching window: %v, want ENOTFOUND saying to loosen the query", err)
	}
	// Windows match, none holds it: each one's reason, and what to change.
	_, err = mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{Query: "gpu_name=RTX_4090", Hours: 2, GPUs: 2, Image: "img"})
	if suanli.ErrorCode(err) != suanli.ENOTFOUND || !strings.Contains(err.Error(), "you asked for 2") || !strings.Contains(err.Error(), "change --start, --hours, --gpus") {
		t.Errorf("too many GPUs: %v, want ENOTFOUND with the reasons", err)
	}
	if _, err := mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{WindowID: cheap.ID, Query: q, Image: "img"}); suanli.ErrorCode(err) != suanli.EINVALID {
		t.Errorf("window and query: %v, want EINVALID", err)
	}
	if _, err := mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{Query: "start>=tomorrow", Image: "img"}); suanli.ErrorCode(err) != suanli.EINVALID {
		t.Errorf("bad query: %v, want EINVALID", err)
	}

	// Both GPUs of machine 2 rented with no end: its $0.50 window cannot
	// hold a booking, so a query that matches it books elsewhere.
	mk.mustCreate(m2, 1, 0)
	b3, err := mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{Query: "gpu_name=RTX_4090", Start: at.Add(time.Hour), Hours: 1, GPUs: 1, Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := mk.db.FindWindowByID(context.Background(), b3.WindowID); w == nil || w.MachineID != m1 {
		t.Errorf("with machine %d's GPUs rented, booked window %d (%+v), want one on machine %d", m2, b3.WindowID, w, m1)
	}
	mk.checkLedger()
}

// TestBookByQueryRace: renters racing for the one window a query matches
// get one booking; every other attempt fails with a conflict or not-found
// naming the query, and nothing else is booked.
func TestBookByQueryRace(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(2, suanli.Dollars(1), 100_000, 4)
	mk.tick(2*time.Second, nil)
	at := mk.now.Add(time.Hour)
	w := mk.window(m, 1, at, at.Add(8*time.Hour), 1_000_000, time.Hour, 0)
	mk.window(m, 1, at.Add(time.Hour), at.Add(9*time.Hour), 900_000, time.Hour, 0) // cheaper, but not at the start asked
	q := "gpu_name=RTX_4090 start=" + at.Format(time.RFC3339)

	const racers = 6
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			_, errs[i] = mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{Query: q, Hours: 8, GPUs: 1, Image: "img"})
		})
	}
	wg.Wait()
	booked := 0
	for _, err := range errs {
		switch {
		case err == nil:
			booked++
		case suanli.ErrorCode(err) == suanli.ECONFLICT && strings.Contains(err.Error(), "was taken while booking it"):
		case suanli.ErrorCode(err) == suanli.ENOTFOUND && strings.Contains(err.Error(), q):
		default:
			t.Errorf("racing booking: %v, want success, a conflict or not found naming the query", err)
		}
	}
	bs, err := mk.db.FindBookings(context.Background(), sqlstore.BookingFilter{AccountID: renterID(t, mk.renter)})
	if err != nil {
		t.Fatal(err)
	}
	if booked != 1 || len(bs) != 1 || bs[0].WindowID != w.ID {
		t.Fatalf("%d racers succeeded, bookings %+v; want exactly one, of window %d", booked, bs, w.ID)
	}
	mk.checkLedger()
}
