package market_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/market"
)

// mkOffer returns a rentable 1×RTX 4090 offer with id, changed by edit.
func mkOffer(id int64, edit func(o *suanli.Offer)) *suanli.Offer {
	o := &suanli.Offer{
		ID: id, MachineID: id, HostID: 100 + id, Hostname: "rig", GPUName: "RTX 4090",
		NumGPUs: 1, TotalGPUs: 1, GPURAM: 24, GPUTotalRAM: 24, ComputeCap: 890, CUDAVersion: 12.4,
		DriverVersion: "550.54", GPUArch: "nvidia", CPUArch: "amd64", CPUCores: 16, CPURAM: 64,
		DiskSpace: 500, DiskBW: 2000, InetUp: 500, InetDown: 1000,
		DPHBase: 400_000, StorageCost: 73_000, // $0.073/GB-month: 10 GB is $0.001/h
		Reliability: 0.99, Verified: true, Rentable: true, Tier: "verified",
		Country: "DE", Region: "Europe", Geolocation: "Berlin, DE", DLPerf: 40, TotalFlops: 80,
		Duration: 30, HostStatus: "online", CarbonIntensity: 380, CO2PerHour: 201.4,
	}
	if edit != nil {
		edit(o)
	}
	return o
}

// fixture is a small market: ids 1..8.
func fixture() []*suanli.Offer {
	end := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	return []*suanli.Offer{
		mkOffer(1, nil),
		mkOffer(2, func(o *suanli.Offer) {
			o.NumGPUs, o.TotalGPUs, o.GPUTotalRAM, o.DPHBase, o.CO2PerHour = 2, 2, 48, 800_000, 372.4
		}),
		mkOffer(3, func(o *suanli.Offer) {
			o.GPUName, o.GPURAM, o.GPUTotalRAM, o.NumGPUs, o.TotalGPUs = "A100 SXM4", 80, 640, 8, 8
			o.DPHBase, o.DLPerf, o.Datacenter, o.Tier, o.Country, o.Region = 9_600_000, 400, true, "datacenter", "US", "North America"
			o.ComputeCap, o.CUDAVersion, o.DriverVersion, o.EndDate = 800, 12.2, "535.104", &end
			o.CarbonIntensity, o.CO2PerHour = 370, 1917.5
		}),
		mkOffer(4, func(o *suanli.Offer) { o.Rentable = false }),
		mkOffer(5, func(o *suanli.Offer) { o.Simulated = true; o.HostID = 42 }),
		mkOffer(6, func(o *suanli.Offer) {
			o.GPUName, o.GPURAM, o.GPUTotalRAM, o.DPHBase, o.Reliability, o.Verified, o.Tier = "RTX 3090", 24, 24, 199_000, 0.6, false, "community"
			o.DLPerf, o.DriverVersion, o.Country, o.CarbonIntensity, o.CO2PerHour = 25, "535.9", "FR", 56, 24.1
			o.GreenDiscount = 12.5
		}),
		mkOffer(7, func(o *suanli.Offer) {
			o.GPUName, o.NumGPUs, o.TotalGPUs, o.GPURAM, o.GPUTotalRAM, o.GPUArch, o.ComputeCap = "", 0, 0, 0, 0, "", 0
			o.CPUCores, o.CPURAM, o.DPHBase, o.DLPerf, o.TotalFlops, o.CUDAVersion, o.CO2PerHour = 64, 256, 300_000, 0, 0, 0, 121.6
		}),
		mkOffer(8, func(o *suanli.Offer) { o.DPHBase = 499_000; o.Hostname = "rig_8"; o.CO2PerHour = 210 }), // dph_total exactly $0.50
	}
}

func ids(r *suanli.OfferResult) []int64 {
	out := []int64{}
	for _, o := range r.Offers {
		out = append(out, o.ID)
	}
	return out
}

// searchBoth runs q on Scan and on an Index and checks they agree.
func searchBoth(t *testing.T, offers []*suanli.Offer, q suanli.OfferQuery, v market.Viewer) (*suanli.OfferResult, error) {
	t.Helper()
	x := market.NewIndex()
	for _, o := range offers {
		x.Put(o)
	}
	want, err1 := market.Scan(offers, q, v)
	got, err2 := x.Search(q, v)
	if (err1 == nil) != (err2 == nil) {
		t.Fatalf("Scan(%+v) error %v, Index.Search error %v", q, err1, err2)
	}
	if err1 == nil {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Index.Search(%+v) differs from Scan (-scan +index):\n%s", q, diff)
		}
	}
	return got, err2
}

func TestSearchConditions(t *testing.T) {
	all := fixture()
	tests := []struct {
		q     string
		order string
		want  []int64
	}{
		{"", "id", []int64{1, 2, 3, 6, 7, 8}},
		{"rentable=any", "id", []int64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"rentable=false", "id", []int64{4, 5}}, // 5 is simulated: not rentable for a stranger
		{"num_gpus<2", "id", []int64{1, 6, 7, 8}},
		{"num_gpus<=2", "id", []int64{1, 2, 6, 7, 8}},
		{"num_gpus=2", "id", []int64{2}},
		{"num_gpus==2", "id", []int64{2}},
		{"num_gpus!=1", "id", []int64{2, 3, 7}},
		{"num_gpus>=2", "id", []int64{2, 3}},
		{"num_gpus>2", "id", []int64{3}},
		{"num_gpus in [0,8]", "id", []int64{3, 7}},
		{"num_gpus notin [0,8]", "id", []int64{1, 2, 6, 8}},
		{"gpu_name=RTX_4090", "id", []int64{1, 2, 8}},
		{"gpu_name=rtx_4090", "id", []int64{1, 2, 8}},
		{`gpu_name=""`, "id", []int64{7}},
		{"gpu_name in [A100_SXM4, 'RTX 3090']", "id", []int64{3, 6}},
		{"gpu_name notin [RTX_4090]", "id", []int64{3, 6, 7}},
		{"driver_version<535.10", "id", []int64{6}}, // natural order: 535.9 < 535.10 < 535.104
		{"driver_version>=535.104", "id", []int64{1, 2, 3, 7, 8}},
		{"hostname=rig_8", "id", nil},
		{`hostname="rig_8"`, "id", []int64{8}},
		{"gpu_ram>=80", "id", []int64{3}},
		{"gpu_ram>=80GB", "id", []int64{3}},
		{"gpu_total_ram>40 gpu_total_ram<=48", "id", []int64{2}},
		{"compute_cap>=8.9", "id", []int64{1, 2, 6, 8}},
		{"compute_cap<890", "id", []int64{3, 7}},
		{"cuda_vers<12.4", "id", []int64{3, 7}},
		{"reliability<0.9", "id", []int64{6}},
		{"verified=false", "id", []int64{6}},
		{"verified!=true", "id", []int64{6}},
		{"verified in [false]", "id", []int64{6}},
		{"datacenter=true tier=datacenter", "id", []int64{3}},
		{"country in [us,fr]", "id", []int64{3, 6}},
		{"region=North_America", "id", []int64{3}},
		{"geolocation=Berlin,_DE", "id", []int64{1, 2, 3, 6, 7, 8}},
		{"end_date<2026-07-01", "id", []int64{3}},
		{"end_date>2027-01-01", "id", []int64{1, 2, 6, 7, 8}}, // open-ended is later than any date
		// Money compares exactly: offer 8 costs $0.499 + 10 GB × $0.073/730 h = $0.500000/h.
		{"dph<0.5", "id", []int64{1, 6, 7}},
		{"dph<=0.5", "id", []int64{1, 6, 7, 8}},
		{"dph_total=0.5", "id", []int64{8}},
		{"dph=$0.50/h", "id", []int64{8}},
		{"dph_base=0.499", "id", []int64{8}},
		{"dph>0.5", "id", []int64{2, 3}},
		{"dph<=0.499999", "id", []int64{1, 6, 7}},
		{"dph>0.5 dph<1", "id", []int64{2}},
		{"dlperf_per_dphtotal>100", "id", []int64{6}},                          // 25 / 0.2 = 125
		{"flops_per_dphtotal>=199.5 flops_per_dphtotal<200", "id", []int64{1}}, // 80 / 0.401
		{"cpu_ram>=256 num_gpus=0", "id", []int64{7}},
		// Estimated emissions (advisor.OfferCO2PerHour), filtered and ordered.
		{"co2_g_per_hour<500", "id", []int64{1, 2, 6, 7, 8}},
		{"co2_g_per_hour<500", "co2_g_per_hour-", []int64{2, 8, 1, 7, 6}},
		{"co2_g_per_hour>=1000", "id", []int64{3}},
		{"co2_g_per_hour<100 green=false", "id", []int64{6}},
		// A host's green discount (percent off its compute prices).
		{"green_discount>0", "id", []int64{6}},
		{"green_discount>=12.5", "id", []int64{6}},
		{"green_discount>12.5", "id", nil},
		{"green_discount=0 num_gpus=1", "id", []int64{1, 8}},
		{"gpu_name in [RTX_3090,RTX_4090]", "green_discount-,id", []int64{6, 1, 2, 8}},
	}
	for _, tt := range tests {
		r, err := searchBoth(t, all, suanli.OfferQuery{Query: tt.q, Order: tt.order}, market.Viewer{})
		if err != nil {
			t.Errorf("Search(%q): %v", tt.q, err)
			continue
		}
		if tt.want == nil {
			tt.want = []int64{}
		}
		if diff := cmp.Diff(tt.want, ids(r)); diff != "" || r.Total != len(tt.want) {
			t.Errorf("Search(%q) = %v (total %d), want %v", tt.q, ids(r), r.Total, tt.want)
		}
	}
}

func TestSearchStorage(t *testing.T) {
	all := fixture()
	for _, tt := range []struct {
		gb   float64
		want suanli.Money // dph_total of offer 1: $0.40 + gb × $0.073 / 730
	}{
		{0, 401_000}, {10, 401_000}, {100, 410_000}, {1, 400_100}, {0.5, 400_050}, {1000, 500_000},
	} {
		r, err := searchBoth(t, all, suanli.OfferQuery{Query: "id=1", StorageGB: tt.gb}, market.Viewer{})
		if err != nil {
			t.Fatal(err)
		}
		o := r.Offers[0]
		if o.DPHTotal != tt.want {
			t.Errorf("StorageGB %v: dph_total = %v, want %v", tt.gb, o.DPHTotal, tt.want)
		}
		if want := 40 / (float64(tt.want) / 1e6); o.DLPerfPerDPH != want {
			t.Errorf("StorageGB %v: dlperf_per_dphtotal = %v, want %v", tt.gb, o.DLPerfPerDPH, want)
		}
		if want := 40 * 0.99 / (float64(tt.want) / 1e6); o.Score != want {
			t.Errorf("StorageGB %v: score = %v, want dlperf × reliability per dollar %v", tt.gb, o.Score, want)
		}
	}
	// The filter sees the same dph_total: at 1000 GB offer 1 costs exactly $0.50.
	r, err := searchBoth(t, all, suanli.OfferQuery{Query: "dph<=0.5 gpu_name=RTX_4090 num_gpus=1", StorageGB: 1000, Order: "id"}, market.Viewer{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(r); !cmp.Equal(got, []int64{1}) {
		t.Errorf("dph<=0.5 at 1000 GB = %v, want [1]", got)
	}
}

func TestSearchViewer(t *testing.T) {
	all := fixture()
	for _, tt := range []struct {
		v    market.Viewer
		want bool // offer 5 (simulated, host 42) is returned and rentable
	}{
		{market.Viewer{}, false},
		{market.Viewer{AccountID: 7}, false},
		{market.Viewer{AccountID: 42}, true},
		{market.Viewer{AllowSimulated: true}, true},
	} {
		r, err := searchBoth(t, all, suanli.OfferQuery{Query: "id=5"}, tt.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(r.Offers) == 1; got != tt.want {
			t.Errorf("viewer %+v: id=5 found = %v, want %v", tt.v, got, tt.want)
		}
		r, err = searchBoth(t, all, suanli.OfferQuery{Query: "id=5 rentable=any"}, tt.v)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Offers) != 1 || r.Offers[0].Rentable != tt.want {
			t.Errorf("viewer %+v: id=5 rentable=any = %+v, want one offer with Rentable %v", tt.v, r.Offers, tt.want)
		}
	}
	// Returned offers are copies: the index keeps Rentable as Put.
	x := market.NewIndex()
	x.Put(all[4])
	r, _ := x.Search(suanli.OfferQuery{Query: "rentable=any"}, market.Viewer{})
	r.Offers[0].GPUName = "changed"
	if o, _ := x.Get(5); !o.Rentable || o.GPUName != "RTX 4090" || o.DPHTotal != 401_000 {
		t.Errorf("index offer changed by a search: %+v", o)
	}
}

func TestSearchOrder(t *testing.T) {
	all := fixture()
	tests := []struct {
		order string
		want  []int64
	}{
		{"dph", []int64{6, 7, 1, 8, 2, 3}},
		{"dph-", []int64{3, 2, 8, 1, 7, 6}},
		{"gpu_name,dph-", []int64{7, 3, 6, 2, 8, 1}}, // "" < A100 < RTX 3090 < RTX 4090
		{"num_gpus,reliability", []int64{7, 6, 1, 8, 2, 3}},
		{"verified-,id-", []int64{8, 7, 3, 2, 1, 6}},
		{"country", []int64{1, 2, 7, 8, 6, 3}}, // ties by id
		{"dlperf_per_dphtotal-", []int64{6, 1, 8, 2, 3, 7}},
		// DefaultOrder: score, most first — the cheap host 6 (reliability
		// 0.6) has the most dlperf per dollar but falls behind 1 and 8.
		{"", []int64{1, 8, 6, 2, 3, 7}},
		{"end_date-", []int64{1, 2, 6, 7, 8, 3}},
	}
	for _, tt := range tests {
		r, err := searchBoth(t, all, suanli.OfferQuery{Order: tt.order}, market.Viewer{})
		if err != nil {
			t.Fatalf("order %q: %v", tt.order, err)
		}
		if diff := cmp.Diff(tt.want, ids(r)); diff != "" {
			t.Errorf("Search(order %q) = %v, want %v", tt.order, ids(r), tt.want)
		}
	}
}

func TestSearchPaging(t *testing.T) {
	var all []*suanli.Offer
	for i := int64(1); i <= 150; i++ {
		all = append(all, mkOffer(i, func(o *suanli.Offer) { o.DPHBase = suanli.Money(1_000_000 - i%7*1000) }))
	}
	r, err := searchBoth(t, all, suanli.OfferQuery{Order: "dph"}, market.Viewer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Offers) != market.DefaultLimit || r.Total != 150 {
		t.Errorf("default page: %d offers of %d, want %d of 150", len(r.Offers), r.Total, market.DefaultLimit)
	}
	var paged []int64
	for off := 0; off < 160; off += 40 {
		r, err := searchBoth(t, all, suanli.OfferQuery{Order: "dph", Limit: 40, Offset: off}, market.Viewer{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Total != 150 {
			t.Errorf("offset %d: total %d, want 150", off, r.Total)
		}
		paged = append(paged, ids(r)...)
	}
	full, _ := searchBoth(t, all, suanli.OfferQuery{Order: "dph", Limit: 1000}, market.Viewer{})
	if diff := cmp.Diff(ids(full), paged); diff != "" {
		t.Errorf("pages differ from one full page (-full +paged):\n%s", diff)
	}
	if got := ids(full)[:4]; !cmp.Equal(got, []int64{6, 13, 20, 27}) {
		t.Errorf("cheapest four = %v, want ties broken by id [6 13 20 27]", got)
	}

	for _, q := range []suanli.OfferQuery{
		{Limit: -1}, {Limit: market.MaxLimit + 1}, {Offset: -1}, {StorageGB: -1}, {Query: "foo=1"}, {Order: "foo"},
	} {
		_, err := searchBoth(t, all, q, market.Viewer{})
		if suanli.ErrorCode(err) != suanli.EINVALID {
			t.Errorf("Search(%+v) error %v, want EINVALID", q, err)
		}
	}
}

func TestSearchExplain(t *testing.T) {
	var all []*suanli.Offer
	for i := int64(1); i <= 10_000; i++ {
		all = append(all, mkOffer(i, func(o *suanli.Offer) {
			if i <= 130 {
				o.GPURAM = 80
				o.DPHBase = suanli.Money(1_869_000 + i*10_000) // cheapest $1.87/h with 10 GB
			}
		}))
	}
	r, err := searchBoth(t, all, suanli.OfferQuery{Query: "gpu_ram>=80 dph<1", Explain: true}, market.Viewer{})
	if err != nil {
		t.Fatal(err)
	}
	want := &suanli.Explain{
		Considered: 10_000,
		Steps: []suanli.ExplainStep{
			{Condition: "rentable=true (default)", Removed: 0, Remaining: 10_000},
			{Condition: "gpu_ram>=80", Removed: 9_870, Remaining: 130, Nearest: "largest is 24 GB"},
			{Condition: "dph<1", Removed: 130, Remaining: 0, Nearest: "cheapest is $1.88/h"},
		},
		Summary: "gpu_ram>=80 removed 9,870 of 10,000; dph<1 removed the remaining 130 — cheapest is $1.88/h",
	}
	if diff := cmp.Diff(want, r.Explain); diff != "" {
		t.Errorf("Explain mismatch (-want +got):\n%s", diff)
	}

	fx := fixture()
	for _, tt := range []struct{ q, summary, nearest string }{
		{"gpu_name=H100 rentable=any", `gpu_name=H100 removed all 8 — most common gpu_name: RTX 4090 (5), "" (1), A100 SXM4 (1)`,
			`most common gpu_name: RTX 4090 (5), "" (1), A100 SXM4 (1)`},
		{"num_gpus=4", "rentable=true (default) removed 2 of 8; num_gpus=4 removed the remaining 6 — closest is 2", "closest is 2"},
		{"num_gpus=1", "rentable=true (default) removed 2 of 8; num_gpus=1 removed 3 of 6; 3 of 8 match", "closest is 0"},
		{"rentable=any", "all 8 offers match", ""},
		{"rentable=any gpu_ram<1", "gpu_ram<1 removed 7 of 8; 1 of 8 match", "lowest is 24 GB"},
		{"dph_base<0.1 rentable=any", "dph_base<0.1 removed all 8 — cheapest is $0.199/h", "cheapest is $0.199/h"},
	} {
		r, err := searchBoth(t, fx, suanli.OfferQuery{Query: tt.q, Explain: true}, market.Viewer{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Explain.Summary != tt.summary {
			t.Errorf("Explain(%q).Summary = %q, want %q", tt.q, r.Explain.Summary, tt.summary)
		}
		if n := len(r.Explain.Steps); n > 0 && r.Explain.Steps[n-1].Nearest != tt.nearest {
			t.Errorf("Explain(%q) last step nearest = %q, want %q", tt.q, r.Explain.Steps[n-1].Nearest, tt.nearest)
		}
	}
}

func TestIndexPutDeleteGet(t *testing.T) {
	x := market.NewIndex()
	r, err := x.Search(suanli.OfferQuery{Query: "gpu_ram>=24", Order: "dph", Explain: true, Offset: 1 << 62}, market.Viewer{})
	if err != nil || r.Total != 0 || len(r.Offers) != 0 || r.Explain.Summary != "the market has no offers" {
		t.Errorf("Search on an empty index = %+v, %v; want nothing, explained", r, err)
	}
	o := mkOffer(1, nil)
	x.Put(o)
	o.GPUName = "mutated after Put"
	got, ok := x.Get(1)
	if !ok || got.GPUName != "RTX 4090" {
		t.Fatalf("Get(1) = %+v, %v; want the offer as Put", got, ok)
	}
	x.Put(mkOffer(1, func(o *suanli.Offer) { o.NumGPUs = 3 }))
	x.Put(mkOffer(2, nil))
	if got, _ := x.Get(1); got.NumGPUs != 3 || x.Len() != 2 {
		t.Errorf("after replace: num_gpus %d, len %d; want 3, 2", got.NumGPUs, x.Len())
	}
	x.Delete(1)
	x.Delete(99)
	if _, ok := x.Get(1); ok || x.Len() != 1 {
		t.Errorf("after Delete(1): found %v, len %d; want false, 1", ok, x.Len())
	}
	_, err = x.Search(suanli.OfferQuery{Query: "gpu_ram>>1"}, market.Viewer{})
	var e *suanli.Error
	if !errors.As(err, &e) || e.Field != "gpu_ram" {
		t.Errorf("Search(gpu_ram>>1) error %v, want EINVALID on gpu_ram", err)
	}
}

func TestReferences(t *testing.T) {
	for _, c := range []struct {
		q    suanli.OfferQuery
		want bool
	}{
		{suanli.OfferQuery{Query: "latency_ms<40"}, true},
		{suanli.OfferQuery{Order: "dph,latency_ms-"}, true},
		{suanli.OfferQuery{Query: "num_gpus>=2", Order: "dph"}, false},
		{suanli.OfferQuery{}, false},
		{suanli.OfferQuery{Query: "latency_ms<"}, false}, // invalid: Search reports it
	} {
		if got := market.References(c.q, "latency_ms"); got != c.want {
			t.Errorf("References(%+v) = %v, want %v", c.q, got, c.want)
		}
	}
}
