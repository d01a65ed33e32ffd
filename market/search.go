package market

import (
	"math"

	"github.com/suanli/suanli"
)

// Viewer is who searches. An offer with Simulated set (a provider's test
// listing) is rentable only for its owner (HostID == AccountID) or when
// AllowSimulated is set (operators, test marketplaces). The zero Viewer is
// an anonymous renter: simulated offers are never rentable for it.
type Viewer struct {
	AccountID      int64
	AllowSimulated bool
}

// rentable is the per-viewer value of the rentable field: o.Rentable (which
// ignores simulation) and, for a simulated offer, the viewer's right to it.
func (v Viewer) rentable(o *suanli.Offer) bool {
	return o.Rentable && (!o.Simulated || v.AllowSimulated || (v.AccountID != 0 && o.HostID == v.AccountID))
}

// Paging limits.
const (
	// DefaultLimit is the page size of a search that names none.
	DefaultLimit = 64
	// MaxLimit is the largest page a search returns.
	MaxLimit = 10000
	// maxStorageGB bounds OfferQuery.StorageGB (1 PB).
	maxStorageGB = 1_000_000
	// hoursPerMonth converts storage_cost (per GB-month) to per hour.
	hoursPerMonth = 730
)

// search is a validated OfferQuery: effective conditions, order, paging and
// the storage size, in the units the evaluators use.
type search struct {
	conds   []Cond
	order   []OrderKey
	limit   int
	offset  int
	storage int64 // milli-GB priced into dph_total
	explain bool
	viewer  Viewer
}

// prepare validates q. Errors are EINVALID naming the field at fault.
func prepare(q suanli.OfferQuery, v Viewer) (*search, error) {
	pq, err := Parse(q.Query)
	if err != nil {
		return nil, err
	}
	order, err := ParseOrder(q.Order)
	if err != nil {
		return nil, err
	}
	if len(order) == 0 {
		order = defaultOrderKeys
	}
	s := &search{conds: pq.Effective(), order: order, limit: q.Limit, offset: q.Offset, explain: q.Explain, viewer: v}
	switch {
	case q.Limit < 0:
		return nil, suanli.FieldErrorf("limit", "%d is negative; leave it 0 for %d offers, or ask for up to %d", q.Limit, DefaultLimit, MaxLimit)
	case q.Limit == 0:
		s.limit = DefaultLimit
	case q.Limit > MaxLimit:
		return nil, suanli.FieldErrorf("limit", "%d is more than %d offers a page; page with offset", q.Limit, MaxLimit)
	}
	if q.Offset < 0 {
		return nil, suanli.FieldErrorf("offset", "%d is negative", q.Offset)
	}
	gb := q.StorageGB
	if gb == 0 {
		gb = suanli.DefaultStorageGB
	}
	if math.IsNaN(gb) || gb < 0 || gb > maxStorageGB {
		return nil, suanli.FieldErrorf("storage_gb", "%v GB is not a disk size; give 0 (for %d GB) up to %d GB", q.StorageGB, suanli.DefaultStorageGB, maxStorageGB)
	}
	s.storage = int64(math.Round(gb * 1000))
	return s, nil
}

// storageCostMilli is 1000 hours × GB-months: storage_cost × milli-GB /
// storageDen is the storage price per hour.
const storageDen = hoursPerMonth * 1000

// dphTotal is dph_base plus storage_cost (per GB-month) for storage milli-GB
// over 730 hours, in exact integer arithmetic (rounded toward zero).
func dphTotal(base, storageCost suanli.Money, storage int64) suanli.Money {
	const bound = 1 << 50 // far above any real price; keeps MulDiv in range
	if storageCost > bound || storageCost < -bound {
		storageCost = min(max(storageCost, -bound), bound)
	}
	return base + suanli.MulDiv(storageCost, storage, storageDen)
}

// perDollar is x per dollar-hour of dph; 0 when the offer is free.
func perDollar(x float64, dph suanli.Money) float64 {
	if dph <= 0 {
		return 0
	}
	return x / (float64(dph) / 1e6)
}

// score is dlperf weighted by reliability per dollar-hour (Offer.Score).
func score(dlperf, reliability float64, dph suanli.Money) float64 {
	return perDollar(dlperf*reliability, dph)
}

// valueOf reads field id of o as this search sees it: derived fields
// (dph_total and the per-dollar ratios at the searched storage, the
// viewer's rentable) are computed, not read.
func (s *search) valueOf(o *suanli.Offer, id fieldID) val {
	switch id {
	case fDPHTotal:
		return iv(int64(dphTotal(o.DPHBase, o.StorageCost, s.storage)))
	case fDLPerfPD:
		return fv(perDollar(o.DLPerf, dphTotal(o.DPHBase, o.StorageCost, s.storage)))
	case fFlopsPD:
		return fv(perDollar(o.TotalFlops, dphTotal(o.DPHBase, o.StorageCost, s.storage)))
	case fScore:
		return fv(score(o.DLPerf, o.Reliability, dphTotal(o.DPHBase, o.StorageCost, s.storage)))
	case fRentable:
		return bv(s.viewer.rentable(o))
	}
	return fields[id].get(o)
}

// derive returns a copy of o with the derived fields this search computes.
func (s *search) derive(o *suanli.Offer) *suanli.Offer {
	d := *o
	d.DPHTotal = dphTotal(o.DPHBase, o.StorageCost, s.storage)
	d.DLPerfPerDPH = perDollar(o.DLPerf, d.DPHTotal)
	d.FlopsPerDPH = perDollar(o.TotalFlops, d.DPHTotal)
	d.Score = score(o.DLPerf, o.Reliability, d.DPHTotal)
	d.Rentable = s.viewer.rentable(o)
	if o.EndDate != nil {
		t := *o.EndDate
		d.EndDate = &t
	}
	return &d
}

// match reports whether value v satisfies c.
func (c *Cond) match(v val) bool {
	k := fields[c.id].kind
	switch c.Op {
	case OpIn, OpNotIn:
		in := false
		for _, w := range c.vals {
			if compareVals(k, v, w) == 0 {
				in = true
				break
			}
		}
		return in == (c.Op == OpIn)
	}
	r := compareVals(k, v, c.vals[0])
	switch c.Op {
	case OpLT:
		return r < 0
	case OpLE:
		return r <= 0
	case OpEQ:
		return r == 0
	case OpNE:
		return r != 0
	case OpGE:
		return r >= 0
	case OpGT:
		return r > 0
	}
	return false
}

// matches reports whether o satisfies every condition of s.
func (s *search) matches(o *suanli.Offer) bool {
	for i := range s.conds {
		c := &s.conds[i]
		if !c.match(s.valueOf(o, c.id)) {
			return false
		}
	}
	return true
}

// compare orders two offers by s's keys, then by id ascending.
func (s *search) compare(a, b *suanli.Offer) int {
	for _, k := range s.order {
		r := compareVals(fields[k.id].kind, s.valueOf(a, k.id), s.valueOf(b, k.id))
		if k.Desc {
			r = -r
		}
		if r != 0 {
			return r
		}
	}
	switch {
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

// page returns the derived copies of sorted[offset : offset+limit].
func (s *search) page(sorted []*suanli.Offer) []*suanli.Offer {
	out := []*suanli.Offer{}
	for i := s.offset; i < len(sorted) && i < s.offset+s.limit; i++ {
		out = append(out, s.derive(sorted[i]))
	}
	return out
}

// References reports whether q's conditions (defaults included) or order
// name field (canonical name). An invalid q references nothing; Search
// reports its error.
func References(q suanli.OfferQuery, field string) bool {
	s, err := prepare(q, Viewer{})
	if err != nil {
		return false
	}
	for _, c := range s.conds {
		if c.Field == field {
			return true
		}
	}
	for _, k := range s.order {
		if k.Field == field {
			return true
		}
	}
	return false
}
