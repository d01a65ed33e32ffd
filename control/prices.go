package control

import (
	"context"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/market"
)

// DefaultPriceWindow is how far back price history looks when the query
// names no start.
const DefaultPriceWindow = 7 * 24 * time.Hour

// MarketPrices returns a GPU model's price history: listed on-demand
// prices, winning bids and fill rate, summarised and as a series.
func (s *Service) MarketPrices(ctx context.Context, q suanli.PriceQuery) (*suanli.PriceStats, error) {
	if _, err := principal(ctx, suanli.ScopeInstanceRead); err != nil {
		return nil, err
	}
	names, err := market.PriceModels(q.Query)
	if err != nil {
		return nil, err
	}
	until := s.now()
	since := q.Since
	if since.IsZero() {
		since = until.Add(-DefaultPriceWindow)
	}
	if !since.Before(until) {
		return nil, suanli.FieldErrorf("since", "%s is not in the past", since.Format(time.RFC3339))
	}
	if q.Buckets < 0 || q.Buckets > 1000 {
		return nil, suanli.FieldErrorf("buckets", "%d: ask for 1 to 1000", q.Buckets)
	}
	points, fills, preempts, err := s.Store.PriceHistory(ctx, names, since, until)
	if err != nil {
		return nil, err
	}
	return market.Prices(names, points, fills, preempts, since, until, q.Buckets), nil
}

// SampleMarket records the market now: each listed, online GPU machine's
// on-demand price per GPU-hour, and per GPU model how many listed GPUs are
// rented.
func (s *Service) SampleMarket(ctx context.Context) error {
	ms, _, err := s.Store.FindMachines(ctx, suanli.MachineFilter{})
	if err != nil {
		return err
	}
	now := s.now()
	var points []suanli.PricePoint
	fill := map[string]*suanli.FillSample{}
	var order []string
	for _, m := range ms {
		if !m.Listing.Listed || m.Status != suanli.MachineOnline || !m.IsGPU() {
			continue
		}
		name := m.Hardware.GPUs[0].Name
		points = append(points, suanli.PricePoint{At: now, GPUName: name, Kind: suanli.PriceListed, Price: rentTerms(m).Listing.PriceGPU, MachineID: m.ID})
		f := fill[name]
		if f == nil {
			f = &suanli.FillSample{At: now, GPUName: name}
			fill[name] = f
			order = append(order, name)
		}
		f.Listed += len(m.Hardware.GPUs)
		f.Rented += len(m.GPUsInUse)
	}
	fills := make([]suanli.FillSample, 0, len(order))
	for _, n := range order {
		fills = append(fills, *fill[n])
	}
	return s.Store.RecordMarketSample(ctx, points, fills)
}
