package control

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
	"github.com/suanli/suanli/market"
	"github.com/suanli/suanli/sched"
)

// gpuPerf is a GPU model's dense FP16 tensor TFLOPS and a DLPerf-like score
// (relative deep-learning throughput), used for dlperf and total_flops.
var gpuPerf = map[string][2]float64{
	"RTX 3060": {51, 9}, "RTX 3070": {81, 13}, "RTX 3080": {119, 19}, "RTX 3090": {142, 24},
	"RTX 4070": {117, 17}, "RTX 4080": {195, 27}, "RTX 4090": {330, 40}, "RTX 5090": {419, 55},
	"RTX A4000": {77, 11}, "RTX A5000": {111, 16}, "RTX A6000": {155, 24}, "RTX 6000 Ada": {365, 42},
	"L4": {121, 14}, "L40": {181, 30}, "L40S": {366, 44}, "A10": {125, 17}, "A40": {150, 25},
	"A100": {312, 58}, "A100 80GB": {312, 62}, "A100 SXM4 80GB": {312, 64}, "H100": {989, 120},
	"H100 PCIe": {756, 100}, "H100 SXM": {989, 125}, "H200": {989, 135}, "B200": {2250, 260},
	"V100": {125, 22}, "T4": {65, 8},
}

func perfOf(name string) (tflops, dlperf float64) {
	if p, ok := gpuPerf[name]; ok {
		return p[0], p[1]
	}
	for k, p := range gpuPerf {
		if strings.HasPrefix(name, k) {
			return p[0], p[1]
		}
	}
	return 0, 0
}

// greenGrid reports whether m's grid is green as its offer shows it
// (advisor.Annotate): a known carbon intensity for its country, at most
// advisor.GreenThreshold.
func greenGrid(m *suanli.Machine) bool {
	g, ok := advisor.CarbonIntensity(m.Country)
	return ok && advisor.IsGreen(g.GPerKWh)
}

// rentTerms returns m with the listing renters are charged under
// (suanli.Listing.ForRenters): the one place the green discount enters
// prices, used by offers, quotes, placements and relaunches alike. It
// returns m itself when the listing has no green discount, else a shallow
// copy; m is not changed.
func rentTerms(m *suanli.Machine) *suanli.Machine {
	if m.Listing.GreenDiscountBP == 0 {
		return m
	}
	c := *m
	c.Listing = m.Listing.ForRenters(greenGrid(m))
	return &c
}

// offerFor derives a machine's offer from its hardware, listing (as renters
// are charged under it, green discount included) and what its live
// instances hold.
func offerFor(m *suanli.Machine, u sched.Usage, now time.Time) *suanli.Offer {
	m = rentTerms(m)
	hw := m.Hardware
	l := m.Listing
	o := &suanli.Offer{
		ID: m.ID, MachineID: m.ID, HostID: m.OwnerID, Hostname: hw.Hostname,
		CPUArch: hw.CPUArch, CPUName: hw.CPUModel, DiskSpace: float64(hw.DiskFreeGB),
		InetUp: m.InetUpMbps, InetDown: m.InetDownMbps, InetUpCost: l.PriceInetUp, InetDownCost: l.PriceInetDown,
		GPUPrice: l.PriceGPU, CPUPrice: l.PriceCPU, RAMPrice: l.PriceRAM, StorageCost: l.PriceDisk,
		Reliability: m.Reliability, Verified: m.Verified, Simulated: m.Simulated, Datacenter: m.Datacenter,
		Geolocation: m.Geolocation, Country: m.Country, Region: m.Region, EndDate: l.EndDate,
		PreemptGraceS: l.PreemptGraceS, HostStatus: m.Status, Duration: 3650, EncryptedDisk: hw.DiskEncryption != "",
		GreenDiscount: float64(l.GreenDiscountBP) / 100,
	}
	switch {
	case m.Datacenter:
		o.Tier = "datacenter"
	case m.Verified:
		o.Tier = "verified"
	default:
		o.Tier = "community"
	}
	if l.EndDate != nil {
		o.Duration = math.Max(0, l.EndDate.Sub(now).Hours()/24)
	}
	free := 0
	if m.IsGPU() {
		g := hw.GPUs[0]
		free = len(sched.FreeGPUs(m, u.GPUs))
		total := len(hw.GPUs)
		o.GPUName, o.NumGPUs, o.TotalGPUs = g.Name, free, total
		o.GPURAM = float64(g.MemoryMB) / 1024
		o.GPUTotalRAM = o.GPURAM * float64(free)
		if cc, err := strconv.ParseFloat(g.ComputeCap, 64); err == nil {
			o.ComputeCap = int(math.Round(cc * 100))
		}
		o.CUDAVersion, _ = strconv.ParseFloat(g.CUDAVersion, 64)
		o.DriverVersion = g.DriverVersion
		o.GPUArch = "nvidia"
		o.CPUCores = hw.CPUCores * free / total
		o.CPURAM = float64(hw.RAMMB*int64(free)/int64(total)) / 1024
		o.DPHBase = l.PriceGPU * suanli.Money(free)
		o.MinBid = l.MinBid * suanli.Money(free)
		tf, dl := perfOf(g.Name)
		o.TotalFlops, o.DLPerf = tf*float64(free), dl*float64(free)
	} else {
		free = hw.CPUCores - u.CPUCores
		o.CPUCores = free
		ramMB := hw.RAMMB - u.RAMMB
		o.CPURAM = float64(ramMB) / 1024
		o.DPHBase = l.PriceCPU*suanli.Money(free) + suanli.MulDiv(l.PriceRAM, ramMB, 1024)
		o.MinBid = l.MinBid * suanli.Money(free)
	}
	o.DPHTotal = o.DPHBase + suanli.MulDiv(l.PriceDisk, suanli.DefaultStorageGB*suanli.MicrosPerHour, suanli.MicrosPerMonth)
	o.Rentable = l.Listed && m.Status == suanli.MachineOnline && free > 0 && (l.EndDate == nil || l.EndDate.After(now))
	advisor.Annotate(o, advisor.Location{}) // carbon intensity and green, from the host's country
	o.CO2PerHour = advisor.OfferCO2PerHour(o)
	return o
}

// InterruptionWindow is how far back an offer's interruption rate looks.
const InterruptionWindow = 30 * 24 * time.Hour

// refreshOffer recomputes one machine's offer in the index (removing it
// when the machine is not listed).
func (s *Service) refreshOffer(ctx context.Context, machineID int64) error {
	m, err := s.Store.FindMachineByID(ctx, machineID)
	if suanli.ErrorCode(err) == suanli.ENOTFOUND {
		s.Index.Delete(machineID)
		return nil
	} else if err != nil {
		return err
	}
	return s.putOffer(ctx, m)
}

func (s *Service) putOffer(ctx context.Context, m *suanli.Machine) error {
	if !m.Listing.Listed {
		s.Index.Delete(m.ID)
		return nil
	}
	gpus, cores, ram, err := s.Store.MachineUsage(ctx, m.ID)
	if err != nil {
		return err
	}
	o := offerFor(m, sched.Usage{GPUs: gpus, CPUCores: cores, RAMMB: ram}, s.now())
	if o.InterruptionRate, err = s.Store.InterruptionRate(ctx, m.ID, s.now().Add(-InterruptionWindow)); err != nil {
		return err
	}
	s.Index.Put(o)
	return nil
}

func (s *Service) rebuildIndex(ctx context.Context) error {
	ms, _, err := s.Store.FindMachines(ctx, suanli.MachineFilter{})
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := s.putOffer(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) viewer(p *suanli.Principal) market.Viewer {
	v := market.Viewer{AllowSimulated: s.cfg.AllowSimulated}
	if p != nil {
		v.AccountID = p.AccountID
	}
	return v
}

// SearchOffers runs a query over the offer index.
func (s *Service) SearchOffers(ctx context.Context, q suanli.OfferQuery) (*suanli.OfferResult, error) {
	p, err := principal(ctx, suanli.ScopeInstanceRead)
	if err != nil {
		return nil, err
	}
	if q.From == "" {
		return s.Index.Search(q, s.viewer(p))
	}
	// latency_ms depends on the renter's location. A query that neither
	// filters nor orders by it is answered by the index and only its page
	// is annotated; one that does annotates copies of all offers and scans
	// them (the index's columns cannot hold a per-renter value).
	loc, err := advisor.ParseLocation(q.From)
	if err != nil {
		return nil, suanli.FieldErrorf("from", "%v: give a country code (DE), a place, or \"lat,lon\"", err)
	}
	if !market.References(q, "latency_ms") {
		res, err := s.Index.Search(q, s.viewer(p))
		if err != nil {
			return nil, err
		}
		for _, o := range res.Offers {
			advisor.Annotate(o, loc)
		}
		return res, nil
	}
	offers := s.Index.All()
	for _, o := range offers {
		advisor.Annotate(o, loc)
	}
	return market.Scan(offers, q, s.viewer(p))
}

// FindOfferByID returns one listed offer. ENOTFOUND.
func (s *Service) FindOfferByID(ctx context.Context, id int64) (*suanli.Offer, error) {
	if _, err := principal(ctx, suanli.ScopeInstanceRead); err != nil {
		return nil, err
	}
	o, ok := s.Index.Get(id)
	if !ok {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "offer %d not found: it is not listed (search again)", id)
	}
	return o, nil
}

// ViewerAll is a viewer that sees simulated offers as rentable (for the
// operator's overview page).
func (s *Service) ViewerAll() market.Viewer { return market.Viewer{AllowSimulated: true} }
