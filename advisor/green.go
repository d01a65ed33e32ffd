package advisor

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/suanli/suanli"
)

// GreenThreshold is the grid carbon intensity at or below which an offer
// counts as green, in gCO2 per kWh: about what hydro-, nuclear- and
// wind-dominated grids (Norway, Sweden, France, Iceland, Switzerland)
// achieve, and a fifth of the world average.
const GreenThreshold = 100.0

// WorldAverageGPerKWh is the world's average carbon intensity of electricity
// generation (Ember, Global Electricity Review 2024, for 2023: ≈480 g/kWh),
// used when an offer's grid is unknown.
const WorldAverageGPerKWh = 480.0

// GridIntensity is the carbon intensity of a country's electricity
// generation in gCO2 per kWh, with its source and year.
type GridIntensity struct {
	Country  string  `json:"country"` // ISO 3166 alpha-2
	GPerKWh  float64 `json:"g_per_kwh"`
	Year     int     `json:"year"`
	Source   string  `json:"source"`
	Estimate bool    `json:"estimate,omitempty"` // not from the table (world average)
}

const srcEmber = "Ember, Yearly electricity data (ember-energy.org/data/yearly-electricity-data), carbon intensity of generation, rounded"

// gridIntensity holds Ember's generation-based figures for 2023, rounded to
// two significant figures. They were written from the published data set,
// not downloaded at build time: refresh them from the source when precision
// matters. Life-cycle (LCA) factors are higher for fossil-heavy grids.
var gridIntensity = map[string]float64{
	// Europe
	"AT": 110, "BE": 120, "BG": 340, "CH": 45, "CY": 600, "CZ": 450, "DE": 380, "DK": 150, "EE": 420,
	"ES": 170, "FI": 80, "FR": 56, "GB": 240, "GR": 340, "HR": 200, "HU": 200, "IE": 280, "IS": 28,
	"IT": 330, "LT": 160, "LU": 100, "LV": 120, "NL": 270, "NO": 30, "PL": 660, "PT": 140, "RO": 240,
	"RS": 600, "SE": 41, "SI": 230, "SK": 120, "TR": 410, "UA": 260, "RU": 440,
	// Americas
	"AR": 350, "BR": 98, "CA": 170, "CL": 290, "CO": 190, "CR": 40, "MX": 420, "PE": 240, "PY": 25,
	"US": 370, "UY": 80,
	// Asia and the Middle East
	"AE": 490, "BD": 670, "CN": 580, "HK": 640, "ID": 680, "IL": 500, "IN": 710, "JP": 490, "KR": 430,
	"KZ": 820, "MY": 610, "PH": 610, "PK": 440, "QA": 490, "SA": 570, "SG": 470, "TH": 500, "TW": 560,
	"VN": 480,
	// Oceania and Africa
	"AU": 550, "NZ": 110, "EG": 470, "ET": 25, "KE": 80, "MA": 630, "NG": 400, "ZA": 710,
}

// CarbonIntensity returns the grid carbon intensity for a country code
// (ISO alpha-2, any case) or a region string that ends in one ("Quebec, CA,
// NA"). ok is false when the table has no figure; callers then leave
// Offer.CarbonIntensity at 0 ("unknown").
func CarbonIntensity(country string) (GridIntensity, bool) {
	cc := strings.ToUpper(strings.TrimSpace(country))
	if a, ok := countryAliases[cc]; ok {
		cc = a
	}
	if _, ok := gridIntensity[cc]; !ok {
		cc = countryFromRegion(country)
	}
	g, ok := gridIntensity[cc]
	if !ok {
		return GridIntensity{}, false
	}
	return GridIntensity{Country: cc, GPerKWh: g, Year: 2023, Source: srcEmber}, true
}

// GridIntensities returns the whole table, sorted by country code.
func GridIntensities() []GridIntensity {
	out := make([]GridIntensity, 0, len(gridIntensity))
	for cc, g := range gridIntensity {
		out = append(out, GridIntensity{Country: cc, GPerKWh: g, Year: 2023, Source: srcEmber})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Country < out[j].Country })
	return out
}

// IsGreen reports whether a grid intensity is known (> 0) and at most
// GreenThreshold.
func IsGreen(gPerKWh float64) bool { return gPerKWh > 0 && gPerKWh <= GreenThreshold }

// Power model constants: a GPU idles at about 15% of its board power;
// a CPU core with its share of memory and board draws about 5 W at full
// load (a 64-core EPYC: 280 W TDP plus DIMMs) and 30% of that idle; data
// centres add cooling and power conversion (PUE), 1.58 on average (Uptime
// Institute Global Data Center Survey 2023). Machines outside data centres
// are counted at their plug (PUE 1).
const (
	GPUIdleFraction   = 0.15
	WattsPerCore      = 5.0
	CPUIdleFraction   = 0.30
	DatacenterPUE     = 1.58
	UnknownGPUWatts   = 300
	unknownGPUWarning = "GPU model not in the table: 300 W assumed"
)

// Emission is an offer's estimated power draw and CO2 emissions per hour.
type Emission struct {
	GPUWatts    float64       `json:"gpu_watts"`
	CPUWatts    float64       `json:"cpu_watts"`
	PUE         float64       `json:"pue"`
	Watts       float64       `json:"watts"` // at the wall, PUE included
	Grid        GridIntensity `json:"grid"`
	GCO2PerHour float64       `json:"gco2_per_hour"`
	Green       bool          `json:"green"`
	Assumptions []string      `json:"assumptions"`
	Utilisation float64       `json:"utilisation"`
}

// EstimateGCO2PerHour estimates what one hour of an offer emits at a
// utilisation between 0 and 1: the GPUs' board power (from the GPU table,
// by the offer's gpu_name) and the offer's CPU cores, each idling at a
// fraction of full load and rising linearly, times the data centre's PUE,
// times the grid's carbon intensity (the offer's carbon_intensity when set,
// else its country's, else the world average). EINVALID for a utilisation
// outside [0, 1].
func EstimateGCO2PerHour(o *suanli.Offer, utilisation float64) (Emission, error) {
	if math.IsNaN(utilisation) || utilisation < 0 || utilisation > 1 {
		return Emission{}, suanli.FieldErrorf("utilisation", "%v: give a share between 0 and 1", utilisation)
	}
	e := Emission{Utilisation: utilisation, PUE: 1}
	note := func(f string, a ...any) { e.Assumptions = append(e.Assumptions, fmt.Sprintf(f, a...)) }
	if o.NumGPUs > 0 {
		w := float64(UnknownGPUWatts)
		if s, ok := LookupGPU(NormalizeGPU(o.GPUName, o.GPURAM)); ok {
			w = float64(s.Watts)
			note("%s: %d W board power (%s)", s.Key, s.Watts, s.Source)
		} else {
			note("%s", unknownGPUWarning)
		}
		e.GPUWatts = float64(o.NumGPUs) * w * (GPUIdleFraction + (1-GPUIdleFraction)*utilisation)
	}
	e.CPUWatts = float64(o.CPUCores) * WattsPerCore * (CPUIdleFraction + (1-CPUIdleFraction)*utilisation)
	if o.Datacenter {
		e.PUE = DatacenterPUE
		note("data centre PUE %.2f (Uptime Institute 2023 average)", DatacenterPUE)
	}
	e.Watts = (e.GPUWatts + e.CPUWatts) * e.PUE
	switch g, ok := CarbonIntensity(o.Country); {
	case o.CarbonIntensity > 0:
		e.Grid = GridIntensity{Country: o.Country, GPerKWh: o.CarbonIntensity, Source: "offer's carbon_intensity"}
	case ok:
		e.Grid = g
	default:
		e.Grid = GridIntensity{Country: o.Country, GPerKWh: WorldAverageGPerKWh, Year: 2023, Estimate: true,
			Source: "world average (Ember Global Electricity Review 2024): the offer's country is unknown"}
		note("grid unknown: world average %.0f g/kWh", WorldAverageGPerKWh)
	}
	e.GCO2PerHour = e.Watts / 1000 * e.Grid.GPerKWh
	e.Green = !e.Grid.Estimate && IsGreen(e.Grid.GPerKWh)
	return e, nil
}

// OfferUtilisation is the load Offer.CO2PerHour assumes: full. A rented GPU
// runs the renter's job, and the figure is then what the offer emits at
// most, the fair number to compare offers by.
const OfferUtilisation = 1.0

// OfferCO2PerHour is the value of Offer.CO2PerHour: EstimateGCO2PerHour at
// OfferUtilisation, or 0 when the offer's CarbonIntensity is unknown (0)
// rather than the world-average guess, so that a filter or an order on it
// compares only hosts whose grid is known. Call it after Annotate, which
// fills CarbonIntensity from the country.
func OfferCO2PerHour(o *suanli.Offer) float64 {
	if o.CarbonIntensity <= 0 {
		return 0
	}
	e, err := EstimateGCO2PerHour(o, OfferUtilisation)
	if err != nil { // cannot happen: OfferUtilisation is within [0, 1]
		return 0
	}
	return math.Round(e.GCO2PerHour*10) / 10
}

// Annotate fills the advisor's fields of an offer for the control plane:
// CarbonIntensity from the offer's country when it is 0, Green when that
// intensity is at most GreenThreshold (a provider's own green claim is
// kept), and LatencyMS estimated from the renter's location when renter is
// known and so is the offer's location (latency belongs to one renter, so
// the field is overwritten; pass the zero Location to leave it).
func Annotate(o *suanli.Offer, renter Location) {
	if o.CarbonIntensity == 0 {
		if g, ok := CarbonIntensity(o.Country); ok {
			o.CarbonIntensity = g.GPerKWh
		}
	}
	o.Green = o.Green || IsGreen(o.CarbonIntensity)
	if renter.Known() {
		if at, ok := OfferLocation(o); ok {
			o.LatencyMS = LatencyMS(renter, at)
		}
	}
}
