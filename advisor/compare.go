package advisor

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// Equivalent is a public-cloud instance with the same GPU as an offer,
// priced per GPU-hour. SavingsBP is what the offer saves against it:
// (cloud − offer) / cloud in basis points, negative when the offer costs
// more. Exact is false when only the GPU family matched (the offer or the
// row does not say SXM or PCIe, 40 or 80 GB).
type Equivalent struct {
	Provider     string       `json:"provider"`
	InstanceType string       `json:"instance_type"`
	Region       string       `json:"region"`
	GPU          string       `json:"gpu"`
	GPUCount     float64      `json:"gpu_count"`
	PerGPUHour   suanli.Money `json:"per_gpu_hour"`
	SavingsBP    int64        `json:"savings_bp"`
	Exact        bool         `json:"exact"`
	AsOf         string       `json:"as_of"`
	AgeDays      int          `json:"age_days,omitempty"` // how old the price is on the comparison date
	Source       string       `json:"source"`
}

// OfferComparison is one marketplace offer next to its public-cloud
// equivalents: the cheapest matching instance of each provider, cheapest
// first.
type OfferComparison struct {
	OfferID     int64        `json:"offer_id"`
	GPU         string       `json:"gpu"` // normalised
	NumGPUs     int          `json:"num_gpus"`
	Country     string       `json:"country,omitempty"`
	PerGPUHour  suanli.Money `json:"per_gpu_hour"`
	Equivalents []Equivalent `json:"equivalents"`
	Summary     string       `json:"summary"`
}

// RegionSpread is how the price of one provider's instance type differs
// between regions. SpreadBP is (Max − Min) / Min in basis points.
type RegionSpread struct {
	Provider     string       `json:"provider"`
	InstanceType string       `json:"instance_type"`
	GPU          string       `json:"gpu"`
	Regions      int          `json:"regions"`
	Min          suanli.Money `json:"min"`
	MinRegion    string       `json:"min_region"`
	Max          suanli.Money `json:"max"`
	MaxRegion    string       `json:"max_region"`
	SpreadBP     int64        `json:"spread_bp"`
}

// Comparison is the result of Compare.
type Comparison struct {
	Offers  []OfferComparison `json:"offers"`
	Regions []RegionSpread    `json:"regions"` // for the instance types that matched an offer
}

// Compare puts each GPU offer next to the public-cloud instances with the
// same GPU (matched on normalised model names, see NormalizeGPU): the
// offer's compute price per GPU-hour (dph_base / num_gpus, else gpu_price)
// against each provider's cheapest matching instance per GPU-hour, with the
// savings. A provider's exact matches win over family-only matches. It
// also lists region price differences for the matched instance types.
// today, when not zero, dates each price (AgeDays); Compare reads no clock.
// CPU-only offers and offers without a price are left out.
func Compare(offers []*suanli.Offer, catalog []CatalogRow, today time.Time) *Comparison {
	c := &Comparison{Offers: []OfferComparison{}, Regions: []RegionSpread{}}
	keys := make([]GPUKey, len(catalog))
	for i, r := range catalog {
		keys[i] = r.Key()
	}
	matchedTypes := map[[2]string]bool{}
	for _, o := range offers {
		if o.NumGPUs <= 0 {
			continue
		}
		per := o.GPUPrice
		if o.DPHBase > 0 {
			per = suanli.MulDiv(o.DPHBase, 1, int64(o.NumGPUs))
		}
		if per <= 0 || per > MaxHourly {
			continue
		}
		ok := NormalizeGPU(o.GPUName, o.GPURAM)
		oc := OfferComparison{OfferID: o.ID, GPU: ok.String(), NumGPUs: o.NumGPUs, Country: o.Country, PerGPUHour: per, Equivalents: []Equivalent{}}
		best := map[string]Equivalent{}
		for i, r := range catalog {
			match, exact := ok.Match(keys[i])
			p := r.PerGPUHour()
			if !match || p <= 0 {
				continue
			}
			e := Equivalent{Provider: r.Provider, InstanceType: r.InstanceType, Region: r.Region, GPU: r.GPU,
				GPUCount: r.GPUCount, PerGPUHour: p, Exact: exact, AsOf: r.AsOf, Source: r.Source}
			e.SavingsBP = ratioBP(p-per, p)
			if d, err := time.Parse(time.DateOnly, r.AsOf); err == nil && !today.IsZero() {
				e.AgeDays = int(today.Sub(d).Hours() / 24)
			}
			cur, seen := best[r.Provider]
			if !seen || (e.Exact && !cur.Exact) || (e.Exact == cur.Exact && e.PerGPUHour < cur.PerGPUHour) {
				best[r.Provider] = e
			}
		}
		for _, e := range best {
			oc.Equivalents = append(oc.Equivalents, e)
			matchedTypes[[2]string{e.Provider, e.InstanceType}] = true
		}
		sort.Slice(oc.Equivalents, func(i, j int) bool {
			a, b := oc.Equivalents[i], oc.Equivalents[j]
			if a.PerGPUHour != b.PerGPUHour {
				return a.PerGPUHour < b.PerGPUHour
			}
			return a.Provider < b.Provider
		})
		oc.Summary = compareSummary(oc)
		c.Offers = append(c.Offers, oc)
	}
	for _, s := range RegionSpreads(catalog) {
		if matchedTypes[[2]string{s.Provider, s.InstanceType}] {
			c.Regions = append(c.Regions, s)
		}
	}
	return c
}

func compareSummary(oc OfferComparison) string {
	if len(oc.Equivalents) == 0 {
		return fmt.Sprintf("no public-cloud instance with a %s in the catalog", oc.GPU)
	}
	ch := oc.Equivalents[0]
	hi := oc.Equivalents[len(oc.Equivalents)-1]
	s := fmt.Sprintf("%s/GPU-h against %s at %s (%s %s)", oc.PerGPUHour, ch.Provider, ch.PerGPUHour, ch.InstanceType, ch.Region)
	switch {
	case ch.SavingsBP > 0:
		s += ": " + FormatBP(ch.SavingsBP) + " cheaper than the cheapest equivalent"
	case ch.SavingsBP < 0:
		s += ": " + FormatBP(-ch.SavingsBP) + " dearer than the cheapest equivalent"
	default:
		s += ": the same price"
	}
	if len(oc.Equivalents) > 1 && hi.SavingsBP > ch.SavingsBP {
		s += fmt.Sprintf(", %s cheaper than %s", FormatBP(hi.SavingsBP), hi.Provider)
	}
	if !ch.Exact {
		s += " (GPU family match only)"
	}
	return s
}

// RegionSpreads lists, for every provider's instance type whose price
// differs between regions, its cheapest and dearest region, widest spread
// first. Instance types sold at one price everywhere are left out.
func RegionSpreads(catalog []CatalogRow) []RegionSpread {
	type k struct{ p, i string }
	groups := map[k]*RegionSpread{}
	regions := map[k]map[string]bool{}
	var order []k
	for _, r := range catalog {
		key := k{r.Provider, r.InstanceType}
		g, ok := groups[key]
		if !ok {
			g = &RegionSpread{Provider: r.Provider, InstanceType: r.InstanceType, GPU: r.GPU, Min: r.Price, MinRegion: r.Region, Max: r.Price, MaxRegion: r.Region}
			groups[key], regions[key] = g, map[string]bool{}
			order = append(order, key)
		}
		regions[key][r.Region] = true
		if r.Price < g.Min || (r.Price == g.Min && r.Region < g.MinRegion) {
			g.Min, g.MinRegion = r.Price, r.Region
		}
		if r.Price > g.Max || (r.Price == g.Max && r.Region < g.MaxRegion) {
			g.Max, g.MaxRegion = r.Price, r.Region
		}
	}
	var out []RegionSpread
	for _, key := range order {
		g := groups[key]
		g.Regions = len(regions[key])
		if g.Regions < 2 || g.Min <= 0 || g.Max == g.Min {
			continue
		}
		g.SpreadBP = ratioBP(g.Max-g.Min, g.Min)
		out = append(out, *g)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].SpreadBP != out[j].SpreadBP {
			return out[i].SpreadBP > out[j].SpreadBP
		}
		if out[i].Provider != out[j].Provider {
			return out[i].Provider < out[j].Provider
		}
		return strings.Compare(out[i].InstanceType, out[j].InstanceType) < 0
	})
	return out
}
