package suanli

import (
	"context"
	"time"
)

// FleetCreate rents Count instances in one request: on one offer
// (OfferID), or on the offers a query picks (Query, in the query language
// of DESIGN §5, with MaxPrice bounding each instance's compute per hour).
// With AllOrNothing nothing is rented unless every instance is placed.
// The embedded InstanceCreate is what each instance gets; its JSON fields
// sit beside these.
type FleetCreate struct {
	InstanceCreate
	Count        int    `json:"count,omitempty"` // 0 means 1
	AllOrNothing bool   `json:"all_or_nothing,omitempty"`
	Query        string `json:"query,omitempty"`
	MaxPrice     Money  `json:"max_price,omitempty"`
}

// MaxFleet is the most instances one request may ask for.
const MaxFleet = 1000

// HostRejection is why one host could not take an instance of a request.
type HostRejection struct {
	HostID int64  `json:"host_id"`
	Step   string `json:"step"` // the scheduler step: listed, online, gpu_name, capacity, bid …
	Reason string `json:"reason"`
}

// FleetResult is what a fleet request rented, and why the rest was not.
type FleetResult struct {
	Instances  []*Instance     `json:"instances"`
	Wanted     int             `json:"wanted"`
	Unplaced   int             `json:"unplaced"`
	Message    string          `json:"message"`              // one line: "placed 3 of 5: …"
	Rejections []HostRejection `json:"rejections,omitempty"` // one per host, for the first instance not placed
}

// StartOptions tune a start. With Wait, a start whose GPUs were taken
// meanwhile is queued (in order, behind earlier waits of the same rank)
// instead of refused; the instance starts by itself when it wins GPUs.
type StartOptions struct {
	Wait bool `json:"wait,omitempty"`
}

// Recreate asks for a new instance like an old one (image, command,
// environment, disk size, GPU count, rental type and bid) on another host,
// picked by Query (default: same GPU model) within MaxPrice.
type Recreate struct {
	Query    string `json:"query,omitempty"`
	MaxPrice Money  `json:"max_price,omitempty"`
}

// RecreateResult is the new instance and what became of the old one's disk.
type RecreateResult struct {
	Instance *Instance `json:"instance"`
	OldID    int64     `json:"old_id"`
	// DiskNote says honestly what "the same disk" means here: which runtime
	// holds the old disk and whether its data came along.
	DiskNote string `json:"disk_note"`
}

// ReserveDiscount is one step of a host's discount schedule: commitments of
// at least MinDays days get DiscountBP basis points off the on-demand price.
type ReserveDiscount struct {
	MinDays    int   `json:"min_days"`
	DiscountBP int64 `json:"discount_bp"`
}

// Limits of reservations.
const (
	MaxReserveDays       = 366
	MaxReserveDiscountBP = 9000 // 90%
)

// ReserveDiscountBP returns the discount a commitment of days earns under
// l's schedule: the step with the largest MinDays ≤ days, capped by the
// host's maximum. ok is false when the host takes no reservation that short
// (or none at all).
func (l *Listing) ReserveDiscountBP(days int) (bp int64, ok bool) {
	best := -1
	for i, d := range l.ReserveDiscounts {
		if d.MinDays <= days && (best < 0 || d.MinDays > l.ReserveDiscounts[best].MinDays) {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	bp = l.ReserveDiscounts[best].DiscountBP
	if l.ReserveMaxDiscountBP > 0 {
		bp = min(bp, l.ReserveMaxDiscountBP)
	}
	return min(max(bp, 0), MaxReserveDiscountBP), true
}

// Reservation statuses.
const (
	ReservationActive    = "active"
	ReservationEnded     = "ended"
	ReservationCancelled = "cancelled"
)

// Reservation is a prepaid commitment of an instance's compute for Days
// days at a discount: the renter paid Prepaid up front; compute is not
// metered again until End. Cancelling early refunds the unused part minus
// the discount already received and the host's fee (Refund).
type Reservation struct {
	ID          int64      `json:"id"`
	InstanceID  int64      `json:"instance_id"`
	AccountID   int64      `json:"account_id"`
	HostID      int64      `json:"host_id"`
	Days        int        `json:"days"`
	Start       time.Time  `json:"start"`
	End         time.Time  `json:"end"`
	HourlyPrice Money      `json:"hourly_price"` // the on-demand compute rate it prepays
	ListPrice   Money      `json:"list_price"`   // hourly price × hours
	DiscountBP  int64      `json:"discount_bp"`
	Prepaid     Money      `json:"prepaid"`
	CancelFeeBP int64      `json:"cancel_fee_bp"`
	FeeBP       int64      `json:"fee_bp"` // the platform's fee out of the host's share
	Status      string     `json:"status"`
	Refund      Money      `json:"refund,omitempty"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
}

// NewReservation prices a commitment of days at hourly (the instance's
// locked on-demand rate) with discountBP off, starting at start.
func NewReservation(hourly Money, days int, discountBP int64, start time.Time) Reservation {
	list := hourly * Money(24*days)
	return Reservation{Days: days, Start: start, End: start.Add(time.Duration(days) * 24 * time.Hour), HourlyPrice: hourly,
		ListPrice: list, DiscountBP: discountBP, Prepaid: MulDiv(list, 10_000-discountBP, 10_000), Status: ReservationActive}
}

// ReservationRefund is how an early cancel is settled.
type ReservationRefund struct {
	Used             time.Duration `json:"used"`
	Unused           Money         `json:"unused"`            // the prepaid part for the time left
	DiscountReceived Money         `json:"discount_received"` // list price of the time used minus what was paid for it
	Fee              Money         `json:"fee"`               // the host's cancel fee, out of the unused part
	Refund           Money         `json:"refund"`            // unused − discount received − fee, at least 0
}

// RefundAt settles cancelling r at t: the renter gets back the unused part
// of what was prepaid, minus the discount received on the part used (the
// discount was for the whole commitment) and the host's fee on the unused
// part. In integer arithmetic, rounded toward the renter paying no more
// than the list price of the time used plus the fee.
func (r *Reservation) RefundAt(t time.Time) ReservationRefund {
	total := r.End.Sub(r.Start).Microseconds()
	used := min(max(t.Sub(r.Start).Microseconds(), 0), total)
	var out ReservationRefund
	out.Used = time.Duration(used) * time.Microsecond
	if total <= 0 {
		return out
	}
	paidForUsed := MulDiv(r.Prepaid, used, total)
	out.Unused = r.Prepaid - paidForUsed
	out.DiscountReceived = MulDiv(r.ListPrice, used, total) - paidForUsed
	out.Fee = MulDiv(out.Unused, r.CancelFeeBP, 10_000)
	out.Refund = max(out.Unused-out.DiscountReceived-out.Fee, 0)
	return out
}

// PriceQuery asks for price history: GPU models (query language, e.g.
// "gpu_name=H100" or "gpu_name in [H100,A100]"), since when, and how many
// buckets the series has (0: 24).
type PriceQuery struct {
	Query   string    `json:"q"`
	Since   time.Time `json:"since"`
	Buckets int       `json:"buckets,omitempty"`
}

// PriceSummary is the distribution of prices per GPU-hour.
type PriceSummary struct {
	Count  int   `json:"count"`
	Floor  Money `json:"floor"`
	Median Money `json:"median"`
	P90    Money `json:"p90"`
}

// PriceBucket is one step of the price series.
type PriceBucket struct {
	At        time.Time `json:"at"`
	Listed    Money     `json:"listed_median"` // median listed on-demand price per GPU-hour; 0 when none
	Bid       Money     `json:"bid_median"`    // median winning bid per GPU-hour; 0 when none
	FillRate  float64   `json:"fill_rate"`     // GPUs rented / GPUs listed, 0..1; -1 when unknown
	Preempted int       `json:"preempted"`     // preemptions in the bucket
}

// PriceStats is a GPU model's market over a window: listed on-demand
// prices, winning bids, fill rate, and a series for a chart.
type PriceStats struct {
	GPUNames []string      `json:"gpu_names"`
	Since    time.Time     `json:"since"`
	Until    time.Time     `json:"until"`
	Listed   PriceSummary  `json:"listed"`
	Bids     PriceSummary  `json:"bids"`
	FillRate float64       `json:"fill_rate"` // mean over the window, -1 when no sample
	Series   []PriceBucket `json:"series"`
}

// Price point kinds recorded in the price history.
const (
	PriceListed = "listed" // a listed on-demand price per GPU-hour, sampled
	PriceBid    = "bid"    // a bid per GPU-hour that won GPUs (at creation or resume)
)

// RentalService is the market's side of renting beyond one instance on one
// offer: fleets and queries, bids, queued starts, recreating elsewhere,
// reservations, and price history. Implemented by the control plane and the
// HTTP client.
type RentalService interface {
	// CreateFleet rents fc.Count instances on an offer or on the offers a
	// query picks. EINVALID, ENOTFOUND (offer), ECONFLICT (nothing placed,
	// says why per host), EPAYMENTREQUIRED.
	CreateFleet(ctx context.Context, fc FleetCreate) (*FleetResult, error)
	// ChangeBid sets an interruptible instance's bid; compute settles at the
	// old bid first. EINVALID (below the minimum bid, which it names),
	// ECONFLICT (not interruptible, destroyed).
	ChangeBid(ctx context.Context, id int64, bid Money) (*Instance, error)
	// StartInstanceWith starts a stopped instance; with opt.Wait a start
	// whose GPUs are taken is queued. ECONFLICT says who holds them.
	StartInstanceWith(ctx context.Context, id int64, opt StartOptions) (*Instance, error)
	// RecreateInstance creates a new instance like id on another host.
	RecreateInstance(ctx context.Context, id int64, r Recreate) (*RecreateResult, error)
	// ReserveInstance prepays days of an on-demand instance's compute at the
	// host's discount. EINVALID, ECONFLICT, EPAYMENTREQUIRED.
	ReserveInstance(ctx context.Context, id int64, days int) (*Reservation, error)
	// CancelReservation ends an instance's active reservation early and
	// refunds what RefundAt says. ECONFLICT when none is active.
	CancelReservation(ctx context.Context, id int64) (*Reservation, error)
	// MarketPrices returns price history for GPU models.
	MarketPrices(ctx context.Context, q PriceQuery) (*PriceStats, error)
}

// PricePoint is one observation in the price history: a listed on-demand
// price or a winning bid, per GPU-hour.
type PricePoint struct {
	At        time.Time `json:"at"`
	GPUName   string    `json:"gpu_name"`
	Kind      string    `json:"kind"` // PriceListed or PriceBid
	Price     Money     `json:"price"`
	MachineID int64     `json:"machine_id,omitempty"`
}

// FillSample is how much of a GPU model's listed capacity was rented at a
// moment.
type FillSample struct {
	At      time.Time `json:"at"`
	GPUName string    `json:"gpu_name"`
	Listed  int       `json:"listed"` // GPUs on listed, online machines
	Rented  int       `json:"rented"` // of those, owned by live instances
}
