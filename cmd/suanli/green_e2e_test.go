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
}
