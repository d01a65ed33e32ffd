package sched

import (
	"fmt"
	"time"
)

// Hold is a booking's claim on a host's GPUs for a span of time (the
// forward market): GPUs from Start to End (unix microseconds). Until its
// start it holds nothing now, but a firm rental (on-demand, reserved),
// which never ends by itself, must leave room for it; interruptible
// rentals may use the GPUs until the start, when the booking's launch
// preempts them with notice. Once launched, the booking's instance is a
// firm claim (InstanceID) that this hold stands for in time.
type Hold struct {
	BookingID  int64
	InstanceID int64 // the launched instance; 0 before the start
	Units      int
	Start, End int64
}

// peakHolds is the most units h's holds take at one moment within
// [from, to) (to 0: open-ended), leaving out booking except.
func peakHolds(h *Host, from, to int64, except int64) (peak int, first *Hold) {
	points := []int64{from}
	for i := range h.Holds {
		s := h.Holds[i].Start
		if s > from && (to == 0 || s < to) {
			points = append(points, s)
		}
	}
	for _, p := range points {
		n := 0
		var f *Hold
		for i := range h.Holds {
			x := &h.Holds[i]
			if x.BookingID == except || x.Start > p || x.End <= p {
				continue
			}
			n += x.Units
			if f == nil || x.Start < f.Start {
				f = x
			}
		}
		if n > peak {
			peak, first = n, f
		}
	}
	return peak, first
}

// firmOpen is the units held by firm claims that are not a booking's
// launched instance: rentals with no end, which a booking must not overlap.
func firmOpen(h *Host) int {
	n := 0
	for i := range h.Claims {
		c := &h.Claims[i]
		if c.Class != ClassFirm || c.State == Draining {
			continue
		}
		launched := false
		for j := range h.Holds {
			launched = launched || (h.Holds[j].InstanceID == c.ID && c.ID != 0)
		}
		if !launched {
			n += c.Units
		}
	}
	return n
}

// holdsWhy says why a firm request of units on h, from r.At for as long as
// r.Until (0: open-ended), would overlap bookings; "" when it would not.
func holdsWhy(h *Host, r *Request, units int) string {
	if len(h.Holds) == 0 || ClassOf(r.RentalType) != ClassFirm || !h.IsGPU() {
		return ""
	}
	peak, first := peakHolds(h, r.At, r.Until, r.BookingID)
	if peak == 0 {
		return ""
	}
	firm := firmOpen(h)
	if firm+units+peak <= len(h.GPUIndex) {
		return ""
	}
	return fmt.Sprintf("offer %d: %d of its %d GPUs are booked from %s (booking %d) and %d are rented: a rental of %d now would overlap the booking; rent interruptible (it runs until the booking starts) or fewer GPUs",
		h.ID, peak, len(h.GPUIndex), time.UnixMicro(first.Start).UTC().Format(time.RFC3339), first.BookingID, firm, units)
}

// BookingFits says why a booking of units GPUs from start to end (unix
// microseconds) does not fit on h beside its firm rentals (which have no
// end) and its other bookings; "" when it fits. Interruptible rentals do
// not count: they are preempted at the start.
func BookingFits(h *Host, units int, start, end int64) string {
	if !h.IsGPU() {
		return fmt.Sprintf("offer %d is CPU-only: windows are of GPUs", h.ID)
	}
	peak, _ := peakHolds(h, start, end, 0)
	firm := firmOpen(h)
	if firm+peak+units > len(h.GPUIndex) {
		return fmt.Sprintf("offer %d has %d GPUs: %d are rented on-demand with no end and %d are booked then, you asked for %d",
			h.ID, len(h.GPUIndex), firm, peak, units)
	}
	return ""
}
