package advisor_test

import (
	"strings"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
)

func money(t *testing.T, s string) suanli.Money {
	t.Helper()
	m, err := suanli.ParseMoney(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The issue's own example: --hourly 2.5 --hours 300 --instances 1
// --hardware-price 30000 --months 36 --utilization 0.5 --power-watts 700
// --kwh-price 0.15.
func TestRentVsBuyIssueExample(t *testing.T) {
	r, err := advisor.RentVsBuy(advisor.RentVsBuyInput{
		Hourly: money(t, "2.5"), Hours: 300, Instances: 1, HardwarePrice: money(t, "30000"),
		Months: 36, UtilizationBP: 5000, PowerWatts: 700, KWhPrice: money(t, "0.15"),
	})
	if err != nil {
		t.Fatal(err)
	}
	// rent total = 2.5 × 300 × 1 = 750; device cost = 30000 / (36 × 0.5)
	// = 1666.666666…; 750 > 3333.33…? no.
	if r.Rule.RentTotal != money(t, "750") || r.Rule.DeviceCost != money(t, "1666.666666") || r.Rule.ConsiderBuying {
		t.Errorf("rule = %+v, want rent 750, device cost 1666.666666, keep renting", r.Rule)
	}
	// TCO: depreciation 30000/36 = 833.333333; power 0.7 kW × 300 h × 0.15 =
	// 31.50; break-even: 30000 / (750 − 31.50) = 41.75 → month 42 > 36.
	tc := r.TCO
	if tc.Depreciation != money(t, "833.333333") || tc.PowerMonthly != money(t, "31.5") || tc.KWhMonthly != 210 {
		t.Errorf("TCO monthly = %+v", tc)
	}
	if tc.BreakEvenMonth != 42 || tc.PaysBackInLife {
		t.Errorf("break-even month %d (in life %v), want 42, false", tc.BreakEvenMonth, tc.PaysBackInLife)
	}
	if tc.RentOverLife != money(t, "27000") || tc.OwnOverLife != money(t, "31134") || tc.Savings != money(t, "-4134") {
		t.Errorf("over life: rent %s own %s savings %s, want 27000, 31134, -4134", tc.RentOverLife, tc.OwnOverLife, tc.Savings)
	}
	if !strings.HasPrefix(tc.Verdict, "Rent.") || !strings.Contains(tc.Verdict, "month 42") {
		t.Errorf("verdict %q", tc.Verdict)
	}
}

// TestRentVsBuyRuleEdge: the rule buys only when rent is strictly more
// than twice the device cost, compared exactly, not against a rounded
// device cost.
func TestRentVsBuyRuleEdge(t *testing.T) {
	for _, tc := range []struct {
		name                string
		hourly, price       string
		hours, inst, months int64
		util                int64
		wantDevice          string
		wantBuy             bool
	}{
		// device cost 36000/(36 × 100%) = 1000; rent 2 × 500 × 2 = 2000 = 2 × 1000.
		{"at exactly 2x", "2", "36000", 500, 2, 36, 10000, "1000", false},
		{"one micro-unit above", "2.000001", "36000", 500, 2, 36, 10000, "1000", true},
		// device cost 20/3 = 6.666666|67; 2× = 13.333333|3. A rule on the
		// rounded device cost (2 × 6.666666 = 13.333332) would buy at 13.333333.
		{"below the exact threshold", "13.333333", "20", 1, 1, 3, 10000, "6.666666", false},
		{"above the exact threshold", "13.333334", "20", 1, 1, 3, 10000, "6.666666", true},
		// utilisation divides: 36000/(36 × 25%) = 4000; rent 8 × 500 × 2 = 8000 is not > 8000.
		{"low utilisation raises device cost", "8", "36000", 500, 2, 36, 2500, "4000", false},
		{"low utilisation, just above", "8.000001", "36000", 500, 2, 36, 2500, "4000", true},
	} {
		r, err := advisor.RentVsBuy(advisor.RentVsBuyInput{Hourly: money(t, tc.hourly), Hours: tc.hours, Instances: tc.inst,
			HardwarePrice: money(t, tc.price), Months: tc.months, UtilizationBP: tc.util})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Rule.DeviceCost != money(t, tc.wantDevice) || r.Rule.ConsiderBuying != tc.wantBuy {
			t.Errorf("%s: device cost %s buy %v, want %s %v (%s)", tc.name, r.Rule.DeviceCost, r.Rule.ConsiderBuying, tc.wantDevice, tc.wantBuy, r.Rule.Explanation)
		}
	}
}

// TestRentVsBuyBreakEvenEdge: rent $1000/month against a $3000 purchase and
// no power pays back exactly at the end of month 3; one micro-unit more
// purchase price takes month 4.
func TestRentVsBuyBreakEvenEdge(t *testing.T) {
	for _, tc := range []struct {
		price       string
		months      int64
		watts       int64
		wantMonth   int64
		wantInLife  bool
		wantVerdict string
	}{
		{"3000", 36, 0, 3, true, "Buy."},
		{"3000.000001", 36, 0, 4, true, "Buy."},
		{"3000", 3, 0, 3, true, "Close call."},
		{"3000", 2, 0, 3, false, "Rent."},
		// 1 kW × 500 h × $2/kWh = $1000 of power: as much as the rent.
		{"3000", 36, 1000, 0, false, "Rent. Power alone"},
		// $500 of power halves the margin: 3000 / 500 = month 6.
		{"3000", 36, 500, 6, true, "Buy."},
	} {
		r, err := advisor.RentVsBuy(advisor.RentVsBuyInput{Hourly: money(t, "2"), Hours: 500, HardwarePrice: money(t, tc.price),
			Months: tc.months, PowerWatts: tc.watts, KWhPrice: money(t, "2")})
		if err != nil {
			t.Fatal(err)
		}
		if r.TCO.BreakEvenMonth != tc.wantMonth || r.TCO.PaysBackInLife != tc.wantInLife || !strings.HasPrefix(r.TCO.Verdict, tc.wantVerdict) {
			t.Errorf("price %s months %d watts %d: break-even %d in life %v verdict %q; want %d %v %q",
				tc.price, tc.months, tc.watts, r.TCO.BreakEvenMonth, r.TCO.PaysBackInLife, r.TCO.Verdict, tc.wantMonth, tc.wantInLife, tc.wantVerdict)
		}
		// Whatever the break-even month, cumulative rent reaches the
		// purchase plus power there and not a month earlier.
		if m := r.TCO.BreakEvenMonth; m > 0 {
			price := money(t, tc.price)
			margin := r.TCO.RentMonthly - r.TCO.PowerMonthly
			if suanli.Money(m)*margin < price || suanli.Money(m-1)*margin >= price {
				t.Errorf("price %s: month %d is not the first month that pays back", tc.price, m)
			}
		}
	}
}

func TestRentVsBuyDefaultsAndErrors(t *testing.T) {
	r, err := advisor.RentVsBuy(advisor.RentVsBuyInput{Hourly: money(t, "1"), Hours: 365, HardwarePrice: money(t, "10000")})
	if err != nil {
		t.Fatal(err)
	}
	if r.Input.Months != 36 || r.Input.Instances != 1 || r.Input.UtilizationBP != 5000 || r.TCO.UtilizationNote == "" {
		t.Errorf("defaults = %+v, want 36 months, 1 instance, 365/730 = 50%% with a note", r.Input)
	}
	for _, in := range []advisor.RentVsBuyInput{
		{Hours: 1, HardwarePrice: 1},
		{Hourly: 1, Hours: 0, HardwarePrice: 1},
		{Hourly: 1, Hours: 745, HardwarePrice: 1},
		{Hourly: 1, Hours: 1},
		{Hourly: 1, Hours: 1, HardwarePrice: 1, UtilizationBP: 10001},
		{Hourly: 1, Hours: 1, HardwarePrice: 1, Months: -1},
		{Hourly: 1, Hours: 1, HardwarePrice: 1, PowerWatts: -5},
		{Hourly: suanli.Money(1 << 62), Hours: 744, Instances: 1000, HardwarePrice: 1},
	} {
		if _, err := advisor.RentVsBuy(in); suanli.ErrorCode(err) != suanli.EINVALID {
			t.Errorf("RentVsBuy(%+v) = %v, want EINVALID", in, err)
		}
	}
}

func TestParseBP(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{{"0.5", 5000}, {"50%", 5000}, {"12.5%", 1250}, {"1", 10000}, {"0.0001", 1}, {".25", 2500}, {"100%", 10000}} {
		if got, err := advisor.ParseBP(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseBP(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "abc", "-0.5", "0.00005", "$0.5", "%"} {
		if _, err := advisor.ParseBP(in); err == nil {
			t.Errorf("ParseBP(%q): want an error", in)
		}
	}
	if got := advisor.FormatBP(1250); got != "12.5%" {
		t.Errorf("FormatBP(1250) = %q", got)
	}
	if got := advisor.FormatBP(-5000); got != "-50%" {
		t.Errorf("FormatBP(-5000) = %q", got)
	}
}
