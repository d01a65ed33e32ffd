package control

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sched"
)

// Booking by query (`suanli book 'gpu_name=RTX_4090 hours>=8'`): the
// window is chosen here, on the server, so that the HTTP API books by query
// too. The choice is a plan made from one read (the open windows and a
// snapshot of their machines) and applied by book, whose store transaction
// re-checks the window: a window taken in between is a conflict, never a
// booking of some other window the renter did not see chosen.

// windowPick is the window a query booking takes and the booking's terms
// in it.
type windowPick struct {
	w     *suanli.Window
	start time.Time
	d     time.Duration
	gpus  int
	price suanli.Money // per GPU-hour, as the booking would lock it
	bid   suanli.Money // BookingCreate.Bid for it
}

// pickWindow chooses, among the open windows ws, the one where c's booking
// is cheapest: the lowest price per GPU-hour it would lock (a window taking
// bids at c.Bid, or at its floor when c.Bid is 0; with c.Bid set, a
// fixed-price window at most c.Bid), then the earliest start, then the
// lowest window id. hosts are the windows' machines by id (one missing is
// not checked beside its rentals; book checks it again). It returns nil
// and a reason for each window it passed over when none holds the booking.
// Plain data in and out: no store, no clock.
func pickWindow(ws []*suanli.Window, hosts map[int64]*sched.Host, c suanli.BookingCreate, now time.Time) (*windowPick, []string) {
	var best *windowPick
	var why []string
	for _, w := range ws {
		p, reason := fitWindow(w, hosts[w.MachineID], c, now)
		if p == nil {
			why = append(why, fmt.Sprintf("window %d: %s", w.ID, reason))
			continue
		}
		if best == nil || p.price < best.price || (p.price == best.price && (p.start.Before(best.start) ||
			(p.start.Equal(best.start) && p.w.ID < best.w.ID))) {
			best = p
		}
	}
	if best != nil {
		return best, nil
	}
	return nil, why
}

// fitWindow says how c's booking would sit in w, or why it cannot.
func fitWindow(w *suanli.Window, h *sched.Host, c suanli.BookingCreate, now time.Time) (*windowPick, string) {
	p := &windowPick{w: w, start: w.Start, gpus: c.GPUs}
	if !c.Start.IsZero() {
		p.start = c.Start.UTC()
	}
	if p.start.Before(w.Start) || !p.start.Before(w.End) {
		return nil, fmt.Sprintf("runs %s to %s, not at %s", w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), p.start.Format(time.RFC3339))
	}
	if !p.start.After(now) {
		return nil, fmt.Sprintf("opened at %s: give a later --start inside it", w.Start.Format(time.RFC3339))
	}
	switch {
	case c.Duration > 0:
		p.d = c.Duration
	case c.Hours > 0:
		p.d = time.Duration(c.Hours) * time.Hour
	default:
		p.d = w.End.Sub(p.start)
	}
	if end := p.start.Add(p.d); end.After(w.End) {
		return nil, fmt.Sprintf("ends %s, before %s", w.End.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	if p.gpus == 0 {
		p.gpus = w.FreeGPUs
	}
	if p.gpus > w.FreeGPUs {
		return nil, fmt.Sprintf("%d of its GPUs free, you asked for %d", w.FreeGPUs, p.gpus)
	}
	switch {
	case w.AcceptBids && c.Bid == 0:
		p.price, p.bid = w.MinBid, w.MinBid
	case w.AcceptBids && c.Bid < w.MinBid:
		return nil, fmt.Sprintf("takes bids from %s/GPU-h, above your bid of %s", w.MinBid, c.Bid)
	case w.AcceptBids:
		p.price, p.bid = c.Bid, c.Bid
	case c.Bid != 0 && w.PriceGPU > c.Bid:
		return nil, fmt.Sprintf("%s/GPU-h, above your bid of %s", w.PriceGPU, c.Bid)
	default:
		p.price = w.PriceGPU
	}
	if h != nil {
		if why := sched.BookingFits(h, p.gpus, p.start.UnixMicro(), p.start.Add(p.d).UnixMicro()); why != "" {
			return nil, why
		}
	}
	return p, ""
}

// bookByQuery books the cheapest open window matching c.Query that holds
// the booking (see pickWindow for the order). ENOTFOUND saying what to
// change when none does; ECONFLICT when the window chosen was taken before
// the booking was written (nothing is booked then).
func (s *Service) bookByQuery(ctx context.Context, p *suanli.Principal, c suanli.BookingCreate) (*suanli.Booking, error) {
	if strings.TrimSpace(c.Image) == "" {
		return nil, suanli.FieldErrorf("image", "must not be empty: name the image the booking runs (--image ubuntu:24.04)")
	}
	if c.GPUs < 0 || c.Hours < 0 || c.Duration < 0 {
		return nil, suanli.FieldErrorf("hours", "give how many hours (--hours 8) and GPUs (--gpus 1) to book, not a negative number")
	}
	ws, err := s.SearchWindows(ctx, suanli.WindowSearch{Query: c.Query})
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "no open window with free GPUs matches %q: loosen the query (gpu_name, start>=, hours>=) or see what is open with `suanli windows search`", c.Query)
	}
	var ids []int64
	seen := map[int64]bool{}
	for _, w := range ws {
		if !seen[w.MachineID] {
			seen[w.MachineID] = true
			ids = append(ids, w.MachineID)
		}
	}
	snap, err := s.snapshot(ctx, ids)
	if err != nil {
		return nil, err
	}
	hosts := map[int64]*sched.Host{}
	for _, h := range snap.Hosts {
		hosts[h.ID] = h
	}
	pick, why := pickWindow(ws, hosts, c, s.now())
	if pick == nil {
		const shown = 5
		more := ""
		if len(why) > shown {
			more = fmt.Sprintf("; and %d more", len(why)-shown)
			why = why[:shown]
		}
		return nil, suanli.Errorf(suanli.ENOTFOUND, "%d open windows match %q but none holds this booking (%s%s): change --start, --hours, --gpus or --bid, or loosen the query",
			len(ws), c.Query, strings.Join(why, "; "), more)
	}
	note := fmt.Sprintf("booked by query %q: window %d at %s/GPU-h, the cheapest of %d open windows matching (lowest price per GPU-hour, then earliest start)",
		c.Query, pick.w.ID, pick.price, len(ws))
	bc := c
	bc.Query, bc.WindowID, bc.Start, bc.Duration, bc.Hours, bc.GPUs, bc.Bid = "", pick.w.ID, pick.start, pick.d, 0, pick.gpus, pick.bid
	b, err := s.book(ctx, p, bc, 0, note)
	if suanli.ErrorCode(err) == suanli.ECONFLICT {
		return nil, suanli.Errorf(suanli.ECONFLICT, "window %d, the cheapest matching %q, was taken while booking it (%s): nothing was booked; run the command again to book the cheapest window left",
			pick.w.ID, c.Query, suanli.ErrorMessage(err))
	}
	return b, err
}
