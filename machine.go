package suanli

import "time"

// Machine statuses, from the host lease (DESIGN §4).
const (
	MachineOnline  = "online"
	MachineSuspect = "suspect" // missed heartbeats past the grace
	MachineOffline = "offline" // past lost_after: its instances are lost
)

// GPU is one accelerator as the agent detected it.
type GPU struct {
	Index         int    `json:"index"`
	UUID          string `json:"uuid"`
	Name          string `json:"name"`      // "RTX 4090", normalised without vendor prefix
	MemoryMB      int64  `json:"memory_mb"` // total memory
	DriverVersion string `json:"driver_version"`
	CUDAVersion   string `json:"cuda_version"` // "12.4"
	ComputeCap    string `json:"compute_cap"`  // "8.9"
	PowerLimitW   int    `json:"power_limit_w,omitempty"`
	Simulated     bool   `json:"simulated,omitempty"`
}

// Hardware is what the agent detected on its machine.
type Hardware struct {
	Hostname   string `json:"hostname"`
	OS         string `json:"os"`       // "linux"
	CPUArch    string `json:"cpu_arch"` // GOARCH: "amd64", "arm64"
	CPUModel   string `json:"cpu_model"`
	CPUCores   int    `json:"cpu_cores"`
	RAMMB      int64  `json:"ram_mb"`
	DiskFreeGB int64  `json:"disk_free_gb"` // free space under the agent's data dir
	GPUs       []GPU  `json:"gpus"`
	// DiskEncryption describes how the agent encrypts instance disks and
	// volumes at rest with a key per instance or volume, so that release is a
	// crypto-erase (e.g. "fscrypt v2 AES-256-XTS, per-object keys, loop
	// image …"); empty when it does not, and release overwrites where it can.
	DiskEncryption string `json:"disk_encryption,omitempty"`
}

// Listing is a machine's terms on the market. Rates are locked into each
// instance when it is created; later edits apply only to new rentals.
type Listing struct {
	Listed        bool       `json:"listed"`
	PriceGPU      Money      `json:"price_gpu"`       // per GPU-hour (GPU machines)
	PriceCPU      Money      `json:"price_cpu"`       // per core-hour (CPU-only machines)
	PriceRAM      Money      `json:"price_ram"`       // per GB-hour of RAM (CPU-only machines)
	PriceDisk     Money      `json:"price_disk"`      // per GB-month of disk
	PriceInetUp   Money      `json:"price_inet_up"`   // per GB sent by the instance
	PriceInetDown Money      `json:"price_inet_down"` // per GB received by the instance
	MinBid        Money      `json:"min_bid"`         // per GPU-hour (per core-hour on CPU machines) for interruptible rentals
	EndDate       *time.Time `json:"end_date,omitempty"`
	PreemptGraceS int        `json:"preempt_grace_s"` // notice before an interruptible instance is stopped
	// Reserved rentals: a discount per commitment length (the longest step
	// that fits applies), capped by ReserveMaxDiscountBP, and the fee the
	// host keeps, out of the unused part, when a reservation ends early.
	// No steps: the machine takes no reservations.
	ReserveDiscounts     []ReserveDiscount `json:"reserve_discounts,omitempty"`
	ReserveMaxDiscountBP int64             `json:"reserve_max_discount_bp,omitempty"`
	ReserveCancelFeeBP   int64             `json:"reserve_cancel_fee_bp,omitempty"`
	// GreenDiscountBP is basis points off the compute prices (PriceGPU,
	// PriceCPU, PriceRAM and MinBid; not disk or traffic) that every renter
	// gets while the machine's grid is green (Offer.Green: a known carbon
	// intensity at most the advisor's threshold). The control plane refuses
	// it on a machine whose grid is not green, and stops applying it if the
	// grid stops being green; 0 means none. At most MaxGreenDiscountBP.
	GreenDiscountBP int64 `json:"green_discount_bp,omitempty"`
}

// MaxGreenDiscountBP is the largest green discount a listing may grant: 50%.
const MaxGreenDiscountBP = 5000

// ForRenters returns the listing as renters are charged under it: when
// green (the machine's grid is green) and l has a green discount, the
// compute prices and the minimum bid less GreenDiscountBP, rounded down to
// the micro-unit; otherwise l with GreenDiscountBP 0, so that the result's
// GreenDiscountBP is the discount that applies. Offers, quotes and the
// rates locked into a rental are derived from this listing, never from the
// stored one.
func (l Listing) ForRenters(green bool) Listing {
	if !green || l.GreenDiscountBP <= 0 {
		l.GreenDiscountBP = 0
		return l
	}
	bp := min(l.GreenDiscountBP, MaxGreenDiscountBP)
	off := func(m Money) Money { return MulDiv(m, 10_000-bp, 10_000) }
	l.PriceGPU, l.PriceCPU, l.PriceRAM, l.MinBid = off(l.PriceGPU), off(l.PriceCPU), off(l.PriceRAM), off(l.MinBid)
	l.GreenDiscountBP = bp
	return l
}

// MachineBeat is one machine's last heartbeat, as the control plane's
// heartbeat table (package heartbeat) writes it to the store in batches.
type MachineBeat struct {
	MachineID int64
	At        time.Time
}

// MachineLease is what the lease checker and the heartbeat table read of
// every machine: one narrow row each, no joins.
type MachineLease struct {
	ID             int64
	OwnerID        int64
	Status         string
	LastHeartbeat  time.Time
	DesiredVersion int64
}

// Machine is a provider's host as the control plane knows it.
type Machine struct {
	ID            int64     `json:"id"`
	OwnerID       int64     `json:"owner_id"`
	Hardware      Hardware  `json:"hardware"`
	Simulated     bool      `json:"simulated"` // any GPU declared with --fake-gpus
	Status        string    `json:"status"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	AgentVersion  string    `json:"agent_version"`
	Runtime       string    `json:"runtime"` // "process", "docker"
	Country       string    `json:"country"` // ISO 3166 alpha-2, "" when unknown
	Region        string    `json:"region"`  // marketplace region, e.g. "eu-west"
	Geolocation   string    `json:"geolocation"`
	Datacenter    bool      `json:"datacenter"`
	Verified      bool      `json:"verified"`
	InetUpMbps    float64   `json:"inet_up_mbps"`
	InetDownMbps  float64   `json:"inet_down_mbps"`
	Reliability   float64   `json:"reliability"` // 0..1
	Listing       Listing   `json:"listing"`
	GPUsInUse     []int     `json:"gpus_in_use"` // indexes held by live instances
	CreatedAt     time.Time `json:"created_at"`
}

// IsGPU reports whether m is rented by the GPU (else by core and GB of RAM).
func (m *Machine) IsGPU() bool { return len(m.Hardware.GPUs) > 0 }

// MachineFilter selects machines; nil fields mean "any".
type MachineFilter struct {
	ID      *int64
	OwnerID *int64
	Listed  *bool
	Limit   int
	Offset  int
}

// ListingUpdate changes a listing; nil fields stay as they are.
type ListingUpdate struct {
	PriceGPU      *Money     `json:"price_gpu,omitempty"`
	PriceCPU      *Money     `json:"price_cpu,omitempty"`
	PriceRAM      *Money     `json:"price_ram,omitempty"`
	PriceDisk     *Money     `json:"price_disk,omitempty"`
	PriceInetUp   *Money     `json:"price_inet_up,omitempty"`
	PriceInetDown *Money     `json:"price_inet_down,omitempty"`
	MinBid        *Money     `json:"min_bid,omitempty"`
	EndDate       *time.Time `json:"end_date,omitempty"`
	PreemptGraceS *int       `json:"preempt_grace_s,omitempty"`
	// ReserveDiscounts replaces the whole schedule when set (an empty list
	// clears it).
	ReserveDiscounts     *[]ReserveDiscount `json:"reserve_discounts,omitempty"`
	ReserveMaxDiscountBP *int64             `json:"reserve_max_discount_bp,omitempty"`
	ReserveCancelFeeBP   *int64             `json:"reserve_cancel_fee_bp,omitempty"`
	GreenDiscountBP      *int64             `json:"green_discount_bp,omitempty"`
	Country              *string            `json:"country,omitempty"`
	Region               *string            `json:"region,omitempty"`
}
