package suanli

import "time"

// Offer is what a renter can rent now: one listed machine's free capacity at
// its listed terms. Offer.ID equals the machine's ID; NumGPUs is how many of
// its GPUs are free now (CPU-only machines: 0, renting cores). Offers are
// derived, never stored: the market index builds them from machines and
// instances.
//
// JSON names are the query language's field names (DESIGN §5). Sizes are in
// GB, bandwidth in Mb/s, money in Money (micro-units) per hour unless named
// otherwise.
type Offer struct {
	ID            int64   `json:"id"`
	MachineID     int64   `json:"machine_id"`
	HostID        int64   `json:"host_id"` // the provider's account
	Hostname      string  `json:"hostname"`
	GPUName       string  `json:"gpu_name"` // "" on CPU-only machines
	NumGPUs       int     `json:"num_gpus"` // free now
	TotalGPUs     int     `json:"total_gpus"`
	GPURAM        float64 `json:"gpu_ram"`       // GB per GPU
	GPUTotalRAM   float64 `json:"gpu_total_ram"` // GB over the offer's GPUs
	ComputeCap    int     `json:"compute_cap"`   // 890 for 8.9
	CUDAVersion   float64 `json:"cuda_vers"`
	DriverVersion string  `json:"driver_version"`
	GPUArch       string  `json:"gpu_arch"` // "nvidia", "amd", "" when none
	CPUArch       string  `json:"cpu_arch"` // "amd64", "arm64"
	CPUName       string  `json:"cpu_name"`
	CPUCores      int     `json:"cpu_cores"` // allotted with the offer's GPUs (all free cores on CPU machines)
	CPURAM        float64 `json:"cpu_ram"`   // GB allotted
	DiskSpace     float64 `json:"disk_space"`
	DiskBW        float64 `json:"disk_bw"` // MB/s
	InetUp        float64 `json:"inet_up"`
	InetDown      float64 `json:"inet_down"`
	InetUpCost    Money   `json:"inet_up_cost"`   // per GB
	InetDownCost  Money   `json:"inet_down_cost"` // per GB
	GPUPrice      Money   `json:"gpu_price"`      // per GPU-hour
	CPUPrice      Money   `json:"cpu_price"`      // per core-hour (CPU-only)
	RAMPrice      Money   `json:"ram_price"`      // per GB-hour (CPU-only)
	DPHBase       Money   `json:"dph_base"`       // compute per hour for the whole offer
	DPHTotal      Money   `json:"dph_total"`      // dph_base + storage per hour for the searched storage size
	StorageCost   Money   `json:"storage_cost"`   // per GB-month
	MinBid        Money   `json:"min_bid"`        // per hour for the whole offer
	Reliability   float64 `json:"reliability"`
	Verified      bool    `json:"verified"`
	Rentable      bool    `json:"rentable"`
	Simulated     bool    `json:"simulated"`
	Datacenter    bool    `json:"datacenter"`
	Tier          string  `json:"tier"` // "datacenter", "verified", "community"
	Geolocation   string  `json:"geolocation"`
	Country       string  `json:"country"`
	Region        string  `json:"region"`
	DLPerf        float64 `json:"dlperf"`
	DLPerfPerDPH  float64 `json:"dlperf_per_dphtotal"`
	// Score is DLPerf weighted by the host's reliability, per dollar-hour
	// of dph_total: what a search orders by unless told otherwise, so
	// that a cheap host that loses its rentals does not come first.
	Score       float64    `json:"score"`
	TotalFlops  float64    `json:"total_flops"` // TFLOPS
	FlopsPerDPH float64    `json:"flops_per_dphtotal"`
	Duration    float64    `json:"duration"` // days until the listing's end date (a large number when open-ended)
	EndDate     *time.Time `json:"end_date,omitempty"`
	StaticIP    bool       `json:"static_ip"`
	// EncryptedDisk: the host's agent encrypts instance disks and volumes
	// with a key per instance held by the control plane, so that release is
	// a crypto-erase (Hardware.DiskEncryption says how).
	EncryptedDisk   bool    `json:"encrypted_disk"`
	DirectPortCount int     `json:"direct_port_count"`
	CarbonIntensity float64 `json:"carbon_intensity"` // gCO2/kWh of the host's grid, 0 when unknown
	// CO2PerHour is the estimated grams of CO2 per hour for the offer's GPUs
	// (and its CPU cores) at full load, at the host's grid intensity, with a
	// data centre's PUE; 0 when the intensity is unknown. The control plane
	// fills it when it derives the offer (advisor.OfferCO2PerHour).
	CO2PerHour float64 `json:"co2_g_per_hour"`
	Green      bool    `json:"green"`
	// GreenDiscount is the percentage (10 for 10%) the host takes off its
	// compute prices because its grid is green; the prices above already
	// include it. 0 when the host grants none or its grid is not green.
	GreenDiscount float64 `json:"green_discount"`
	LatencyMS     float64 `json:"latency_ms"` // to the renter's location, 0 when unknown
	PreemptGraceS int     `json:"preempt_grace_s"`
	// InterruptionRate is the share of this host's interruptible rentals of
	// the last 30 days that were preempted at least once (0..1).
	InterruptionRate float64 `json:"interruption_rate"`
	HostStatus       string  `json:"host_status"`
}

// OfferQuery is a search: the query language text (DESIGN §5), an order
// ("dph,reliability-"), paging, the storage size that dph_total includes, and
// whether to explain what removed offers.
type OfferQuery struct {
	Query     string  `json:"q"`
	Order     string  `json:"order,omitempty"`
	Limit     int     `json:"limit,omitempty"`
	Offset    int     `json:"offset,omitempty"`
	StorageGB float64 `json:"storage_gb,omitempty"`
	Explain   bool    `json:"explain,omitempty"`
	// From is the renter's location (a country code, a place, or "lat,lon"):
	// offers then carry latency_ms estimated from it, to filter and sort by.
	From string `json:"from,omitempty"`
}

// DefaultStorageGB is the disk size searches price into dph_total when the
// renter names none.
const DefaultStorageGB = 10

// OfferResult is a page of offers, the count of all matches, and, when asked
// for, why the others did not match.
type OfferResult struct {
	Offers  []*Offer `json:"offers"`
	Total   int      `json:"total"`
	Explain *Explain `json:"explain,omitempty"`
}

// Explain says which conditions removed how many offers, in query order, and
// the nearest misses.
type Explain struct {
	Considered int           `json:"considered"`
	Steps      []ExplainStep `json:"steps"`
	Summary    string        `json:"summary"`
}

// ExplainStep is one condition and how many of the offers still in play it removed.
type ExplainStep struct {
	Condition string `json:"condition"`
	Removed   int    `json:"removed"`
	Remaining int    `json:"remaining"`
	Nearest   string `json:"nearest,omitempty"` // e.g. "cheapest is $1.87/h"
}
