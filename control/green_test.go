package control_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
)

// TestGreenDiscount lists a machine in Norway (a green grid) with a 12.5%
// green discount at an odd price: the offer, its query field, the quote and
// an hour of billing all use the discounted rate, exact to the micro-unit.
// A machine whose grid is not green (or unknown) cannot grant one.
func TestGreenDiscount(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(2, 333_333, 100_000, 30)
	ptr := func(v int64) *int64 { return &v }
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		u    suanli.ListingUpdate
		want string
	}{
		{suanli.ListingUpdate{GreenDiscountBP: ptr(1000)}, "country is not set"},
		{suanli.ListingUpdate{GreenDiscountBP: ptr(1000), Country: str("DE")}, "DE) emits 380 gCO2/kWh"},
		{suanli.ListingUpdate{GreenDiscountBP: ptr(5001), Country: str("NO")}, "0 to 5000 bp"},
		{suanli.ListingUpdate{GreenDiscountBP: ptr(-1), Country: str("NO")}, "0 to 5000 bp"},
	} {
		_, err := mk.svc.ListMachine(mk.host, m, tc.u)
		if suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ListMachine(green %d bp, country %v) = %v, want invalid saying %q", *tc.u.GreenDiscountBP, tc.u.Country, err, tc.want)
		}
	}
	out, err := mk.svc.ListMachine(mk.host, m, suanli.ListingUpdate{GreenDiscountBP: ptr(1250), Country: str("NO")})
	if err != nil {
		t.Fatal(err)
	}
	if out.Listing.GreenDiscountBP != 1250 || out.Listing.PriceGPU != 333_333 {
		t.Errorf("stored listing: %d bp at %s/GPU-h, want 1250 bp at the list price $0.333333", out.Listing.GreenDiscountBP, out.Listing.PriceGPU)
	}

	// $0.333333 × 87.5% = $0.291666375, rounded down in the renter's favour.
	const rate = suanli.Money(291_666)
	o, err := mk.svc.FindOfferByID(mk.renter, m)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Green || o.GreenDiscount != 12.5 || o.GPUPrice != rate || o.DPHBase != 2*rate || o.MinBid != 2*87_500 {
		t.Errorf("offer: green %v, discount %v%%, gpu_price %s, dph_base %s, min_bid %s; want true, 12.5, %s, %s, $0.175",
			o.Green, o.GreenDiscount, o.GPUPrice, o.DPHBase, o.MinBid, rate, 2*rate)
	}
	for q, want := range map[string]int{"green_discount>=12.5": 1, "green_discount>12.5": 0, "gpu_price<0.3": 1} {
		res, err := mk.svc.SearchOffers(mk.renter, suanli.OfferQuery{Query: q})
		if err != nil || len(res.Offers) != want {
			t.Errorf("search %q: %v offers (%v), want %d", q, res, err, want)
		}
	}

	quote, err := mk.svc.Quote(mk.renter, suanli.QuoteRequest{InstanceCreate: suanli.InstanceCreate{OfferID: m, GPUCount: 1, DiskGB: 10}, Hours: 10})
	if err != nil {
		t.Fatal(err)
	}
	var compute, discount *suanli.QuoteLine
	for i, l := range quote.Lines {
		switch {
		case strings.HasPrefix(l.Item, "compute"):
			compute = &quote.Lines[i]
		case strings.HasPrefix(l.Item, "green discount"):
			discount = &quote.Lines[i]
		}
	}
	if compute == nil || compute.Amount != 10*rate {
		t.Errorf("quote compute line %+v, want 10 h × %s = %s", compute, rate, 10*rate)
	}
	// 10 h at the list price $3.33333 less 10 h discounted $2.91666.
	if discount == nil || discount.Amount != 416_670 || !strings.Contains(discount.Quantity, "12.50%") || !strings.Contains(discount.Rate, "NO, 30 gCO2/kWh") {
		t.Errorf("quote green discount line %+v, want $0.41667 for 12.50%% on NO's grid", discount)
	}

	in := mk.mustCreate(m, 1, 0)
	if in.Rates.ComputePerHour != rate || in.Rates.GreenDiscountBP != 1250 {
		t.Errorf("locked rates %s/h with %d bp, want %s/h with 1250 bp", in.Rates.ComputePerHour, in.Rates.GreenDiscountBP, rate)
	}
	mk.advance(time.Second)
	mk.wantStatus(in.ID, suanli.StatusRunning)
	ctx := context.Background()
	charged := func() suanli.Money {
		t.Helper()
		if _, err := mk.db.Settle(ctx, mk.now); err != nil {
			t.Fatal(err)
		}
		sum, err := mk.db.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &in.ID})
		if err != nil {
			t.Fatal(err)
		}
		return sum.ByKind[suanli.MeterCompute]
	}
	before := charged()
	mk.now = mk.now.Add(time.Hour)
	mk.agents[m].sync()
	if got := charged() - before; got != rate {
		t.Errorf("an hour of compute billed %s, want the discounted %s", got, rate)
	}

	// An interruptible rental pays its bid; the floor it must clear is the
	// discounted minimum bid, and its rates record no discount.
	if _, err := mk.create(m, 1, 87_499); suanli.ErrorCode(err) != suanli.EINVALID {
		t.Errorf("bid below the discounted minimum: %v", err)
	}
	bid := mk.mustCreate(m, 1, 87_500)
	if bid.Rates.ComputePerHour != 87_500 || bid.Rates.GreenDiscountBP != 0 {
		t.Errorf("bid rates %s/h with %d bp, want $0.0875/h and none", bid.Rates.ComputePerHour, bid.Rates.GreenDiscountBP)
	}

	// Moving the machine to a coal-heavy grid with the discount in place is
	// refused; dropping the discount restores the list price.
	if _, err := mk.svc.ListMachine(mk.host, m, suanli.ListingUpdate{Country: str("PL")}); suanli.ErrorCode(err) != suanli.EINVALID {
		t.Errorf("moving to PL with a green discount: %v", err)
	}
	if _, err := mk.svc.ListMachine(mk.host, m, suanli.ListingUpdate{GreenDiscountBP: ptr(0)}); err != nil {
		t.Fatal(err)
	}
	if o, err := mk.svc.FindOfferByID(mk.renter, m); err != nil || o.GPUPrice != 333_333 || o.GreenDiscount != 0 {
		t.Errorf("after clearing: %+v %v", o, err)
	}
}
