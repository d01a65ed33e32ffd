package advisor

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

// Location is a point a renter or a host is at. Country is the ISO 3166
// alpha-2 code when known. The zero value is "unknown" (check Known).
type Location struct {
	Lat     float64 `json:"lat"`
	Lon     float64 `json:"lon"`
	Country string  `json:"country,omitempty"`
	Label   string  `json:"label,omitempty"`
	known   bool
}

// Known reports whether l holds a position.
func (l Location) Known() bool { return l.known }

// At returns a known Location at lat, lon.
func At(lat, lon float64) Location { return Location{Lat: lat, Lon: lon, known: true} }

// Latency model constants: light in optical fibre covers about 200 km per
// millisecond (refractive index ≈ 1.47); cables run about 1.5× the
// great-circle distance; switching, queuing and last-mile links add a few
// milliseconds. Latency is a round trip, as ping measures it.
const (
	FibreKmPerMS = 200.0
	RouteFactor  = 1.5
	FixedMS      = 5.0
	earthRadius  = 6371.0 // km, mean
)

// DistanceKm is the great-circle (haversine) distance between a and b.
func DistanceKm(a, b Location) float64 {
	rad := math.Pi / 180
	dLat := (b.Lat - a.Lat) * rad
	dLon := (b.Lon - a.Lon) * rad
	h := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(a.Lat*rad)*math.Cos(b.Lat*rad)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * earthRadius * math.Asin(math.Min(1, math.Sqrt(h)))
}

// LatencyMS estimates the round-trip time between two locations from their
// distance: FixedMS + 2 × distance × RouteFactor / FibreKmPerMS, rounded to
// 0.1 ms. Frankfurt-London (≈640 km) gives ≈14.6 ms; New York-London
// (≈5570 km) ≈88.6 ms. It returns 0 when either location is unknown, the
// Offer.LatencyMS convention. Agents' measurements, when available, should
// replace it.
func LatencyMS(from, to Location) float64 {
	if !from.Known() || !to.Known() {
		return 0
	}
	ms := FixedMS + 2*DistanceKm(from, to)*RouteFactor/FibreKmPerMS
	return math.Round(ms*10) / 10
}

// ParseLocation reads where a renter or host is: an ISO country code
// ("DE", "us"), a country name ("Germany"), "lat,lon" ("52.52,13.40"), or a
// region string ending in a country code as marketplaces and SkyPilot write
// them ("Michigan, US, NA", "Texas, US", ", US, NA"). A country gives its
// representative point (roughly where its people and data centres are, not
// the geometric centre). EINVALID says which forms work.
func ParseLocation(s string) (Location, error) {
	t := strings.TrimSpace(s)
	if lat, lon, ok := parseLatLon(t); ok {
		l := At(lat, lon)
		l.Label = fmt.Sprintf("%.4g,%.4g", lat, lon)
		return l, nil
	}
	if c, ok := CountryLocation(t); ok {
		return c, nil
	}
	if cc := countryFromRegion(t); cc != "" {
		if c, ok := CountryLocation(cc); ok {
			c.Label = t
			return c, nil
		}
	}
	return Location{}, suanli.FieldErrorf("location", "%q is not a location: give a country code (DE), a country name, or lat,lon (52.52,13.40)", s)
}

func parseLatLon(s string) (lat, lon float64, ok bool) {
	a, b, found := strings.Cut(s, ",")
	if !found {
		return 0, 0, false
	}
	lat, err1 := strconv.ParseFloat(strings.TrimSpace(a), 64)
	lon, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
	if err1 != nil || err2 != nil || math.IsNaN(lat) || math.IsNaN(lon) || lat < -90 || lat > 90 || lon < -180 || lon > 180 {
		return 0, 0, false
	}
	return lat, lon, true
}

// countryFromRegion returns the two-letter country code in a region string
// "Place, CC, Continent" or "Place, CC", or "".
func countryFromRegion(s string) string {
	parts := strings.Split(s, ",")
	for i := len(parts) - 1; i >= 0; i-- {
		p := strings.TrimSpace(parts[i])
		if len(p) == 2 && isUpperASCII(p) {
			if _, ok := countries[p]; ok {
				return p
			}
		}
	}
	return ""
}

func isUpperASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// country is one row of the country table.
type country struct {
	name     string
	lat, lon float64
}

// CountryLocation returns the representative point of a country given by
// ISO alpha-2 code or English name (case-insensitive).
func CountryLocation(codeOrName string) (Location, bool) {
	k := strings.TrimSpace(codeOrName)
	cc := strings.ToUpper(k)
	c, ok := countries[cc]
	if !ok {
		if alias, found := countryAliases[cc]; found {
			cc, c, ok = alias, countries[alias], true
		}
	}
	if !ok {
		for code, row := range countries {
			if strings.EqualFold(row.name, k) {
				cc, c, ok = code, row, true
				break
			}
		}
	}
	if !ok {
		return Location{}, false
	}
	l := At(c.lat, c.lon)
	l.Country, l.Label = cc, c.name
	return l, true
}

var countryAliases = map[string]string{"UK": "GB", "USA": "US", "UNITED STATES OF AMERICA": "US", "KOREA": "KR", "SOUTH KOREA": "KR", "CZECH REPUBLIC": "CZ"}

// OfferLocation returns where an offer's host is: its geolocation when that
// is "lat,lon", else its country (or the country code in its geolocation or
// region string). ok is false when none is known.
func OfferLocation(o *suanli.Offer) (Location, bool) {
	if lat, lon, ok := parseLatLon(o.Geolocation); ok {
		l := At(lat, lon)
		l.Country = o.Country
		return l, true
	}
	for _, s := range []string{o.Country, countryFromRegion(o.Geolocation), countryFromRegion(o.Region)} {
		if s == "" {
			continue
		}
		if l, ok := CountryLocation(s); ok {
			return l, true
		}
	}
	return Location{}, false
}

// CountryCodes returns the codes of the country table, sorted.
func CountryCodes() []string {
	out := make([]string, 0, len(countries))
	for c := range countries {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// countries holds a representative point per country: the capital or the
// main population and data-centre area for large countries (the US point is
// near its population centre in Missouri, Canada's between Toronto and
// Montreal, Russia's at Moscow, China's between Shanghai and Beijing,
// Australia's at Sydney/Melbourne, Brazil's at São Paulo). Coordinates are
// rounded to 0.1°.
var countries = map[string]country{
	"AE": {"United Arab Emirates", 25.2, 55.3}, "AR": {"Argentina", -34.6, -58.4}, "AT": {"Austria", 48.2, 16.4},
	"AU": {"Australia", -35.0, 148.0}, "BD": {"Bangladesh", 23.8, 90.4}, "BE": {"Belgium", 50.8, 4.4},
	"BG": {"Bulgaria", 42.7, 23.3}, "BR": {"Brazil", -23.0, -46.6}, "CA": {"Canada", 44.5, -77.0},
	"CH": {"Switzerland", 47.2, 8.2}, "CL": {"Chile", -33.4, -70.7}, "CN": {"China", 32.0, 116.0},
	"CO": {"Colombia", 4.7, -74.1}, "CR": {"Costa Rica", 9.9, -84.1}, "CY": {"Cyprus", 35.2, 33.4},
	"CZ": {"Czechia", 50.1, 14.4}, "DE": {"Germany", 50.6, 9.9}, "DK": {"Denmark", 55.7, 12.6},
	"EE": {"Estonia", 59.4, 24.8}, "EG": {"Egypt", 30.0, 31.2}, "ES": {"Spain", 40.4, -3.7},
	"ET": {"Ethiopia", 9.0, 38.7}, "FI": {"Finland", 60.2, 24.9}, "FR": {"France", 48.9, 2.4},
	"GB": {"United Kingdom", 52.0, -1.0}, "GR": {"Greece", 38.0, 23.7}, "HK": {"Hong Kong", 22.3, 114.2},
	"HR": {"Croatia", 45.8, 16.0}, "HU": {"Hungary", 47.5, 19.0}, "ID": {"Indonesia", -6.2, 106.8},
	"IE": {"Ireland", 53.3, -6.3}, "IL": {"Israel", 32.1, 34.8}, "IN": {"India", 21.0, 77.0},
	"IS": {"Iceland", 64.1, -21.9}, "IT": {"Italy", 43.0, 12.0}, "JP": {"Japan", 35.7, 139.7},
	"KE": {"Kenya", -1.3, 36.8}, "KR": {"South Korea", 37.6, 127.0}, "KZ": {"Kazakhstan", 43.2, 76.9},
	"LT": {"Lithuania", 54.7, 25.3}, "LU": {"Luxembourg", 49.6, 6.1}, "LV": {"Latvia", 56.9, 24.1},
	"MA": {"Morocco", 33.6, -7.6}, "MX": {"Mexico", 19.4, -99.1}, "MY": {"Malaysia", 3.1, 101.7},
	"NG": {"Nigeria", 6.5, 3.4}, "NL": {"Netherlands", 52.4, 4.9}, "NO": {"Norway", 59.9, 10.8},
	"NZ": {"New Zealand", -37.8, 175.0}, "PE": {"Peru", -12.0, -77.0}, "PH": {"Philippines", 14.6, 121.0},
	"PK": {"Pakistan", 27.0, 70.0}, "PL": {"Poland", 52.2, 21.0}, "PT": {"Portugal", 38.7, -9.1},
	"PY": {"Paraguay", -25.3, -57.6}, "QA": {"Qatar", 25.3, 51.5}, "RO": {"Romania", 44.4, 26.1},
	"RS": {"Serbia", 44.8, 20.5}, "RU": {"Russia", 55.8, 37.6}, "SA": {"Saudi Arabia", 24.7, 46.7},
	"SE": {"Sweden", 59.3, 18.1}, "SG": {"Singapore", 1.35, 103.8}, "SI": {"Slovenia", 46.1, 14.5},
	"SK": {"Slovakia", 48.1, 17.1}, "TH": {"Thailand", 13.8, 100.5}, "TR": {"Turkey", 41.0, 29.0},
	"TW": {"Taiwan", 24.5, 121.0}, "UA": {"Ukraine", 50.5, 30.5}, "US": {"United States", 37.5, -92.0},
	"UY": {"Uruguay", -34.9, -56.2}, "VN": {"Vietnam", 16.0, 106.0}, "ZA": {"South Africa", -26.2, 28.0},
}
