package market_test

import (
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/market"
)

func TestPriceModels(t *testing.T) {
	got, err := market.PriceModels("gpu_name in [H100,A100_80GB]")
	if err != nil || len(got) != 2 || got[0] != "H100" || got[1] != "A100 80GB" {
		t.Errorf("PriceModels = %v, %v", got, err)
	}
	for _, q := range []string{"", "num_gpus=2", "gpu_name!=H100"} {
		if _, err := market.PriceModels(q); suanli.ErrorCode(err) != suanli.EINVALID {
			t.Errorf("PriceModels(%q) = %v, want invalid", q, err)
		}
	}
}

func TestPrices(t *testing.T) {
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	until := since.Add(4 * time.Hour)
	var points []suanli.PricePoint
	for i := 1; i <= 10; i++ { // listed $0.10 … $1.00, all in the first hour
		points = append(points, suanli.PricePoint{At: since.Add(time.Duration(i) * time.Minute), Kind: suanli.PriceListed, Price: suanli.Money(i * 100_000)})
	}
	points = append(points, suanli.PricePoint{At: since.Add(3 * time.Hour), Kind: suanli.PriceBid, Price: 250_000})
	fills := []suanli.FillSample{
		{At: since.Add(time.Hour), GPUName: "H100", Listed: 8, Rented: 4},
		{At: since.Add(time.Hour), GPUName: "H100 SXM", Listed: 8, Rented: 8}, // same moment: adds up to 12/16
		{At: since.Add(2 * time.Hour), Listed: 4, Rented: 1},
	}
	st := market.Prices([]string{"H100"}, points, fills, []time.Time{since.Add(3*time.Hour + time.Minute)}, since, until, 4)
	if st.Listed != (suanli.PriceSummary{Count: 10, Floor: 100_000, Median: 500_000, P90: 900_000}) {
		t.Errorf("listed %+v", st.Listed)
	}
	if st.Bids.Count != 1 || st.Bids.Median != 250_000 {
		t.Errorf("bids %+v", st.Bids)
	}
	if want := (0.75 + 0.25) / 2; st.FillRate != want {
		t.Errorf("fill %v, want %v", st.FillRate, want)
	}
	if len(st.Series) != 4 || st.Series[0].Listed != 500_000 || st.Series[3].Bid != 250_000 || st.Series[1].FillRate != 0.75 ||
		st.Series[0].FillRate != -1 || st.Series[3].Preempted != 1 {
		t.Errorf("series %+v", st.Series)
	}
}

func TestCheapHour(t *testing.T) {
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	listed := func(hour int, price suanli.Money) suanli.PricePoint {
		return suanli.PricePoint{At: day.Add(time.Duration(hour) * time.Hour), GPUName: "RTX 4090", Kind: suanli.PriceListed, Price: price}
	}
	history := []suanli.PricePoint{
		listed(2, 400_000), listed(2+24, 500_000), listed(2+48, 450_000), // 02:00 UTC: median 0.45
		listed(14, 1_000_000), listed(14+24, 900_000), // 14:00 UTC: median 0.90
		{At: day.Add(3 * time.Hour), Kind: suanli.PriceBid, Price: 10_000}, // bids do not count
	}
	now := day.Add(5*24*time.Hour + 10*time.Hour) // 10:00 UTC
	tests := []struct {
		name      string
		latest    time.Time
		wantAt    time.Time
		wantPrice suanli.Money
		wantOK    bool
	}{
		{"the night is before the deadline", now.Add(20 * time.Hour), now.Add(16 * time.Hour), 450_000, true},
		{"only the afternoon is", now.Add(6 * time.Hour), now.Add(4 * time.Hour), 900_000, true},
		{"no sampled hour is", now.Add(2 * time.Hour), time.Time{}, 0, false},
	}
	for _, tt := range tests {
		at, price, ok := market.CheapHour(history, now, tt.latest)
		if !at.Equal(tt.wantAt) || price != tt.wantPrice || ok != tt.wantOK {
			t.Errorf("%s: CheapHour = %v, %s, %v; want %v, %s, %v", tt.name, at, price, ok, tt.wantAt, tt.wantPrice, tt.wantOK)
		}
	}
}
