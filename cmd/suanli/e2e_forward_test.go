package main_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
)

// TestBookingEndToEnd books a window a few seconds ahead through the real
// binary with the process runtime: the instance starts on time by itself,
// stops at the end, and the renter pays exactly the locked price although
// the listing's price changed in between.
func TestBookingEndToEnd(t *testing.T) {
	home := t.TempDir()
	m, _ := startUp(t, home)
	if _, err := m.run("host", "list", "1", "--price-gpu", "1.00"); err != nil {
		t.Fatal(err)
	}
	var w suanli.Window
	m.mustJSON(&w, "host", "offer-window", "1", "--gpus", "1", "--start", "+4s", "--end", "+1h", "--price", "2.00", "--cancel-before", "0s")
	var found []*suanli.Window
	m.mustJSON(&found, "windows", "search", "gpu_name=RTX_4090 hours>=0 start>=2020-01-01T00:00Z")
	if len(found) != 1 || found[0].ID != w.ID {
		t.Fatalf("windows search found %+v, want window %d", found, w.ID)
	}
	var b suanli.Booking
	m.mustJSON(&b, "book", fmt.Sprint(w.ID), "--duration", "6s", "--gpus", "1", "--image", "busybox", "--", "sh", "-c", "echo booked; sleep 600")
	locked := suanli.BookingCost(suanli.Dollars(2), 1, 6*time.Second)
	if b.Cost != locked || b.Status != suanli.BookingBooked {
		t.Fatalf("booking: %+v, want cost %s", b, locked)
	}
	// The provider raises the price: the booking keeps its own.
	if _, err := m.run("host", "list", "1", "--price-gpu", "9.00"); err != nil {
		t.Fatal(err)
	}
	if out, err := m.run("host", "calendar", "1"); err != nil {
		t.Fatalf("calendar: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	// The booking runs for 6 s: under load a poll may miss the instance's
	// running spell, so that it ran is proven by its start time and log.
	for b.Status != suanli.BookingCompleted && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		m.mustJSON(&b, "bookings", "show", fmt.Sprint(b.ID))
	}
	if b.Status != suanli.BookingCompleted || b.StartedAt == nil {
		t.Fatalf("booking after its end: %+v", b)
	}
	if late := b.StartedAt.Sub(b.Start); late < 0 || late > 3*time.Second {
		t.Errorf("booking started %s after its start, want within 3s", late)
	}
	waitStatus(t, m, fmt.Sprint(b.InstanceID), suanli.StatusStopped, 15*time.Second)
	waitLog(t, m, fmt.Sprint(b.InstanceID), "booked", 1)
	var charges suanli.ChargeSummary
	m.mustJSON(&charges, "billing", "charges", "--instance", fmt.Sprint(b.InstanceID))
	if charges.Total != locked || b.Paid != locked {
		t.Errorf("renter paid %s (booking says %s), want exactly the locked %s: %+v", charges.Total, b.Paid, locked, charges.ByKind)
	}
	t.Logf("booking %d: started %s after its start, paid %s", b.ID, b.StartedAt.Sub(b.Start), charges.Total)
	m.stop()
}

// TestBookByQueryCLI books through the real binary by a window query: the
// cheapest matching window is booked, `bookings show` says why, and a
// query nothing matches fails saying what to change.
func TestBookByQueryCLI(t *testing.T) {
	home := t.TempDir()
	m, _ := startUp(t, home)
	if _, err := m.run("host", "list", "1", "--price-gpu", "1.00"); err != nil {
		t.Fatal(err)
	}
	var dear, cheap suanli.Window
	m.mustJSON(&dear, "host", "offer-window", "1", "--gpus", "1", "--start", "+1h", "--end", "+11h", "--price", "3.00")
	m.mustJSON(&cheap, "host", "offer-window", "1", "--gpus", "1", "--start", "+2h", "--end", "+12h", "--price", "2.00")
	var b suanli.Booking
	m.mustJSON(&b, "book", "gpu_name=RTX_4090 hours>=8", "--hours", "2", "--gpus", "1", "--image", "busybox", "--", "true")
	if b.WindowID != cheap.ID || b.PriceGPU != suanli.Dollars(2) || b.Cost != suanli.Dollars(4) {
		t.Fatalf("booked %+v, want window %d at 2.00/GPU-h for 2 h", b, cheap.ID)
	}
	out, err := m.run("bookings", "show", fmt.Sprint(b.ID))
	if err != nil || !strings.Contains(out, "booked by query") || !strings.Contains(out, fmt.Sprintf("window %d", cheap.ID)) {
		t.Errorf("bookings show: %v\n%s", err, out)
	}
	out, err = m.run("book", "gpu_name=H100 hours>=8", "--hours", "2", "--image", "busybox")
	if err == nil || !strings.Contains(err.Error(), "loosen the query") {
		t.Errorf("book a query nothing matches: %v\n%s", err, out)
	}
	if out, err := m.run("book", "--help"); err != nil || !strings.Contains(out, "suanli book 'gpu_name=RTX_4090") {
		t.Errorf("book --help has no query example: %v\n%s", err, out)
	}
	m.stop()
}
