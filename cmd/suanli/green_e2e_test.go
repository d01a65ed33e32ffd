package main_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
)

// TestSearchShowsCO2 lists the local machine in Poland: its offer carries
// the advisor's full-load CO2 estimate, the search table shows it in a CO2
// G/H column, and co2_g_per_hour filters.
func TestSearchShowsCO2(t *testing.T) {
	m, _ := startUp(t, t.TempDir())
	out, err := m.run("search")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "CO2 G/H") {
		t.Errorf("search shows a CO2 column while no offer's grid is known:\n%s", out)
	}
	if _, err := m.run("host", "list", "1", "--country", "PL"); err != nil {
		t.Fatal(err)
	}
	var res suanli.OfferResult
	m.mustJSON(&res, "search")
	if len(res.Offers) != 1 {
		t.Fatalf("search = %+v, want the local machine", res.Offers)
	}
	o := res.Offers[0]
	if want := advisor.OfferCO2PerHour(o); o.CO2PerHour <= 0 || o.CO2PerHour != want {
		t.Fatalf("co2_g_per_hour = %v, want %v (2 × RTX 4090 in Poland)", o.CO2PerHour, want)
	}
	out, err = m.run("search")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	g := strconv.FormatFloat(o.CO2PerHour, 'f', 0, 64)
	if !strings.Contains(lines[0], "CO2 G/H") || len(lines) < 2 || !slices.Contains(strings.Fields(lines[1]), g) {
		t.Errorf("search table lacks the CO2 G/H column with %s:\n%s", g, out)
	}
	limit := strconv.FormatFloat(o.CO2PerHour+1, 'f', 0, 64)
	m.mustJSON(&res, "search", "co2_g_per_hour<"+limit)
	if len(res.Offers) != 1 {
		t.Errorf("co2_g_per_hour<%s: %d offers, want 1", limit, len(res.Offers))
	}
	m.mustJSON(&res, "search", "co2_g_per_hour<"+strconv.FormatFloat(o.CO2PerHour/2, 'f', 0, 64))
	if len(res.Offers) != 0 {
		t.Errorf("co2_g_per_hour below half its value: %d offers, want 0", len(res.Offers))
	}
	// From the renter's location, the table shows the estimated latency.
	out, err = m.run("search", "--from", "DE")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(out, "\n"); !strings.Contains(lines[0], "LATENCY") || len(lines) < 2 || !strings.Contains(lines[1], " ms") {
		t.Errorf("search --from DE lacks the LATENCY column:\n%s", out)
	}
}

// TestGreenDiscountCLI grants a 10% green discount through `host list`:
// refused while the machine's grid is unknown, accepted in Norway; the
// provider sees it in `host machines`, renters in search (the discounted
// gpu_price, the green_discount field and a GREEN OFF column) and in a
// quote's itemized line.
func TestGreenDiscountCLI(t *testing.T) {
	m, _ := startUp(t, t.TempDir())
	if _, err := m.run("host", "list", "1", "--green-discount", "10%"); err == nil || !strings.Contains(err.Error(), "green discount needs a green grid") {
		t.Fatalf("green discount without a country: %v, want refused", err)
	}
	if _, err := m.run("host", "list", "1", "--country", "NO", "--green-discount", "60"); err == nil || !strings.Contains(err.Error(), "0 to 5000 bp") {
		t.Fatalf("green discount of 60%%: %v, want refused", err)
	}
	out, err := m.run("host", "list", "1", "--country", "NO", "--green-discount", "10%")
	if err != nil {
		t.Fatal(err)
	}
	var ms []*suanli.Machine
	m.mustJSON(&ms, "host", "machines")
	if len(ms) != 1 || ms[0].Listing.GreenDiscountBP != 1000 {
		t.Fatalf("machines = %+v, want one with green_discount_bp 1000", ms)
	}
	list := ms[0].Listing.PriceGPU
	want := suanli.MulDiv(list, 9, 10)
	if !strings.Contains(out, "green discount 10% (renters pay "+want.Decimal()+"/GPU-h)") {
		t.Errorf("host list says:\n%s\nwant the discount and the price renters pay, %s", out, want.Decimal())
	}
	if out, err := m.run("host", "machines"); err != nil || !strings.Contains(out, "green discount 10%") {
		t.Errorf("host machines lacks the green discount (%v):\n%s", err, out)
	}
	var res suanli.OfferResult
	m.mustJSON(&res, "search", "green_discount>=10")
	if len(res.Offers) != 1 || res.Offers[0].GPUPrice != want || res.Offers[0].GreenDiscount != 10 || !res.Offers[0].Green {
		t.Fatalf("search green_discount>=10 = %+v, want the machine at %s/GPU-h", res.Offers, want)
	}
	if out, err := m.run("search"); err != nil || !strings.Contains(out, "GREEN OFF") || !strings.Contains(out, "10%") {
		t.Errorf("search table lacks the GREEN OFF column (%v):\n%s", err, out)
	}
	var q suanli.Quote
	m.mustJSON(&q, "quote", "1", "--gpus", "1", "--hours", "10")
	found := false
	for _, l := range q.Lines {
		if strings.HasPrefix(l.Item, "green discount") {
			found = l.Amount == 10*(list-want)
		}
	}
	if !found {
		t.Errorf("quote lines %+v, want a green discount line of %s", q.Lines, 10*(list-want))
	}
}
