package suanli

import (
	"time"
)

// RentalBooked is the rental type of an instance a booking launched: firm
// (never preempted by other renters), its compute paid from the booking's
// escrow at the price locked when it was booked, so its own rates are zero.
const RentalBooked = "booked"

// LedgerEscrow names account id's escrow in the ledger: money a renter has
// committed to future bookings. It is a hold, not a charge: it moves back to
// the balance on a refund, or on to the provider when the booking is
// delivered.
func LedgerEscrow(accountID int64) string { return "acct:" + itoa(accountID) + ":escrow" }

// Window statuses.
const (
	WindowOpen      = "open"      // bookable
	WindowWithdrawn = "withdrawn" // removed by its provider; bookings already made stand
)

// Booking statuses.
const (
	BookingBooked    = "booked"    // escrowed, waiting for its start
	BookingRunning   = "running"   // its instance was launched
	BookingCompleted = "completed" // delivered and paid: escrow went to the provider
	BookingCancelled = "cancelled" // by the renter: refund, less the fee after the deadline
	BookingFailed    = "failed"    // the provider did not deliver: escrow refunded in full
)

// Window is future capacity a provider publishes: GPUs of one machine from
// Start to End, at a fixed price per GPU-hour or open to bids at or above a
// floor, with the provider's cancellation rule. Bookings take parts of it.
// The zero value is not a valid window.
type Window struct {
	// RequestKey is the idempotency key of the request that published it
	// (set by the control plane from the context; not JSON).
	RequestKey string    `json:"-"`
	ID         int64     `json:"id"`
	MachineID  int64     `json:"machine_id"`
	HostID     int64     `json:"host_id"` // the provider's account
	GPUs       int       `json:"gpus"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	// PriceGPU is the price per GPU-hour; 0 when the window takes bids.
	PriceGPU   Money `json:"price_gpu"`
	AcceptBids bool  `json:"accept_bids,omitempty"`
	MinBid     Money `json:"min_bid,omitempty"` // per GPU-hour, when AcceptBids
	// CancelBefore is how long before a booking's start the renter may
	// cancel for a full refund; after that, CancelFeeBP of the cost goes to
	// the provider.
	CancelBefore time.Duration `json:"cancel_before"`
	CancelFeeBP  int64         `json:"cancel_fee_bp"`
	Status       string        `json:"status"`
	CreatedAt    time.Time     `json:"created_at"`

	// Set on reads: the machine's GPU model and the most GPUs of the
	// window still free at any moment (its GPUs less the peak of its
	// bookings).
	GPUName  string `json:"gpu_name,omitempty"`
	FreeGPUs int    `json:"free_gpus"`
}

// Hours is the window's length in whole hours.
func (w *Window) Hours() int { return int(w.End.Sub(w.Start) / time.Hour) }

// WindowCreate is what a provider gives to publish a window.
type WindowCreate struct {
	MachineID    int64         `json:"machine_id"`
	GPUs         int           `json:"gpus"`
	Start        time.Time     `json:"start"`
	End          time.Time     `json:"end"`
	PriceGPU     Money         `json:"price_gpu"`
	AcceptBids   bool          `json:"accept_bids,omitempty"`
	MinBid       Money         `json:"min_bid,omitempty"`
	CancelBefore time.Duration `json:"cancel_before"`
	CancelFeeBP  int64         `json:"cancel_fee_bp"`
}

// MaxWindowAhead is how far ahead a window may start, and MaxWindowLength how
// long one may be.
const (
	MaxWindowAhead  = 366 * 24 * time.Hour
	MaxWindowLength = 31 * 24 * time.Hour
)

// Validate checks a window's own fields against now: EINVALID naming the
// field and the fix.
func (c *WindowCreate) Validate(now time.Time) error {
	switch {
	case c.MachineID <= 0:
		return FieldErrorf("machine_id", "give the id of one of your machines (`suanli host machines`)")
	case c.GPUs <= 0:
		return FieldErrorf("gpus", "%d: offer at least one GPU", c.GPUs)
	case c.Start.IsZero() || c.End.IsZero():
		return FieldErrorf("start", "give a start and an end (RFC 3339, 2026-12-01T00:00Z)")
	case !c.Start.After(now):
		return FieldErrorf("start", "%s is not in the future", c.Start.Format(time.RFC3339))
	case !c.End.After(c.Start):
		return FieldErrorf("end", "%s is not after the start %s", c.End.Format(time.RFC3339), c.Start.Format(time.RFC3339))
	case c.Start.Sub(now) > MaxWindowAhead:
		return FieldErrorf("start", "windows open at most %d days ahead", int(MaxWindowAhead.Hours()/24))
	case c.End.Sub(c.Start) > MaxWindowLength:
		return FieldErrorf("end", "a window is at most %d days long: publish several", int(MaxWindowLength.Hours()/24))
	case c.AcceptBids && c.PriceGPU != 0:
		return FieldErrorf("price_gpu", "a window takes a fixed price or bids, not both: drop --price or --accept-bids")
	case c.AcceptBids && c.MinBid <= 0:
		return FieldErrorf("min_bid", "a window that takes bids needs a floor above zero (--min-bid)")
	case !c.AcceptBids && c.PriceGPU <= 0:
		return FieldErrorf("price_gpu", "give a price per GPU-hour above zero (--price 2.10), or --accept-bids --min-bid")
	case c.CancelBefore < 0:
		return FieldErrorf("cancel_before", "a negative deadline: give how long before the start a cancel is free")
	case c.CancelFeeBP < 0 || c.CancelFeeBP > 10_000:
		return FieldErrorf("cancel_fee_bp", "%d: give a fee between 0 and 10000 basis points (100%%)", c.CancelFeeBP)
	}
	return nil
}

// Booking is a renter's claim on part of a window: GPUs from Start to End
// at a price per GPU-hour locked when it was made. Its cost sits in the
// renter's escrow until it is delivered (then it goes to the provider),
// cancelled (refund less the fee after the deadline) or failed (full
// refund). At Start the control plane launches its instance on the
// window's machine; at End it stops it.
type Booking struct {
	ID        int64     `json:"id"`
	WindowID  int64     `json:"window_id"`
	MachineID int64     `json:"machine_id"`
	HostID    int64     `json:"host_id"`
	AccountID int64     `json:"account_id"`
	GPUs      int       `json:"gpus"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	PriceGPU  Money     `json:"price_gpu"` // locked, per GPU-hour
	Cost      Money     `json:"cost"`      // escrowed: PriceGPU × GPUs × hours
	FeeBP     int64     `json:"fee_bp"`    // the platform's fee when it is paid out
	// CancelDeadline is the last moment a cancel is refunded in full.
	CancelDeadline time.Time  `json:"cancel_deadline"`
	CancelFeeBP    int64      `json:"cancel_fee_bp"`
	Status         string     `json:"status"`
	InstanceID     int64      `json:"instance_id,omitempty"`
	Image          string     `json:"image"`
	Cmd            []string   `json:"cmd"`
	Refund         Money      `json:"refund"` // back to the renter's balance
	Paid           Money      `json:"paid"`   // out of escrow to the provider and the platform
	StartedAt      *time.Time `json:"started_at,omitempty"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
	Message        string     `json:"message,omitempty"` // follows the status: launched, delivered, cancelled, failed
	// Note says why the booking was made this way: a deferred job's choice
	// and its saving against running now, the window a query picked, a
	// recurring rental's run. Written once when it is booked; "" for a
	// booking of a window by its id.
	Note string `json:"note,omitempty"`
	// RequestKey is the idempotency key of the request that booked it
	// (set by the control plane from the context; not JSON): a retry after
	// a crash finds this booking instead of booking again.
	RequestKey string `json:"-"`
	// ScheduleID is the recurring rental that booked it, 0 for none.
	ScheduleID int64     `json:"schedule_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// BookingCost is what gpus GPUs for d cost at price per GPU-hour, in exact
// integer arithmetic (rounded down to the micro-unit).
func BookingCost(price Money, gpus int, d time.Duration) Money {
	return MulDiv(price*Money(gpus), int64(d/time.Second), 3600)
}

// CancelSettlement is how cancelling a booking at t splits its escrow: the
// fee (to the provider, less the platform's share) and the refund (to the
// renter). Before or at the deadline the fee is zero; after it, the fee is
// CancelFeeBP of the cost. Fee + Refund == Cost always.
func (b *Booking) CancelSettlement(t time.Time) (fee, refund Money) {
	if !t.After(b.CancelDeadline) {
		return 0, b.Cost
	}
	fee = MulDiv(b.Cost, b.CancelFeeBP, 10_000)
	return fee, b.Cost - fee
}

// BookingCreate is what a renter gives to book a window: its id, or a
// Query choosing the cheapest open window that matches and holds the
// booking (lowest price per GPU-hour, then earliest start).
type BookingCreate struct {
	WindowID int64 `json:"window_id,omitempty"`
	// Query is a window search (the offer query language plus start, end
	// and hours: "gpu_name=RTX_4090 start>=2026-12-01T00:00Z hours>=8"),
	// used when WindowID is 0.
	Query string    `json:"query,omitempty"`
	Start time.Time `json:"start"` // zero: the window's start
	Hours int       `json:"hours"` // zero: to the window's end
	// Duration, when set, overrides Hours (tests and sub-hour bookings).
	Duration time.Duration `json:"duration,omitempty"`
	GPUs     int           `json:"gpus"`          // zero: every GPU still free in the window
	Bid      Money         `json:"bid,omitempty"` // per GPU-hour, for a window that takes bids
	Image    string        `json:"image"`
	Cmd      []string      `json:"cmd"`
}

// WindowSearch is a search of open windows: a query on the machine's offer
// fields plus start, end and hours (see DESIGN §5).
type WindowSearch struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty"`
}

// CalendarEntry is one line of a machine's calendar: a window, or a booking
// in it, or an instance running now.
type CalendarEntry struct {
	Kind      string    `json:"kind"` // window, booking, instance
	ID        int64     `json:"id"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"` // zero: open-ended
	GPUs      int       `json:"gpus"`
	Price     Money     `json:"price_gpu"`
	Status    string    `json:"status"`
	AccountID int64     `json:"account_id,omitempty"`
}
