package sched_test

import (
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sched"
)

func TestHoldsKeepFirmRentalsOff(t *testing.T) {
	h := &sched.Host{ID: 1, GPUName: "H100", GPUIndex: []int{0, 1, 2, 3}, CPUCores: 32, RAMMB: 1 << 17, Status: suanli.MachineOnline,
		Listing: suanli.Listing{Listed: true, PriceGPU: suanli.Dollars(2)},
		Holds:   []sched.Hold{{BookingID: 7, Units: 3, Start: 1_000, End: 2_000}}}
	snap := &sched.Snapshot{Hosts: []*sched.Host{h}}
	tests := []struct {
		name  string
		req   sched.Request
		place bool
	}{
		{"on-demand that fits beside the booking", sched.Request{GPUCount: 1, At: 10}, true},
		{"on-demand that would overlap it", sched.Request{GPUCount: 2, At: 10}, false},
		{"on-demand after the booking ended", sched.Request{GPUCount: 4, At: 2_000}, true},
		{"interruptible runs until the start", sched.Request{GPUCount: 4, At: 10, RentalType: suanli.RentalInterruptible, Bid: suanli.Dollars(4)}, true},
		{"the booking's own launch", sched.Request{GPUCount: 3, At: 1_000, Until: 2_000, RentalType: suanli.RentalBooked, BookingID: 7}, true},
	}
	for _, tt := range tests {
		res := sched.Schedule(snap, tt.req)
		if got := len(res.Placements) == 1; got != tt.place {
			t.Errorf("%s: placed = %v, want %v (%s)", tt.name, got, tt.place, res.Why(0))
		}
	}
	if why := sched.BookingFits(h, 2, 1_500, 3_000); why == "" {
		t.Errorf("BookingFits(2 GPUs over a 3-GPU booking) = ok, want a reason")
	}
	if why := sched.BookingFits(h, 1, 1_500, 3_000); why != "" {
		t.Errorf("BookingFits(1 GPU) = %q, want ok", why)
	}
	h.Claims = []sched.Claim{{ID: 9, Class: sched.ClassFirm, Units: 1, State: sched.Owner, GPUs: 1}}
	if why := sched.BookingFits(h, 1, 1_500, 3_000); why == "" {
		t.Errorf("BookingFits beside an open-ended on-demand rental = ok, want a reason")
	}
}
