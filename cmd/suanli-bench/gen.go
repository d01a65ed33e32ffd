package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/suanli/suanli"
)

// gpuModel is one GPU model of the generated market. The slice is in
// popularity order: the Zipf draw makes consumer cards the head and
// datacenter cards the tail.
type gpuModel struct {
	name     string
	vram     float64 // GB
	dlperf   float64 // per GPU
	tflops   float64 // per GPU
	price    float64 // median $ per GPU-hour
	cc       int
	dc       bool // datacenter part
	maxGPUs  int
	cpuCores int // per GPU
}

var models = []gpuModel{
	{"RTX 4090", 24, 38, 82, 0.35, 890, false, 8, 8},
	{"RTX 3090", 24, 22, 36, 0.18, 860, false, 8, 6},
	{"RTX 3060", 12, 9, 13, 0.06, 860, false, 4, 4},
	{"RTX 3080", 10, 17, 30, 0.10, 860, false, 8, 6},
	{"RTX 4080", 16, 28, 49, 0.22, 890, false, 8, 8},
	{"RTX 4070", 12, 18, 29, 0.12, 890, false, 4, 6},
	{"RTX A6000", 48, 26, 38, 0.45, 860, false, 8, 8},
	{"RTX 3070", 8, 13, 20, 0.08, 860, false, 8, 4},
	{"RTX 5090", 32, 52, 105, 0.65, 1200, false, 8, 8},
	{"A100 SXM4", 80, 62, 78, 1.10, 800, true, 8, 16},
	{"H100 SXM", 80, 120, 200, 2.20, 900, true, 8, 24},
	{"RTX 2080 Ti", 11, 11, 13, 0.07, 750, false, 8, 4},
	{"A40", 48, 24, 37, 0.40, 860, true, 8, 8},
	{"L40S", 48, 48, 91, 0.80, 890, true, 8, 12},
	{"RTX A5000", 24, 17, 27, 0.22, 860, false, 8, 6},
	{"A100 PCIE", 40, 50, 78, 0.80, 800, true, 8, 12},
	{"RTX 6000 Ada", 48, 45, 91, 0.85, 890, true, 8, 12},
	{"H100 PCIE", 80, 95, 150, 1.80, 900, true, 8, 20},
	{"RTX 3080 Ti", 12, 20, 34, 0.14, 860, false, 8, 6},
	{"RTX 4060 Ti", 16, 12, 22, 0.09, 890, false, 4, 4},
	{"Tesla V100", 16, 21, 16, 0.20, 700, true, 8, 8},
	{"A10", 24, 16, 31, 0.25, 860, true, 8, 8},
	{"H200", 141, 130, 200, 3.20, 900, true, 8, 24},
	{"MI300X", 192, 110, 160, 2.50, 942, true, 8, 24},
	{"B200", 180, 230, 450, 5.50, 1000, true, 8, 32},
}

// countries, in Zipf order, with their region and grid carbon intensity.
var countries = []struct {
	code, region string
	carbon       float64
}{
	{"US", "North America", 380}, {"CN", "Asia", 550}, {"DE", "Europe", 350}, {"GB", "Europe", 230}, {"CA", "North America", 120},
	{"FR", "Europe", 60}, {"NL", "Europe", 330}, {"JP", "Asia", 460}, {"KR", "Asia", 420}, {"SE", "Europe", 40},
	{"PL", "Europe", 650}, {"IN", "Asia", 700}, {"BR", "South America", 100}, {"TW", "Asia", 560}, {"SG", "Asia", 470},
	{"AU", "Oceania", 520}, {"ES", "Europe", 170}, {"IT", "Europe", 330}, {"FI", "Europe", 80}, {"NO", "Europe", 30},
	{"CZ", "Europe", 430}, {"RO", "Europe", 260}, {"UA", "Europe", 300}, {"VN", "Asia", 400}, {"TH", "Asia", 450},
	{"HK", "Asia", 600}, {"IS", "Europe", 30}, {"CH", "Europe", 50}, {"AT", "Europe", 150}, {"BE", "Europe", 170},
	{"DK", "Europe", 130}, {"PT", "Europe", 180}, {"IE", "Europe", 300}, {"MX", "North America", 420}, {"AR", "South America", 330},
	{"CL", "South America", 350}, {"ZA", "Africa", 850}, {"TR", "Europe", 430}, {"IL", "Asia", 500}, {"AE", "Asia", 420},
	{"SA", "Asia", 550}, {"MY", "Asia", 580}, {"ID", "Asia", 680}, {"PH", "Asia", 600}, {"NZ", "Oceania", 110},
	{"EE", "Europe", 500}, {"LT", "Europe", 150}, {"LV", "Europe", 120}, {"BG", "Europe", 390}, {"HU", "Europe", 210},
	{"GR", "Europe", 350}, {"RS", "Europe", 640}, {"HR", "Europe", 170}, {"SK", "Europe", 110}, {"SI", "Europe", 230},
	{"KZ", "Asia", 630}, {"CO", "South America", 160}, {"PE", "South America", 250}, {"EG", "Africa", 450}, {"NG", "Africa", 400},
}

var (
	cudaVersions = []float64{11.8, 12.1, 12.2, 12.4, 12.6, 12.8}
	drivers      = []string{"520.61.05", "530.30.02", "535.104.05", "550.54.15", "560.35.03", "570.124.06"}
	storageCosts = []suanli.Money{50_000, 73_000, 100_000, 150_000, 200_000}
	diskSizes    = []float64{250, 500, 1000, 2000, 4000, 8000}
)

// epoch is the generator's "now": end dates are relative to it, so the data
// never depends on the clock.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// generate returns n offers from n/4 machines (four bundles each), the same
// for the same seed.
func generate(n int, seed uint64) []*suanli.Offer {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	modelZipf := rand.NewZipf(r, 1.3, 1, uint64(len(models)-1))
	countryZipf := rand.NewZipf(r, 1.2, 1, uint64(len(countries)-1))
	machines := (n + 3) / 4
	hosts := max(1, machines/5)
	offers := make([]*suanli.Offer, 0, n)
	for m := 0; m < machines && len(offers) < n; m++ {
		md := models[modelZipf.Uint64()]
		ct := countries[countryZipf.Uint64()]
		gpus := []int{1, 2, 4, 8}[r.IntN(4)]
		if md.dc && r.IntN(3) > 0 {
			gpus = 8
		}
		gpus = min(gpus, md.maxGPUs)
		hostID := int64(1 + r.IntN(hosts))
		newHost := r.IntN(10) == 0
		verified := !newHost && r.IntN(10) < 6
		datacenter := (md.dc && r.IntN(10) < 7) || (!md.dc && r.IntN(10) == 0)
		reliability := 0.6
		if !newHost {
			u := r.Float64()
			reliability = math.Round((1-0.25*u*u*u)*10000) / 10000
		}
		cuda := r.IntN(len(cudaVersions))
		premium := 1.0
		if verified {
			premium = 1.15
		}
		priceGPU := md.price * premium * math.Exp(r.NormFloat64()*0.25)
		sc := storageCosts[r.IntN(len(storageCosts))]
		disk := diskSizes[r.IntN(len(diskSizes))]
		inetDown := math.Round(math.Exp(math.Log(100)+r.Float64()*math.Log(100))/10) * 10
		inetUp := math.Round(inetDown*(0.3+0.7*r.Float64())/10) * 10
		days := float64(1 + r.IntN(180))
		var end *time.Time
		if r.IntN(4) > 0 {
			t := epoch.Add(time.Duration(days) * 24 * time.Hour)
			end = &t
		} else {
			days = 3650
		}
		city := r.IntN(5)
		for b := 0; b < 4 && len(offers) < n; b++ {
			ng := max(1, gpus>>b)
			id := int64(len(offers) + 1)
			gp := suanli.Money(math.Round(priceGPU*1000)) * 1000 // to the tenth of a cent
			o := &suanli.Offer{
				ID: id, MachineID: int64(m + 1), HostID: hostID, Hostname: fmt.Sprintf("m%07d", m+1),
				GPUName: md.name, NumGPUs: ng, TotalGPUs: gpus, GPURAM: md.vram, GPUTotalRAM: md.vram * float64(ng),
				ComputeCap: md.cc, CUDAVersion: cudaVersions[cuda], DriverVersion: drivers[cuda],
				GPUArch: "nvidia", CPUArch: "amd64", CPUName: "EPYC 7" + fmt.Sprint(r.IntN(8)) + "43",
				CPUCores: md.cpuCores * ng, CPURAM: float64(32 * ng), DiskSpace: disk * float64(ng) / float64(gpus),
				DiskBW: float64(500 + 250*r.IntN(12)), InetUp: inetUp, InetDown: inetDown,
				InetUpCost: suanli.Money(r.IntN(3) * 1000), InetDownCost: suanli.Money(r.IntN(3) * 1000),
				GPUPrice: gp, DPHBase: gp * suanli.Money(ng), StorageCost: sc,
				MinBid:      suanli.Money(math.Round(float64(gp)*float64(ng)*(0.3+0.4*r.Float64())/1000)) * 1000,
				Reliability: reliability, Verified: verified, Rentable: r.IntN(4) > 0, Simulated: r.IntN(1000) == 0,
				Datacenter: datacenter, Geolocation: fmt.Sprintf("City %d, %s", city, ct.code), Country: ct.code, Region: ct.region,
				DLPerf: math.Round(md.dlperf*float64(ng)*(0.9+0.15*r.Float64())*10) / 10, TotalFlops: md.tflops * float64(ng),
				Duration: days, EndDate: end, StaticIP: r.IntN(2) == 0, DirectPortCount: []int{0, 10, 100}[r.IntN(3)],
				CarbonIntensity: ct.carbon, Green: ct.carbon < 100, PreemptGraceS: 30, HostStatus: "online",
			}
			if md.dc && datacenter {
				o.CPUArch = []string{"amd64", "amd64", "arm64"}[r.IntN(3)]
			}
			switch {
			case datacenter:
				o.Tier = "datacenter"
			case verified:
				o.Tier = "verified"
			default:
				o.Tier = "community"
			}
			derive(o)
			offers = append(offers, o)
		}
	}
	return offers
}

// update is one change the writer applies: a rentable flip (a rental or a
// release) or a price edit of a few percent.
type update struct {
	id     int64
	flip   bool
	factor float64
}

// updates returns the writer's seeded stream of changes.
func updates(n int, seed uint64) func() update {
	r := rand.New(rand.NewPCG(seed, 0xc4a9e))
	return func() update {
		u := update{id: int64(1 + r.IntN(n))}
		if r.IntN(2) == 0 {
			u.flip = true
		} else {
			u.factor = math.Exp(r.NormFloat64() * 0.05)
		}
		return u
	}
}

// apply returns a copy of o with u applied; derived fields follow.
func (u update) apply(o *suanli.Offer) *suanli.Offer {
	c := *o
	if u.flip {
		c.Rentable = !c.Rentable
	} else {
		c.GPUPrice = max(1000, suanli.Money(math.Round(float64(c.GPUPrice)*u.factor/1000))*1000)
		c.DPHBase = c.GPUPrice * suanli.Money(c.NumGPUs)
		c.MinBid = c.DPHBase / 2 / 1000 * 1000
	}
	derive(&c)
	return &c
}

// derive sets the derived fields at the default storage size, as the index
// computes them (the SQLite baseline stores them as columns).
func derive(o *suanli.Offer) {
	o.DPHTotal = o.DPHBase + suanli.MulDiv(o.StorageCost, suanli.DefaultStorageGB*1000, 730*1000)
	o.DLPerfPerDPH, o.FlopsPerDPH = 0, 0
	if o.DPHTotal > 0 {
		o.DLPerfPerDPH = o.DLPerf / (float64(o.DPHTotal) / 1e6)
		o.FlopsPerDPH = o.TotalFlops / (float64(o.DPHTotal) / 1e6)
	}
}
