package market_test

import (
	stdcmp "cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/market"
)

var (
	testGPUs      = []string{"RTX 4090", "RTX 3090", "A100 SXM4", "H100 SXM", "L40S", "RTX A6000", ""}
	testCountries = []string{"DE", "US", "FR", "CN", "JP", "BR", "CA", "GB", "NL", "SE", "PL", "IN", "KR", "TW", "SG", "AU", "ES", "IT", "FI", "NO"}
)

// randOffer makes a varied offer: some fields with few values, some with
// many, so that the index uses every kind of column.
func randOffer(r *rand.Rand, id int64) *suanli.Offer {
	g := r.IntN(len(testGPUs))
	n := []int{0, 1, 2, 4, 8}[r.IntN(5)]
	o := &suanli.Offer{
		ID: id, MachineID: id / 2, HostID: int64(1 + r.IntN(50)), Hostname: fmt.Sprintf("host-%d", r.IntN(2000)),
		GPUName: testGPUs[g], NumGPUs: n, TotalGPUs: 8, GPURAM: float64(8 * (g + 1)), ComputeCap: 700 + 10*g,
		CUDAVersion: []float64{11.8, 12.1, 12.4}[r.IntN(3)], DriverVersion: fmt.Sprintf("5%d.%d", r.IntN(4), r.IntN(120)),
		GPUArch: "nvidia", CPUArch: []string{"amd64", "arm64"}[r.IntN(2)], CPUCores: 4 * (1 + r.IntN(32)),
		CPURAM: float64(16 * (1 + r.IntN(20))), DiskSpace: float64(r.IntN(4000)), DiskBW: float64(r.IntN(5000)),
		InetUp: float64(r.IntN(10000)), InetDown: float64(r.IntN(10000)),
		InetUpCost: suanli.Money(r.IntN(5) * 1000), InetDownCost: suanli.Money(r.IntN(5) * 1000),
		GPUPrice: suanli.Money(r.IntN(3000) * 1000), DPHBase: suanli.Money(20_000 + r.IntN(5000)*1000),
		StorageCost: suanli.Money([]int64{0, 50_000, 73_000, 150_000}[r.IntN(4)]), MinBid: suanli.Money(r.IntN(2000) * 1000),
		Reliability: float64(6000+r.IntN(4001)) / 10000, Verified: r.IntN(3) > 0, Rentable: r.IntN(5) > 0,
		Simulated: r.IntN(10) == 0, Datacenter: r.IntN(4) == 0, Tier: []string{"datacenter", "verified", "community"}[r.IntN(3)],
		Country: testCountries[r.IntN(len(testCountries))], Region: []string{"Europe", "North America", "Asia"}[r.IntN(3)],
		DLPerf: float64(r.IntN(4000)) / 10, TotalFlops: float64(r.IntN(1000)), Duration: float64(r.IntN(100)),
		StaticIP: r.IntN(2) == 0, DirectPortCount: r.IntN(3) * 10, CarbonIntensity: float64(r.IntN(500)), CO2PerHour: float64(r.IntN(20000)) / 10,
		Green: r.IntN(4) == 0, PreemptGraceS: 30, HostStatus: "online",
	}
	o.GPUTotalRAM = o.GPURAM * float64(n)
	o.Geolocation = "City " + o.Country
	if n == 0 {
		o.GPUName, o.GPURAM, o.GPUTotalRAM = "", 0, 0
	}
	if r.IntN(3) == 0 {
		t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.IntN(400)) * 24 * time.Hour)
		o.EndDate = &t
	}
	return o
}

// randQuery writes a random query whose values mostly come from offers in
// the market, so that conditions match some and miss others.
func randQuery(r *rand.Rand, offers []*suanli.Offer) suanli.OfferQuery {
	names := market.Fields()
	pick := func() *suanli.Offer { return offers[r.IntN(len(offers))] }
	var conds []string
	for range r.IntN(4) {
		name := names[r.IntN(len(names))]
		if r.IntN(3) == 0 { // favour the fields searches use most
			name = []string{"gpu_name", "num_gpus", "dph_total", "reliability", "verified", "country", "inet_down", "dlperf_per_dphtotal", "rentable"}[r.IntN(9)]
		}
		var ops []string
		switch market.FieldKind(name) {
		case "bool":
			ops = []string{"=", "!=", "in", "notin"}
		default:
			ops = []string{"<", "<=", "=", "!=", ">=", ">", "in", "notin"}
		}
		op := ops[r.IntN(len(ops))]
		v := market.ValueText(pick(), name)
		switch {
		case op == "in" || op == "notin":
			v = "[" + v + "," + market.ValueText(pick(), name) + "]"
		case name == "dph_total" || name == "dph":
			v = fmt.Sprintf("%.3f", r.Float64()*4)
		case name == "rentable" && r.IntN(3) == 0:
			v = "any"
			op = "="
		}
		conds = append(conds, fmt.Sprintf("%s %s %s", name, op, v))
	}
	var keys []string
	for range r.IntN(3) {
		k := names[r.IntN(len(names))]
		if r.IntN(2) == 0 {
			k += "-"
		}
		keys = append(keys, k)
	}
	q := suanli.OfferQuery{Query: strings.Join(conds, " "), Order: strings.Join(keys, ",")}
	q.Limit = []int{0, 1, 7, 100, 600}[r.IntN(5)]
	if r.IntN(4) == 0 {
		q.Offset = []int{3, 50, 500}[r.IntN(3)]
	}
	if r.IntN(5) == 0 {
		q.StorageGB = 50
	}
	q.Explain = r.IntN(8) == 0
	return q
}

func randViewer(r *rand.Rand) market.Viewer {
	switch r.IntN(4) {
	case 0:
		return market.Viewer{AccountID: int64(1 + r.IntN(50))}
	case 1:
		return market.Viewer{AllowSimulated: true}
	}
	return market.Viewer{}
}

// sameResult is a fast cmp.Equal for results.
func sameResult(a, b *suanli.OfferResult) bool {
	if a.Total != b.Total || len(a.Offers) != len(b.Offers) || !cmp.Equal(a.Explain, b.Explain) {
		return false
	}
	for i := range a.Offers {
		x, y := *a.Offers[i], *b.Offers[i]
		if (x.EndDate == nil) != (y.EndDate == nil) || x.EndDate != nil && !x.EndDate.Equal(*y.EndDate) {
			return false
		}
		x.EndDate, y.EndDate = nil, nil
		if x != y {
			return false
		}
	}
	return true
}

func sortedOffers(m map[int64]*suanli.Offer) []*suanli.Offer {
	all := make([]*suanli.Offer, 0, len(m))
	for _, o := range m {
		all = append(all, o)
	}
	slices.SortFunc(all, func(a, b *suanli.Offer) int { return stdcmp.Compare(a.ID, b.ID) })
	return all
}

// checkSame runs n random queries on the index and on Scan over offers.
func checkSame(t *testing.T, r *rand.Rand, x *market.Index, offers map[int64]*suanli.Offer, n int, label string) {
	t.Helper()
	all := sortedOffers(offers)
	if x.Len() != len(all) {
		t.Fatalf("%s: Len() = %d, want %d", label, x.Len(), len(all))
	}
	for range n {
		q, v := randQuery(r, all), randViewer(r)
		want, err := market.Scan(all, q, v)
		if err != nil {
			t.Fatalf("%s: Scan(%+v): %v", label, q, err)
		}
		got, err := x.Search(q, v)
		if err != nil {
			t.Fatalf("%s: Search(%+v): %v", label, q, err)
		}
		if want.Total != got.Total || !cmp.Equal(ids(want), ids(got)) {
			t.Fatalf("%s: Search(%+v, %+v) = total %d %v, Scan: total %d %v", label, q, v, got.Total, ids(got), want.Total, ids(want))
		}
		if !sameResult(want, got) {
			t.Fatalf("%s: Search(%+v, %+v) differs from Scan (-scan +index):\n%s", label, q, v, cmp.Diff(want, got))
		}
	}
}

// TestIndexMatchesScanAndRebuild applies random changes to an index and
// checks after each round that it answers like Scan and like an index
// rebuilt from scratch with Replace.
func TestIndexMatchesScanAndRebuild(t *testing.T) {
	defer market.SetThresholds(8, 16, 300)()
	defer market.SetExactMax(200)()
	seed := uint64(1)
	if s, err := strconv.ParseUint(os.Getenv("MARKET_TEST_SEED"), 10, 64); err == nil {
		seed = s
	}
	r := rand.New(rand.NewPCG(seed, 2))
	offers := map[int64]*suanli.Offer{}
	x := market.NewIndex()
	nextID := int64(1)
	for range 6000 {
		o := randOffer(r, nextID)
		nextID++
		offers[o.ID] = o
		x.Put(o)
	}
	checkSame(t, r, x, offers, 150, "after load")
	for round := range 4 {
		for range 3000 {
			switch k := r.IntN(10); {
			case k < 5: // edit a field or two of an existing offer
				id := int64(1 + r.IntN(int(nextID-1)))
				o, ok := offers[id]
				if !ok {
					continue
				}
				c := *o
				switch r.IntN(4) {
				case 0:
					c.Rentable = !c.Rentable
				case 1:
					c.DPHBase = suanli.Money(20_000 + r.IntN(5000)*1000)
				case 2:
					c.GPUName, c.Hostname = testGPUs[r.IntN(len(testGPUs))], fmt.Sprintf("new-%d", r.IntN(100000))
				default:
					c = *randOffer(r, id)
				}
				offers[id] = &c
				x.Put(&c)
			case k < 8:
				o := randOffer(r, nextID)
				nextID++
				offers[o.ID] = o
				x.Apply([]*suanli.Offer{o}, nil)
			default:
				id := int64(1 + r.IntN(int(nextID-1)))
				delete(offers, id)
				if r.IntN(2) == 0 {
					x.Delete(id)
				} else {
					x.Apply(nil, []int64{id, -id}) // -id is not there
				}
			}
		}
		label := fmt.Sprintf("round %d", round)
		checkSame(t, r, x, offers, 100, label)

		fresh := market.NewIndex()
		all := sortedOffers(offers)
		fresh.Replace(all)
		for range 100 {
			q, v := randQuery(r, all), randViewer(r)
			a, err1 := x.Search(q, v)
			b, err2 := fresh.Search(q, v)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: Search(%+v): %v, %v", label, q, err1, err2)
			}
			if !sameResult(b, a) {
				t.Fatalf("%s: Search(%+v) differs from a rebuilt index (-rebuilt +incremental):\n%s", label, q, cmp.Diff(b, a))
			}
		}
		for id, o := range offers {
			got, ok := x.Get(id)
			want := *o
			want.DPHTotal, want.DLPerfPerDPH, want.FlopsPerDPH, want.Score = got.DPHTotal, got.DLPerfPerDPH, got.FlopsPerDPH, got.Score
			if !ok || !sameResult(&suanli.OfferResult{Offers: []*suanli.Offer{&want}}, &suanli.OfferResult{Offers: []*suanli.Offer{got}}) {
				t.Fatalf("%s: Get(%d) = %+v, want %+v", label, id, got, &want)
			}
		}
	}
}

// TestIndexDefaultThresholds runs the comparison with the production
// thresholds on a market big enough to use the bit-sliced ordering.
func TestIndexDefaultThresholds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	offers := map[int64]*suanli.Offer{}
	var all []*suanli.Offer
	for id := int64(1); id <= 12000; id++ {
		o := randOffer(r, id)
		offers[id] = o
		all = append(all, o)
	}
	x := market.NewIndex()
	x.Replace(all)
	checkSame(t, r, x, offers, 120, "replace")
}

// TestIndexConcurrent runs searches while a writer changes the index; run it
// with -race. Each search must be internally consistent: its offers match
// its query.
func TestIndexConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var all []*suanli.Offer
	for id := int64(1); id <= 3000; id++ {
		all = append(all, randOffer(r, id))
	}
	x := market.NewIndex()
	x.Replace(all)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w := rand.New(rand.NewPCG(7, 8))
		for i := range 3000 {
			switch i % 4 {
			case 0:
				x.Put(randOffer(w, int64(1+w.IntN(4000))))
			case 1:
				x.Delete(int64(1 + w.IntN(4000)))
			case 2:
				x.Apply([]*suanli.Offer{randOffer(w, int64(1+w.IntN(4000)))}, []int64{int64(1 + w.IntN(4000))})
			default:
				if i%1000 == 3 {
					x.Replace(all)
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := suanli.OfferQuery{Query: "num_gpus>=2 dph<2 verified=true", Order: "dph", Limit: 20}
			if g == 1 {
				q = suanli.OfferQuery{Query: "gpu_name in [RTX_4090,L40S]", Limit: 5}
			}
			for {
				select {
				case <-done:
					return
				default:
				}
				res, err := x.Search(q, market.Viewer{})
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := market.Scan(res.Offers, q, market.Viewer{}); err != nil || got.Total != len(res.Offers) {
					t.Errorf("Search(%q) returned offers that do not match it", q.Query)
					return
				}
			}
		}()
	}
	wg.Wait()
}
