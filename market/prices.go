package market

import (
	"slices"
	"time"

	"github.com/suanli/suanli"
)

// DefaultPriceBuckets is the length of a price series when none is asked.
const DefaultPriceBuckets = 24

// PriceModels reads the GPU models of a price query: gpu_name=H100 or
// gpu_name in [H100,A100] (the only field it takes). EINVALID otherwise.
func PriceModels(text string) ([]string, error) {
	q, err := Parse(text)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range q.Conds {
		if c.Field != "gpu_name" || (c.Op != OpEQ && c.Op != OpIn) {
			return nil, suanli.FieldErrorf("q", "%s: price history is per GPU model; write gpu_name=H100 or gpu_name in [H100,A100]", c.Text)
		}
		names = append(names, c.Values...)
	}
	if len(names) == 0 {
		return nil, suanli.FieldErrorf("q", "name a GPU model: gpu_name=H100 (see `suanli search` for the models listed)")
	}
	return names, nil
}

// Prices summarises a window [since, until) of price history for GPU models
// (names as asked): the floor, median and 90th percentile of listed
// on-demand prices and of winning bids (per GPU-hour, nearest rank), the
// mean fill rate, and a series of buckets (0 means DefaultPriceBuckets)
// for a chart. It is pure: the caller reads the history.
func Prices(names []string, points []suanli.PricePoint, fills []suanli.FillSample, preempts []time.Time, since, until time.Time, buckets int) *suanli.PriceStats {
	if buckets <= 0 {
		buckets = DefaultPriceBuckets
	}
	st := &suanli.PriceStats{GPUNames: names, Since: since, Until: until, FillRate: -1, Series: make([]suanli.PriceBucket, buckets)}
	span := until.Sub(since)
	if span <= 0 {
		span = time.Nanosecond
	}
	bucketOf := func(t time.Time) int {
		i := int(int64(t.Sub(since)) * int64(buckets) / int64(span))
		return min(max(i, 0), buckets-1)
	}
	var listed, bids []suanli.Money
	perListed := make([][]suanli.Money, buckets)
	perBid := make([][]suanli.Money, buckets)
	for _, p := range points {
		b := bucketOf(p.At)
		switch p.Kind {
		case suanli.PriceListed:
			listed = append(listed, p.Price)
			perListed[b] = append(perListed[b], p.Price)
		case suanli.PriceBid:
			bids = append(bids, p.Price)
			perBid[b] = append(perBid[b], p.Price)
		}
	}
	st.Listed, st.Bids = summarize(listed), summarize(bids)
	// Fill: samples taken at the same moment for several models add up.
	type agg struct{ listed, rented int }
	byAt := map[time.Time]*agg{}
	var ats []time.Time
	for _, f := range fills {
		a := byAt[f.At]
		if a == nil {
			a = &agg{}
			byAt[f.At] = a
			ats = append(ats, f.At)
		}
		a.listed += f.Listed
		a.rented += f.Rented
	}
	slices.SortFunc(ats, func(x, y time.Time) int { return x.Compare(y) })
	perFill := make([]agg, buckets)
	var sum float64
	n := 0
	for _, at := range ats {
		a := byAt[at]
		if a.listed <= 0 {
			continue
		}
		sum += float64(a.rented) / float64(a.listed)
		n++
		b := bucketOf(at)
		perFill[b].listed += a.listed
		perFill[b].rented += a.rented
	}
	if n > 0 {
		st.FillRate = sum / float64(n)
	}
	for i := range st.Series {
		s := &st.Series[i]
		s.At = since.Add(time.Duration(int64(span) * int64(i) / int64(buckets)))
		s.Listed = summarize(perListed[i]).Median
		s.Bid = summarize(perBid[i]).Median
		s.FillRate = -1
		if perFill[i].listed > 0 {
			s.FillRate = float64(perFill[i].rented) / float64(perFill[i].listed)
		}
	}
	for _, t := range preempts {
		st.Series[bucketOf(t)].Preempted++
	}
	return st
}

// summarize returns count, minimum, median and 90th percentile (nearest
// rank) of prices.
func summarize(ps []suanli.Money) suanli.PriceSummary {
	if len(ps) == 0 {
		return suanli.PriceSummary{}
	}
	s := slices.Clone(ps)
	slices.Sort(s)
	rank := func(p int) suanli.Money {
		i := (p*len(s) + 99) / 100 // nearest rank, 1-based
		return s[min(max(i, 1), len(s))-1]
	}
	return suanli.PriceSummary{Count: len(s), Floor: s[0], Median: rank(50), P90: rank(90)}
}

// CheapHour finds the price valley price history predicts between from and
// latest: for each hour of the day (UTC), the median of the listed
// on-demand prices sampled in that hour; of the hours whose next start at
// or after from is no later than latest, the one with the lowest median
// (ties: the soonest). It returns that start and median, and false when no
// listed point falls in any such hour. Pure: the caller reads the history.
func CheapHour(points []suanli.PricePoint, from, latest time.Time) (time.Time, suanli.Money, bool) {
	var byHour [24][]suanli.Money
	for _, p := range points {
		if p.Kind == suanli.PriceListed {
			h := p.At.UTC().Hour()
			byHour[h] = append(byHour[h], p.Price)
		}
	}
	var at time.Time
	var best suanli.Money
	found := false
	from = from.UTC()
	for h, ps := range byHour {
		if len(ps) == 0 {
			continue
		}
		start := time.Date(from.Year(), from.Month(), from.Day(), h, 0, 0, 0, time.UTC)
		if start.Before(from) {
			start = start.Add(24 * time.Hour)
		}
		if start.After(latest) {
			continue
		}
		slices.Sort(ps)
		med := ps[(len(ps)-1)/2]
		if !found || med < best || (med == best && start.Before(at)) {
			at, best, found = start, med, true
		}
	}
	return at, best, found
}
