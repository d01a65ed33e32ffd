package suanli_test

import (
	"testing"
	"time"

	"github.com/suanli/suanli"
)

func TestReserveDiscountBP(t *testing.T) {
	l := suanli.Listing{ReserveDiscounts: []suanli.ReserveDiscount{{MinDays: 30, DiscountBP: 2500}, {MinDays: 7, DiscountBP: 1000}, {MinDays: 90, DiscountBP: 4000}},
		ReserveMaxDiscountBP: 3000}
	for _, tc := range []struct {
		days int
		bp   int64
		ok   bool
	}{{3, 0, false}, {7, 1000, true}, {29, 1000, true}, {30, 2500, true}, {120, 3000, true}} {
		bp, ok := l.ReserveDiscountBP(tc.days)
		if bp != tc.bp || ok != tc.ok {
			t.Errorf("ReserveDiscountBP(%d) = %d, %v; want %d, %v", tc.days, bp, ok, tc.bp, tc.ok)
		}
	}
	if _, ok := (&suanli.Listing{}).ReserveDiscountBP(30); ok {
		t.Error("a listing without a schedule takes no reservation")
	}
}

func TestReservationRefund(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := suanli.NewReservation(400_000, 30, 2000, start) // $288 list, $230.40 prepaid
	r.CancelFeeBP = 500
	if r.ListPrice != suanli.Dollars(288) || r.Prepaid != 230_400_000 || !r.End.Equal(start.Add(30*24*time.Hour)) {
		t.Fatalf("NewReservation = %+v", r)
	}
	for _, tc := range []struct {
		at     time.Duration
		refund suanli.Money
	}{
		{0, 230_400_000 - 11_520_000},      // nothing used: all back but the 5% fee
		{10 * 24 * time.Hour, 126_720_000}, // the worked example in the docs
		{30 * 24 * time.Hour, 0},
		{40 * 24 * time.Hour, 0},
		{-time.Hour, 230_400_000 - 11_520_000},
	} {
		rf := r.RefundAt(start.Add(tc.at))
		if rf.Refund != tc.refund {
			t.Errorf("RefundAt(+%s) = %+v, want refund %s", tc.at, rf, tc.refund)
		}
	}
	// Over any time used, the renter pays at most the list price of the time
	// used plus the fee, never more, and the parts add up.
	for h := int64(0); h <= 720; h += 7 {
		rf := r.RefundAt(start.Add(time.Duration(h) * time.Hour))
		paid := r.Prepaid - rf.Refund
		usedList := suanli.MulDiv(r.ListPrice, h, 720)
		if rf.Refund > 0 && paid != usedList+rf.Fee {
			t.Errorf("after %d h: paid %s, want used list %s + fee %s", h, paid, usedList, rf.Fee)
		}
		if rf.Refund < 0 || rf.Refund > r.Prepaid {
			t.Errorf("after %d h: refund %s out of [0, %s]", h, rf.Refund, r.Prepaid)
		}
	}
}
