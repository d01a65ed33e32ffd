package advisor_test

import (
	"math"
	"strings"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
)

func TestCarbonIntensityTable(t *testing.T) {
	all := advisor.GridIntensities()
	if len(all) < 40 {
		t.Fatalf("%d countries, want at least 40", len(all))
	}
	for _, g := range all {
		if g.GPerKWh <= 0 || g.GPerKWh > 1200 || g.Year < 2020 || g.Source == "" {
			t.Errorf("%+v: out of range or unsourced", g)
		}
		if _, ok := advisor.CountryLocation(g.Country); !ok {
			t.Errorf("%s has an intensity but no location", g.Country)
		}
	}
	// Ordering facts that hold in every recent Ember release: Norway,
	// Sweden and France are green; Poland, India and South Africa are
	// among the most carbon-intensive; Germany lies between.
	for _, cc := range []string{"NO", "SE", "FR", "IS"} {
		if g, ok := advisor.CarbonIntensity(cc); !ok || !advisor.IsGreen(g.GPerKWh) {
			t.Errorf("%s: %+v, want green", cc, g)
		}
	}
	de, _ := advisor.CarbonIntensity("de")
	for _, cc := range []string{"PL", "IN", "ZA"} {
		if g, _ := advisor.CarbonIntensity(cc); g.GPerKWh <= de.GPerKWh || advisor.IsGreen(g.GPerKWh) {
			t.Errorf("%s: %v g/kWh, want above Germany's %v", cc, g.GPerKWh, de.GPerKWh)
		}
	}
	if g, ok := advisor.CarbonIntensity("Quebec, CA, NA"); !ok || g.Country != "CA" {
		t.Errorf("CarbonIntensity(region string) = %+v, %v", g, ok)
	}
	if _, ok := advisor.CarbonIntensity("XX"); ok {
		t.Errorf("CarbonIntensity(XX): want unknown")
	}
	if advisor.IsGreen(0) || !advisor.IsGreen(advisor.GreenThreshold) || advisor.IsGreen(advisor.GreenThreshold+0.1) {
		t.Errorf("IsGreen boundaries wrong")
	}
}

// TestEstimateGCO2PerHour works one example by hand: 8 × H100 SXM (700 W)
// and 64 cores at full load in a Swedish data centre: (8·700 + 64·5) W ×
// 1.58 PUE = 9353.6 W; × 41 g/kWh = 383.5 g/h.
func TestEstimateGCO2PerHour(t *testing.T) {
	o := &suanli.Offer{GPUName: "NVIDIA H100 80GB HBM3", NumGPUs: 8, CPUCores: 64, Country: "SE", Datacenter: true}
	e, err := advisor.EstimateGCO2PerHour(o, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(e.Watts-9353.6) > 0.01 || math.Abs(e.GCO2PerHour-383.4976) > 0.001 || !e.Green {
		t.Errorf("full load = %+v, want 9353.6 W, 383.5 g/h, green", e)
	}
	// Idle: GPUs at 15%, cores at 30%.
	idle, _ := advisor.EstimateGCO2PerHour(o, 0)
	if want := (8*700*0.15 + 64*5*0.3) * 1.58; math.Abs(idle.Watts-want) > 0.01 {
		t.Errorf("idle = %v W, want %v", idle.Watts, want)
	}
	// Half load on a home rig in Poland, provider-declared intensity wins.
	home := &suanli.Offer{GPUName: "RTX 4090", NumGPUs: 1, CPUCores: 8, Country: "PL"}
	h, _ := advisor.EstimateGCO2PerHour(home, 0.5)
	if want := (450*(0.15+0.85*0.5) + 8*5*(0.3+0.7*0.5)) * 660 / 1000; math.Abs(h.GCO2PerHour-want) > 1e-9 || h.PUE != 1 || h.Green {
		t.Errorf("home rig = %+v, want %v g/h at PUE 1, not green", h, want)
	}
	home.CarbonIntensity = 20
	if h, _ := advisor.EstimateGCO2PerHour(home, 0.5); h.Grid.GPerKWh != 20 || !h.Green {
		t.Errorf("declared 20 g/kWh ignored: %+v", h)
	}
	// Unknown country and GPU: world average, 300 W, not green, said so.
	u, _ := advisor.EstimateGCO2PerHour(&suanli.Offer{GPUName: "Mystery 9000", NumGPUs: 1}, 1)
	if u.Grid.GPerKWh != advisor.WorldAverageGPerKWh || !u.Grid.Estimate || u.Green || u.GPUWatts != 300 || len(u.Assumptions) < 2 {
		t.Errorf("unknown = %+v", u)
	}
	for _, bad := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := advisor.EstimateGCO2PerHour(o, bad); suanli.ErrorCode(err) != suanli.EINVALID {
			t.Errorf("utilisation %v: err %v, want EINVALID", bad, err)
		}
	}
}

func TestAnnotate(t *testing.T) {
	berlin, _ := advisor.ParseLocation("52.52,13.40")
	o := &suanli.Offer{Country: "FR"}
	advisor.Annotate(o, berlin)
	if o.CarbonIntensity != 56 || !o.Green || o.LatencyMS < 10 || o.LatencyMS > 25 {
		t.Errorf("Annotate(FR offer, Berlin) = intensity %v green %v latency %v", o.CarbonIntensity, o.Green, o.LatencyMS)
	}
	// A provider's own green claim and intensity stay; no renter, no latency.
	p := &suanli.Offer{Country: "PL", Green: true, CarbonIntensity: 30}
	advisor.Annotate(p, advisor.Location{})
	if p.CarbonIntensity != 30 || !p.Green || p.LatencyMS != 0 {
		t.Errorf("Annotate(declared) = %+v", p)
	}
	q := &suanli.Offer{}
	advisor.Annotate(q, berlin)
	if q.CarbonIntensity != 0 || q.Green || q.LatencyMS != 0 {
		t.Errorf("Annotate(unknown) = intensity %v green %v latency %v, want all unknown", q.CarbonIntensity, q.Green, q.LatencyMS)
	}
}

// TestOfferCO2PerHour: the offer field is the full-load estimate at the
// offer's known intensity, and 0 (unknown) rather than a world-average
// guess when the grid is unknown. 2 × RTX 4090 (450 W) and 16 cores in
// Poland at the plug: (900 + 80) W × 660 g/kWh = 646.8 g/h.
func TestOfferCO2PerHour(t *testing.T) {
	o := &suanli.Offer{GPUName: "RTX 4090", NumGPUs: 2, CPUCores: 16, Country: "PL"}
	advisor.Annotate(o, advisor.Location{})
	if got := advisor.OfferCO2PerHour(o); got != 646.8 {
		t.Errorf("OfferCO2PerHour(2 × RTX 4090, PL) = %v, want 646.8", got)
	}
	e, _ := advisor.EstimateGCO2PerHour(o, advisor.OfferUtilisation)
	if got := advisor.OfferCO2PerHour(o); math.Abs(got-e.GCO2PerHour) > 0.05 {
		t.Errorf("OfferCO2PerHour = %v, EstimateGCO2PerHour at full load = %v", got, e.GCO2PerHour)
	}
	unknown := &suanli.Offer{GPUName: "RTX 4090", NumGPUs: 2, CPUCores: 16, Country: "XX"}
	advisor.Annotate(unknown, advisor.Location{})
	if got := advisor.OfferCO2PerHour(unknown); got != 0 {
		t.Errorf("OfferCO2PerHour(unknown grid) = %v, want 0", got)
	}
}

func TestLatencyMS(t *testing.T) {
	frankfurt, london := advisor.At(50.11, 8.68), advisor.At(51.51, -0.13)
	newYork := advisor.At(40.71, -74.01)
	// Great-circle distances: Frankfurt-London ≈ 640 km, New York-London ≈ 5570 km.
	if d := advisor.DistanceKm(frankfurt, london); math.Abs(d-638) > 10 {
		t.Errorf("Frankfurt-London = %.0f km, want ≈638", d)
	}
	if d := advisor.DistanceKm(newYork, london); math.Abs(d-5570) > 20 {
		t.Errorf("New York-London = %.0f km, want ≈5570", d)
	}
	// 5 ms + 2 × 638 km × 1.5 / 200 km/ms ≈ 14.6 ms; measured pings are 12-18 ms.
	if l := advisor.LatencyMS(frankfurt, london); math.Abs(l-14.6) > 0.3 {
		t.Errorf("LatencyMS(Frankfurt, London) = %v, want ≈14.6", l)
	}
	if l := advisor.LatencyMS(newYork, london); l < 80 || l > 95 {
		t.Errorf("LatencyMS(New York, London) = %v, want 80..95 (ping ≈75)", l)
	}
	if l := advisor.LatencyMS(london, london); l != advisor.FixedMS {
		t.Errorf("same place = %v, want %v", l, advisor.FixedMS)
	}
	if l := advisor.LatencyMS(advisor.Location{}, london); l != 0 {
		t.Errorf("unknown origin = %v, want 0", l)
	}
	// Antipodes stay finite: half the circumference, 20,015 km.
	if l := advisor.LatencyMS(advisor.At(0, 0), advisor.At(0, 180)); l < 300 || l > 310 {
		t.Errorf("antipodes = %v ms, want ≈305", l)
	}
}

func TestParseLocation(t *testing.T) {
	for _, tc := range []struct {
		in, country string
	}{
		{"DE", "DE"}, {"de", "DE"}, {"Germany", "DE"}, {"UK", "GB"}, {"Michigan, US, NA", "US"},
		{", US, NA", "US"}, {"Hafnarfjarðarkaupstaður, IS, EU", "IS"}, {"Texas, US", "US"}, {"52.52, 13.40", ""},
	} {
		l, err := advisor.ParseLocation(tc.in)
		if err != nil || !l.Known() || l.Country != tc.country {
			t.Errorf("ParseLocation(%q) = %+v, %v; want country %q", tc.in, l, err, tc.country)
		}
	}
	for _, in := range []string{"", "Atlantis", "91,0", "1,2,3", "ZZ"} {
		if _, err := advisor.ParseLocation(in); suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(err.Error(), "country code") {
			t.Errorf("ParseLocation(%q) = %v, want an EINVALID that says what works", in, err)
		}
	}
	if len(advisor.CountryCodes()) < 60 {
		t.Errorf("%d countries, want at least 60", len(advisor.CountryCodes()))
	}
	l, ok := advisor.OfferLocation(&suanli.Offer{Geolocation: "Quebec, CA"})
	if !ok || l.Country != "CA" {
		t.Errorf("OfferLocation(Quebec, CA) = %+v, %v", l, ok)
	}
}
