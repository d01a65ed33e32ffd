package console

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

// quoteRequest is what a renter asks a quote for. Field names follow the
// form's inputs (and the API's), so errors name the input at fault.
type quoteRequest struct {
	GPUs         int   // GPU offers: how many GPUs (0: every free one)
	DiskGB       int64 // 0: suanli.DefaultDiskGB
	RunHours     int64 // hours running (compute and storage billed)
	StoppedHours int64 // hours stopped (storage only)
	UpGB, DownGB int64 // traffic sent and received
	RentalType   string
	Bid          suanli.Money // interruptible: per hour for the whole instance
}

// quoteLine is one item of a quote.
type quoteLine struct {
	Item   string
	Detail string
	Amount suanli.Money
}

// quote is an itemized estimate from an offer's prices: the same rates
// CreateInstance would lock in, applied with the billing meters' integer
// arithmetic (compute per hour while running, storage per GB-month from
// creation to destroy, stopped time included, traffic per GB).
type quote struct {
	Lines           []quoteLine
	Total           suanli.Money
	ComputePerHour  suanli.Money // the instance's compute rate
	StoragePerHour  suanli.Money // the disk, running or stopped
	RunningPerHour  suanli.Money // compute + storage
	StoppedPerMonth suanli.Money // the disk alone for a 730-hour month
	MinBid          suanli.Money // least bid for this many GPUs (cores), per hour
	GPUs            int
	FeeNote         string
}

// Bounds on what a quote accepts: ten years, a petabyte, an exabyte of traffic.
const (
	maxQuoteHours = 87600
	maxQuoteDisk  = 1_000_000
	maxQuoteGB    = 1_000_000_000
)

// mulMoney returns m × n, or false when it overflows or a factor is negative.
func mulMoney(m suanli.Money, n int64) (suanli.Money, bool) {
	if m < 0 || n < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(m), uint64(n))
	if hi != 0 || lo > 1<<63-1 {
		return 0, false
	}
	return suanli.Money(lo), true
}

// accrue returns rate (per period) over hours, exactly as a meter accrues it
// second by second (suanli.Accrue with no remainder carried in).
func accrue(rate suanli.Money, hours, periodMicros int64) (suanli.Money, bool) {
	elapsed := hours * suanli.MicrosPerHour
	hi, _ := bits.Mul64(uint64(rate), uint64(elapsed))
	if rate < 0 || hi >= uint64(periodMicros) {
		return 0, false
	}
	m, _ := suanli.Accrue(rate, elapsed, periodMicros, 0)
	return m, true
}

var errQuoteTooLarge = suanli.Errorf(suanli.EINVALID, "the quote is larger than any amount this marketplace can hold: ask for fewer hours, less disk or less traffic")

// newQuote prices req on offer o. feeBP is the platform fee (basis points
// out of the provider's earnings: the renter's price already includes it).
// Errors are EINVALID naming the input at fault.
func newQuote(o *suanli.Offer, req quoteRequest, feeBP int64) (*quote, error) {
	q := &quote{}
	switch {
	case req.DiskGB == 0:
		req.DiskGB = suanli.DefaultDiskGB
	case req.DiskGB < 0 || req.DiskGB > maxQuoteDisk:
		return nil, suanli.FieldErrorf("disk_gb", "%d is not a disk size: give 1 to %d GB", req.DiskGB, maxQuoteDisk)
	}
	if req.RunHours < 0 || req.RunHours > maxQuoteHours {
		return nil, suanli.FieldErrorf("hours", "%d is outside 0 to %d hours", req.RunHours, maxQuoteHours)
	}
	if req.StoppedHours < 0 || req.StoppedHours > maxQuoteHours {
		return nil, suanli.FieldErrorf("stopped_hours", "%d is outside 0 to %d hours", req.StoppedHours, maxQuoteHours)
	}
	if req.UpGB < 0 || req.UpGB > maxQuoteGB {
		return nil, suanli.FieldErrorf("up_gb", "%d is outside 0 to %d GB", req.UpGB, maxQuoteGB)
	}
	if req.DownGB < 0 || req.DownGB > maxQuoteGB {
		return nil, suanli.FieldErrorf("down_gb", "%d is outside 0 to %d GB", req.DownGB, maxQuoteGB)
	}

	var what string
	if o.GPUName != "" {
		n := req.GPUs
		if n == 0 {
			n = o.NumGPUs
		}
		if n < 0 || n > o.NumGPUs || n == 0 {
			return nil, suanli.FieldErrorf("num_gpus", "offer %d has %d free GPUs, you asked for %d", o.ID, o.NumGPUs, max(n, 1))
		}
		q.GPUs = n
		q.ComputePerHour = o.GPUPrice * suanli.Money(n)
		if o.NumGPUs > 0 {
			q.MinBid = o.MinBid / suanli.Money(o.NumGPUs) * suanli.Money(n)
		}
		what = fmt.Sprintf("%d× %s at %s per GPU-hour", n, o.GPUName, o.GPUPrice)
	} else {
		q.ComputePerHour = o.DPHBase
		q.MinBid = o.MinBid
		what = fmt.Sprintf("%d CPU cores and %s GB RAM at %s/h", o.CPUCores, formatNum(o.CPURAM), o.DPHBase)
	}
	switch req.RentalType {
	case "", suanli.RentalOnDemand:
	case suanli.RentalInterruptible:
		if req.Bid <= 0 {
			return nil, suanli.FieldErrorf("bid", "an interruptible rental needs a positive bid per hour (at least %s)", q.MinBid)
		}
		if req.Bid < q.MinBid {
			return nil, suanli.FieldErrorf("bid", "%s/h is below this offer's minimum bid of %s/h", req.Bid, q.MinBid)
		}
		q.ComputePerHour = req.Bid
		what = fmt.Sprintf("your bid of %s/h (interruptible: billed only while it runs)", req.Bid)
	default:
		return nil, suanli.FieldErrorf("rental_type", "%q is not a rental type: use on-demand or interruptible", req.RentalType)
	}

	diskRate, ok := mulMoney(o.StorageCost, req.DiskGB) // per month for the whole disk
	if !ok {
		return nil, errQuoteTooLarge
	}
	q.StoragePerHour = suanli.MulDiv(diskRate, suanli.MicrosPerHour, suanli.MicrosPerMonth)
	q.StoppedPerMonth = diskRate
	q.RunningPerHour = q.ComputePerHour + q.StoragePerHour

	compute, ok1 := mulMoney(q.ComputePerHour, req.RunHours)
	storeRun, ok2 := accrue(diskRate, req.RunHours, suanli.MicrosPerMonth)
	storeStop, ok3 := accrue(diskRate, req.StoppedHours, suanli.MicrosPerMonth)
	up, ok4 := mulMoney(o.InetUpCost, req.UpGB)
	down, ok5 := mulMoney(o.InetDownCost, req.DownGB)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return nil, errQuoteTooLarge
	}
	q.Lines = []quoteLine{
		{Item: "Compute", Detail: fmt.Sprintf("%d h × %s — %s", req.RunHours, q.ComputePerHour, what), Amount: compute},
		{Item: "Storage while running", Detail: fmt.Sprintf("%d GB × %d h at %s per GB-month", req.DiskGB, req.RunHours, o.StorageCost), Amount: storeRun},
		{Item: "Storage while stopped", Detail: fmt.Sprintf("%d GB × %d h at %s per GB-month (the disk is billed until you destroy the instance)", req.DiskGB, req.StoppedHours, o.StorageCost), Amount: storeStop},
		{Item: "Traffic sent", Detail: fmt.Sprintf("%d GB at %s/GB", req.UpGB, o.InetUpCost), Amount: up},
		{Item: "Traffic received", Detail: fmt.Sprintf("%d GB at %s/GB", req.DownGB, o.InetDownCost), Amount: down},
	}
	q.FeeNote = "none"
	if feeBP > 0 {
		q.FeeNote = fmt.Sprintf("the marketplace keeps %s%% of what you pay, out of the provider's share: your price already includes it", bpPercent(feeBP))
	}
	q.Lines = append(q.Lines, quoteLine{Item: "Platform fee", Detail: q.FeeNote, Amount: 0})
	for _, l := range q.Lines {
		if q.Total+l.Amount < q.Total {
			return nil, errQuoteTooLarge
		}
		q.Total += l.Amount
	}
	return q, nil
}

// bpPercent formats basis points as a percentage: 250 → "2.5", 100 → "1".
func bpPercent(bp int64) string {
	s := strconv.FormatInt(bp/100, 10)
	if r := bp % 100; r != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%02d", r), "0")
	}
	return s
}
