package control

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sched"
	"github.com/suanli/suanli/sqlstore"
)

// The forward market (DESIGN §4, future reservation): providers publish
// windows of future capacity, renters book them at a price locked today
// with the cost held in escrow, and the control plane launches each
// booking's instance at its start and stops it at its end.

// CreateWindow publishes a window of future capacity on one of the
// caller's machines. EINVALID naming the field, ENOTFOUND for another
// account's machine, ECONFLICT when the machine's windows would offer more
// GPUs than it has.
func (s *Service) CreateWindow(ctx context.Context, c suanli.WindowCreate) (*suanli.Window, error) {
	p, err := principal(ctx, suanli.ScopeHostWrite)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(s.now()); err != nil {
		return nil, err
	}
	m, err := s.Store.FindMachineByID(ctx, c.MachineID)
	if err != nil || m.OwnerID != p.AccountID {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "machine %d not found: `suanli host machines` lists yours", c.MachineID)
	}
	if total := len(m.Hardware.GPUs); c.GPUs > total {
		return nil, suanli.FieldErrorf("gpus", "%d: machine %d has %d GPUs", c.GPUs, m.ID, total)
	}
	w := &suanli.Window{MachineID: m.ID, HostID: m.OwnerID, GPUs: c.GPUs, Start: c.Start.UTC(), End: c.End.UTC(), PriceGPU: c.PriceGPU,
		AcceptBids: c.AcceptBids, MinBid: c.MinBid, CancelBefore: c.CancelBefore, CancelFeeBP: c.CancelFeeBP, RequestKey: suanli.RequestKeyFromContext(ctx)}
	if err := s.Store.CreateWindow(ctx, w, len(m.Hardware.GPUs), s.now()); err != nil {
		return nil, err
	}
	s.decorateWindows(m, w)
	s.Logger.Info("window published", "window_id", w.ID, "machine_id", m.ID, "gpus", w.GPUs, "start", w.Start, "end", w.End, "price_gpu", w.PriceGPU.String())
	return w, nil
}

func (s *Service) decorateWindows(m *suanli.Machine, ws ...*suanli.Window) {
	for _, w := range ws {
		if len(m.Hardware.GPUs) > 0 {
			w.GPUName = m.Hardware.GPUs[0].Name
		}
	}
}

// HostWindows lists the caller's windows that have not ended (on one
// machine when machineID is not 0).
func (s *Service) HostWindows(ctx context.Context, machineID int64) ([]*suanli.Window, error) {
	p, err := principal(ctx, suanli.ScopeHostRead)
	if err != nil {
		return nil, err
	}
	ws, err := s.Store.FindWindows(ctx, sqlstore.WindowFilter{HostID: p.AccountID, MachineID: machineID, EndAfter: s.now()})
	if err != nil {
		return nil, err
	}
	return s.withGPUNames(ctx, ws)
}

func (s *Service) withGPUNames(ctx context.Context, ws []*suanli.Window) ([]*suanli.Window, error) {
	machines := map[int64]*suanli.Machine{}
	for _, w := range ws {
		m, ok := machines[w.MachineID]
		if !ok {
			var err error
			if m, err = s.Store.FindMachineByID(ctx, w.MachineID); err != nil {
				return nil, err
			}
			machines[w.MachineID] = m
		}
		s.decorateWindows(m, w)
	}
	if ws == nil {
		ws = []*suanli.Window{}
	}
	return ws, nil
}

// WithdrawWindow stops one of the caller's windows taking bookings; the
// bookings already made stand. ENOTFOUND for another account's window.
func (s *Service) WithdrawWindow(ctx context.Context, id int64) (*suanli.Window, error) {
	p, err := principal(ctx, suanli.ScopeHostWrite)
	if err != nil {
		return nil, err
	}
	w, err := s.Store.FindWindowByID(ctx, id)
	if err != nil || w.HostID != p.AccountID {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "window %d not found: `suanli host windows` lists yours", id)
	}
	if err := s.Store.WithdrawWindow(ctx, id); err != nil {
		return nil, err
	}
	w.Status = suanli.WindowWithdrawn
	return w, nil
}

// timeCond is one start/end/hours condition of a window search.
type timeCond struct {
	field, op string
	t         time.Time
	hours     int
}

var timeCondRE = regexp.MustCompile(`^(start|end|hours)\s*(<=|>=|==|!=|<|>|=)\s*(\S+)$`)

// splitWindowQuery takes the time conditions (start, end, hours) out of a
// window search; the rest is an offer query on the machine's fields.
func splitWindowQuery(q string) (string, []timeCond, error) {
	var rest []string
	var conds []timeCond
	for _, tok := range strings.Fields(q) {
		m := timeCondRE.FindStringSubmatch(tok)
		if m == nil {
			rest = append(rest, tok)
			continue
		}
		c := timeCond{field: m[1], op: m[2]}
		if c.field == "hours" {
			n, err := strconv.Atoi(m[3])
			if err != nil || n < 0 {
				return "", nil, suanli.FieldErrorf("query", "hours %q: give a whole number of hours (hours>=8)", m[3])
			}
			c.hours = n
		} else {
			t, err := parseWhen(m[3])
			if err != nil {
				return "", nil, suanli.FieldErrorf("query", "%s %q: give an RFC 3339 time (%s>=2026-12-01T00:00Z)", c.field, m[3], c.field)
			}
			c.t = t
		}
		conds = append(conds, c)
	}
	return strings.Join(rest, " "), conds, nil
}

// parseWhen reads an RFC 3339 time, seconds optional (2026-12-01T00:00Z).
func parseWhen(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("not a time")
}

func (c timeCond) match(w *suanli.Window) bool {
	var cmp int
	switch c.field {
	case "hours":
		cmp = compareInt(w.Hours(), c.hours)
	case "start":
		cmp = w.Start.Compare(c.t)
	case "end":
		cmp = w.End.Compare(c.t)
	}
	switch c.op {
	case "<":
		return cmp < 0
	case "<=":
		return cmp <= 0
	case ">":
		return cmp > 0
	case ">=":
		return cmp >= 0
	case "!=":
		return cmp != 0
	}
	return cmp == 0
}

func compareInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SearchWindows finds open windows with free GPUs that have not started:
// the query's start, end and hours conditions apply to the window, the rest
// (the offer query language, DESIGN §5) to its machine's offer. Earliest
// start first, then cheapest.
func (s *Service) SearchWindows(ctx context.Context, q suanli.WindowSearch) ([]*suanli.Window, error) {
	p, err := principal(ctx, suanli.ScopeInstanceRead)
	if err != nil {
		return nil, err
	}
	machineQ, conds, err := splitWindowQuery(q.Query)
	if err != nil {
		return nil, err
	}
	var allowed map[int64]bool
	if strings.TrimSpace(machineQ) != "" {
		res, err := s.Index.Search(suanli.OfferQuery{Query: machineQ + " rentable=any", Limit: 10_000}, s.viewer(p))
		if err != nil {
			return nil, err
		}
		allowed = map[int64]bool{}
		for _, o := range res.Offers {
			allowed[o.MachineID] = true
		}
	}
	ws, err := s.Store.FindWindows(ctx, sqlstore.WindowFilter{Status: suanli.WindowOpen, EndAfter: s.now()})
	if err != nil {
		return nil, err
	}
	out := []*suanli.Window{}
	for _, w := range ws {
		if w.FreeGPUs == 0 || (allowed != nil && !allowed[w.MachineID]) {
			continue
		}
		ok := true
		for _, c := range conds {
			ok = ok && c.match(w)
		}
		if ok {
			out = append(out, w)
		}
	}
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return s.withGPUNames(ctx, out)
}

// holdsOf turns a machine's live bookings into the scheduler's holds.
func holdsOf(bs []*suanli.Booking, machineID int64) []sched.Hold {
	var out []sched.Hold
	for _, b := range bs {
		if b.MachineID != machineID {
			continue
		}
		out = append(out, sched.Hold{BookingID: b.ID, InstanceID: b.InstanceID, Units: b.GPUs, Start: b.Start.UnixMicro(), End: b.End.UnixMicro()})
	}
	return out
}

// liveBookings lists the bookings that hold GPUs now or later.
func (s *Service) liveBookings(ctx context.Context) ([]*suanli.Booking, error) {
	return s.Store.FindBookings(ctx, sqlstore.BookingFilter{Live: true})
}

// CreateBooking books part of a window: its GPUs from a start for some
// hours at the window's price (or the renter's bid, at or above its floor),
// locked now; the cost moves from the renter's balance to escrow. At the
// start the instance launches by itself on the window's machine. The
// window is c.WindowID, or the cheapest open window matching c.Query (see
// bookByQuery). EINVALID naming the field, ENOTFOUND (no such window, or
// none matching holds the booking), ECONFLICT (GPUs already booked or
// rented with no end, or taken while booking by query), EPAYMENTREQUIRED.
func (s *Service) CreateBooking(ctx context.Context, c suanli.BookingCreate) (*suanli.Booking, error) {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return nil, err
	}
	switch q := strings.TrimSpace(c.Query); {
	case q != "" && c.WindowID != 0:
		return nil, suanli.FieldErrorf("query", "give a window id or a query, not both")
	case q != "":
		c.Query = q
		return s.bookByQuery(ctx, p, c)
	case c.WindowID <= 0:
		return nil, suanli.FieldErrorf("window_id", "give a window id, or a query to book the cheapest matching window (`suanli windows search`)")
	}
	return s.book(ctx, p, c, 0, "")
}

// book books c.WindowID for p; scheduleID (0: none) and note (why it was
// booked this way) are stored on the booking.
func (s *Service) book(ctx context.Context, p *suanli.Principal, c suanli.BookingCreate, scheduleID int64, note string) (*suanli.Booking, error) {
	now := s.now()
	w, err := s.Store.FindWindowByID(ctx, c.WindowID)
	if err != nil {
		return nil, err
	}
	if w.Status != suanli.WindowOpen {
		return nil, suanli.Errorf(suanli.ECONFLICT, "window %d is %s: search for another (`suanli windows search`)", w.ID, w.Status)
	}
	c.Image = strings.TrimSpace(c.Image)
	if c.Image == "" {
		return nil, suanli.FieldErrorf("image", "must not be empty: name the image the booking runs (--image ubuntu:24.04)")
	}
	start := c.Start.UTC()
	if c.Start.IsZero() {
		start = w.Start
	}
	if !start.After(now) {
		return nil, suanli.FieldErrorf("start", "%s is not in the future: book ahead", start.Format(time.RFC3339))
	}
	d := c.Duration
	if d == 0 && c.Hours > 0 {
		d = time.Duration(c.Hours) * time.Hour
	}
	if d == 0 {
		d = w.End.Sub(start)
	}
	if d < time.Second || c.Hours < 0 {
		return nil, suanli.FieldErrorf("hours", "give how many hours to book (--hours 8)")
	}
	end := start.Add(d)
	if start.Before(w.Start) || end.After(w.End) {
		return nil, suanli.FieldErrorf("start", "window %d runs %s to %s: %s to %s is outside it", w.ID,
			w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	gpus := c.GPUs
	if gpus == 0 {
		gpus = w.FreeGPUs
	}
	if gpus <= 0 || gpus > w.GPUs {
		return nil, suanli.FieldErrorf("gpus", "%d: window %d offers %d GPUs, %d free", gpus, w.ID, w.GPUs, w.FreeGPUs)
	}
	price := w.PriceGPU
	if w.AcceptBids {
		if c.Bid < w.MinBid {
			return nil, suanli.FieldErrorf("bid", "%s/GPU-h is below window %d's floor of %s/GPU-h", c.Bid, w.ID, w.MinBid)
		}
		price = c.Bid
	} else if c.Bid != 0 {
		return nil, suanli.FieldErrorf("bid", "window %d has a fixed price of %s/GPU-h: drop --bid", w.ID, w.PriceGPU)
	}
	// The booking must fit beside the machine's rentals with no end and its
	// other bookings (the plan); the store re-checks the window.
	snap, err := s.snapshot(ctx, []int64{w.MachineID})
	if err != nil {
		return nil, err
	}
	if len(snap.Hosts) == 1 {
		if why := sched.BookingFits(snap.Hosts[0], gpus, start.UnixMicro(), end.UnixMicro()); why != "" {
			return nil, suanli.Errorf(suanli.ECONFLICT, "window %d: %s", w.ID, why)
		}
	}
	b := &suanli.Booking{WindowID: w.ID, AccountID: p.AccountID, GPUs: gpus, Start: start, End: end, PriceGPU: price, RequestKey: suanli.RequestKeyFromContext(ctx),
		Cost: suanli.BookingCost(price, gpus, d), FeeBP: s.cfg.FeeBasisPoints, Image: c.Image, Cmd: c.Cmd, ScheduleID: scheduleID, Note: note}
	if err := s.Store.CreateBooking(ctx, b, now); err != nil {
		return nil, err
	}
	s.Logger.Info("window booked", "booking_id", b.ID, "window_id", w.ID, "machine_id", w.MachineID, "account_id", p.AccountID,
		"gpus", gpus, "start", start, "end", end, "cost", b.Cost.String())
	s.refreshOfferLogged(ctx, w.MachineID)
	return b, nil
}

func (s *Service) refreshOfferLogged(ctx context.Context, machineID int64) {
	if err := s.refreshOffer(ctx, machineID); err != nil {
		s.Logger.Error("refresh offer", "machine_id", machineID, "err", err)
	}
}

// ownBooking returns one of the caller's bookings (a provider may read the
// bookings of its machines). ENOTFOUND for anyone else's.
func (s *Service) ownBooking(ctx context.Context, scope string, id int64, provider bool) (*suanli.Booking, error) {
	p, err := principal(ctx, scope)
	if err != nil {
		return nil, err
	}
	b, err := s.Store.FindBookingByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if b.AccountID != p.AccountID && !(provider && b.HostID == p.AccountID) {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "booking %d not found: `suanli bookings` lists yours", id)
	}
	return b, nil
}

// FindBookingByID returns one of the caller's bookings, or one on the
// caller's machines. ENOTFOUND.
func (s *Service) FindBookingByID(ctx context.Context, id int64) (*suanli.Booking, error) {
	return s.ownBooking(ctx, suanli.ScopeInstanceRead, id, true)
}

// FindBookings lists the caller's bookings, earliest start first.
func (s *Service) FindBookings(ctx context.Context) ([]*suanli.Booking, error) {
	p, err := principal(ctx, suanli.ScopeInstanceRead)
	if err != nil {
		return nil, err
	}
	bs, err := s.Store.FindBookings(ctx, sqlstore.BookingFilter{AccountID: p.AccountID})
	if bs == nil {
		bs = []*suanli.Booking{}
	}
	return bs, err
}

// CancelBooking cancels one of the caller's bookings before it starts:
// the whole cost back to the balance up to the provider's deadline; after
// it, the provider's fee (CancelFeeBP of the cost) is paid out of escrow and
// the rest refunded. ECONFLICT once it has started or ended.
func (s *Service) CancelBooking(ctx context.Context, id int64) (*suanli.Booking, error) {
	b, err := s.ownBooking(ctx, suanli.ScopeInstanceWrite, id, false)
	if err != nil {
		return nil, err
	}
	if b.Status != suanli.BookingBooked {
		return nil, suanli.Errorf(suanli.ECONFLICT, "booking %d is %s: only a booking that has not started can be cancelled", id, b.Status)
	}
	now := s.now()
	fee, refund := b.CancelSettlement(now)
	msg := "cancelled before the deadline: full refund"
	if fee > 0 {
		msg = fmt.Sprintf("cancelled after the deadline %s: %s fee", b.CancelDeadline.Format(time.RFC3339), fee)
	}
	out, err := s.Store.SettleBooking(ctx, id, suanli.BookingCancelled, refund, msg, now, suanli.BookingBooked)
	if err != nil {
		return nil, err
	}
	s.Logger.Info("booking cancelled", "booking_id", id, "refund", refund.String(), "fee", fee.String())
	s.refreshOfferLogged(ctx, b.MachineID)
	return out, nil
}

// RunBookings launches the bookings whose start has come and stops those
// whose end has: the forward market's loop, run every second.
func (s *Service) RunBookings(ctx context.Context) error {
	now := s.now()
	// One read of the live bookings a tick (it runs every second); again
	// only after starting some, whose status changed.
	live, err := s.Store.FindBookings(ctx, sqlstore.BookingFilter{Live: true})
	if err != nil {
		return err
	}
	started := 0
	for _, b := range live {
		if b.Status == suanli.BookingBooked && !b.Start.After(now) {
			if err := s.startBooking(ctx, b); err != nil {
				return fmt.Errorf("booking %d: %w", b.ID, err)
			}
			started++
		}
	}
	if started > 0 {
		if live, err = s.Store.FindBookings(ctx, sqlstore.BookingFilter{Live: true}); err != nil {
			return err
		}
	}
	for _, b := range live {
		if b.Status != suanli.BookingRunning {
			continue
		}
		if !b.End.After(now) {
			if err := s.endBooking(ctx, b); err != nil {
				return fmt.Errorf("booking %d: %w", b.ID, err)
			}
			continue
		}
		if b.InstanceID == 0 {
			continue
		}
		in, err := s.Store.FindInstanceByID(ctx, b.InstanceID, now)
		if err != nil && suanli.ErrorCode(err) != suanli.ENOTFOUND {
			return err
		}
		if in != nil && in.Status == suanli.StatusLost {
			if err := s.loseBooking(ctx, b, in); err != nil {
				return fmt.Errorf("booking %d: %w", b.ID, err)
			}
		}
	}
	return nil
}

// loseBooking settles a running booking whose host was lost: the provider
// is paid for the part delivered (from the start to the loss — the last
// heartbeat — rounded down) and the renter gets the rest of the escrow
// back. The loss already counts against the host's reliability.
func (s *Service) loseBooking(ctx context.Context, b *suanli.Booking, in *suanli.Instance) error {
	now := s.now()
	lostAt := now
	if in.StoppedAt != nil {
		lostAt = *in.StoppedAt
	}
	if lostAt.Before(b.Start) {
		lostAt = b.Start
	}
	if lostAt.After(b.End) {
		lostAt = b.End
	}
	span := b.End.Sub(b.Start).Microseconds()
	paid := b.Cost
	if span > 0 {
		paid = suanli.MulDiv(b.Cost, lostAt.Sub(b.Start).Microseconds(), span)
	}
	refund := b.Cost - paid
	msg := fmt.Sprintf("host lost at %s: %s of %s delivered, %s refunded from escrow", lostAt.Format(time.RFC3339),
		lostAt.Sub(b.Start).Round(time.Second), b.End.Sub(b.Start), refund)
	if _, err := s.Store.SettleBooking(ctx, b.ID, suanli.BookingFailed, refund, msg, now, suanli.BookingRunning); err != nil {
		if suanli.ErrorCode(err) == suanli.ECONFLICT {
			return nil
		}
		return err
	}
	// Should the host come back, the instance stays stopped.
	if _, err := s.Store.UpdateInstance(ctx, in.ID, now, now, func(i *suanli.Instance) error {
		i.Desired, i.WaitingSince = suanli.DesiredStopped, nil
		return nil
	}); err != nil && suanli.ErrorCode(err) != suanli.ENOTFOUND {
		return err
	}
	s.RecordAudit(ctx, suanli.AuditEvent{AccountID: b.HostID, Action: "booking.lost", Target: fmt.Sprintf("booking %d", b.ID), Result: "ok", Detail: msg})
	s.Logger.Warn("booking lost with its host", "booking_id", b.ID, "machine_id", b.MachineID, "paid", paid.String(), "refund", refund.String())
	return nil
}

// failBooking refunds a booking its provider did not deliver and counts a
// failed start against the machine's reliability.
func (s *Service) failBooking(ctx context.Context, b *suanli.Booking, why string) error {
	if _, err := s.Store.SettleBooking(ctx, b.ID, suanli.BookingFailed, b.Cost, why+": escrow refunded in full", s.now(), suanli.BookingBooked); err != nil {
		if suanli.ErrorCode(err) == suanli.ECONFLICT {
			return nil
		}
		return err
	}
	if err := s.Store.CountHostEvent(ctx, b.MachineID, sqlstore.HostFailedStart); err != nil {
		return err
	}
	s.RecordAudit(ctx, suanli.AuditEvent{AccountID: b.HostID, Action: "booking.failed", Target: fmt.Sprintf("booking %d", b.ID), Result: "ok", Detail: why})
	s.Logger.Warn("booking not delivered", "booking_id", b.ID, "machine_id", b.MachineID, "reason", why)
	s.refreshOfferLogged(ctx, b.MachineID)
	return nil
}

// startBooking launches a booking's instance on its machine: a firm rental
// at zero rates (its compute is paid from escrow), preempting interruptible
// instances on those GPUs with notice. A machine that is not online, or
// cannot give the GPUs, fails the booking (the provider did not deliver).
func (s *Service) startBooking(ctx context.Context, b *suanli.Booking) error {
	m, err := s.Store.FindMachineByID(ctx, b.MachineID)
	if err != nil {
		return s.failBooking(ctx, b, fmt.Sprintf("machine %d is gone", b.MachineID))
	}
	if m.Status != suanli.MachineOnline {
		return s.failBooking(ctx, b, fmt.Sprintf("machine %d was %s at the start", m.ID, m.Status))
	}
	p := &suanli.Principal{AccountID: b.AccountID, Role: suanli.RoleUser, Scopes: []string{suanli.ScopeAll}}
	acct, err := s.Store.FindAccountByID(ctx, b.AccountID)
	if err != nil {
		return err
	}
	fc := suanli.FleetCreate{InstanceCreate: suanli.InstanceCreate{OfferID: m.ID, Image: b.Image, Cmd: b.Cmd, GPUCount: b.GPUs,
		RentalType: suanli.RentalBooked, Label: fmt.Sprintf("booking %d", b.ID), DiskGB: suanli.DefaultDiskGB}, Count: 1}
	now := s.now()
	req := sched.Request{GPUCount: b.GPUs, DiskGB: fc.DiskGB, RentalType: suanli.RentalBooked, FeeBP: s.cfg.FeeBasisPoints, AccountID: b.AccountID,
		AllowSimulated: true, Count: 1, At: now.UnixMicro(), Until: b.End.UnixMicro(), BookingID: b.ID}
	var lastWhy string
	for attempt := 0; attempt < maxPlanAttempts; attempt++ {
		snap, err := s.snapshot(ctx, []int64{m.ID})
		if err != nil {
			return err
		}
		if len(snap.Hosts) != 1 {
			return s.failBooking(ctx, b, fmt.Sprintf("machine %d is not listed", m.ID))
		}
		// A booking runs on its window's machine whatever its listing says now.
		h := snap.Hosts[0]
		h.Listing.Listed, h.Expired = true, false
		res := sched.Schedule(snap, req)
		if len(res.Placements) == 0 {
			return s.failBooking(ctx, b, "its GPUs were not free at the start: "+res.Why(1))
		}
		sp, err := s.storePlacement(p, acct, fc, req, h, res.Placements[0])
		if err != nil {
			return err
		}
		sp.Instance.Rates = suanli.Rates{FeeBasisPoints: s.cfg.FeeBasisPoints}
		sp.HourlyCost = 0
		ins, err := s.Store.ApplyPlacements(ctx, []sqlstore.Placement{sp}, now)
		if suanli.ErrorCode(err) == suanli.ECONFLICT {
			lastWhy = err.Error()
			continue
		} else if err != nil {
			return err
		}
		in := ins[0]
		if err := s.Store.MarkBookingStarted(ctx, b.ID, in.ID, now); err != nil {
			return err
		}
		if b.Note != "" {
			// The booking's explanation goes into the instance's history,
			// so that `suanli show` says why it runs here and now.
			if err := s.Store.AddInstanceEvent(ctx, in.ID, now, in.Status, fmt.Sprintf("booking %d: %s", b.ID, b.Note)); err != nil {
				s.Logger.Error("record booking note", "booking_id", b.ID, "instance_id", in.ID, "err", err)
			}
		}
		s.Logger.Info("booking started", "booking_id", b.ID, "instance_id", in.ID, "machine_id", m.ID, "late_ms", now.Sub(b.Start).Milliseconds())
		s.hub.wake(m.ID)
		s.refreshOfferLogged(ctx, m.ID)
		return nil
	}
	return s.failBooking(ctx, b, "the machine kept changing at the start: "+lastWhy)
}

// endBooking stops a booking's instance at its end and pays the provider
// the locked price out of escrow.
func (s *Service) endBooking(ctx context.Context, b *suanli.Booking) error {
	now := s.now()
	if b.InstanceID != 0 {
		in, err := s.Store.UpdateInstance(ctx, b.InstanceID, b.End, now, func(in *suanli.Instance) error {
			in.WaitingSince = nil
			in.Desired = suanli.DesiredStopped
			switch in.Status {
			case suanli.StatusDestroyed, suanli.StatusStopped, suanli.StatusExited, suanli.StatusFailed, suanli.StatusLost:
			default:
				in.Status, in.StatusMessage = suanli.StatusStopping, fmt.Sprintf("booking %d ended", b.ID)
			}
			return nil
		})
		if err != nil && suanli.ErrorCode(err) != suanli.ENOTFOUND {
			return err
		}
		if in != nil {
			s.afterChange(ctx, in.MachineID)
		}
	}
	if _, err := s.Store.SettleBooking(ctx, b.ID, suanli.BookingCompleted, 0, "delivered: paid at the locked price", now, suanli.BookingRunning); err != nil &&
		suanli.ErrorCode(err) != suanli.ECONFLICT {
		return err
	}
	s.Logger.Info("booking ended", "booking_id", b.ID, "instance_id", b.InstanceID, "paid", b.Cost.String())
	return nil
}

// MachineCalendar lists a machine's windows, bookings and open-ended
// rentals from now on, earliest first, for its provider. ENOTFOUND for
// another account's machine.
func (s *Service) MachineCalendar(ctx context.Context, machineID int64) ([]suanli.CalendarEntry, error) {
	p, err := principal(ctx, suanli.ScopeHostRead)
	if err != nil {
		return nil, err
	}
	m, err := s.Store.FindMachineByID(ctx, machineID)
	if err != nil || m.OwnerID != p.AccountID {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "machine %d not found: `suanli host machines` lists yours", machineID)
	}
	now := s.now()
	out := []suanli.CalendarEntry{}
	ws, err := s.Store.FindWindows(ctx, sqlstore.WindowFilter{MachineID: machineID, EndAfter: now})
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		out = append(out, suanli.CalendarEntry{Kind: "window", ID: w.ID, Start: w.Start, End: w.End, GPUs: w.GPUs, Price: w.PriceGPU, Status: w.Status})
	}
	bs, err := s.Store.FindBookings(ctx, sqlstore.BookingFilter{MachineID: machineID, EndAfter: now})
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		out = append(out, suanli.CalendarEntry{Kind: "booking", ID: b.ID, Start: b.Start, End: b.End, GPUs: b.GPUs, Price: b.PriceGPU, Status: b.Status, AccountID: b.AccountID})
	}
	live := true
	ins, _, err := s.Store.FindInstances(ctx, suanli.InstanceFilter{MachineID: &machineID, Live: &live, Limit: 10_000}, now)
	if err != nil {
		return nil, err
	}
	for _, in := range ins {
		if in.RentalType == suanli.RentalBooked || !in.HoldsGPUs() {
			continue
		}
		out = append(out, suanli.CalendarEntry{Kind: "instance", ID: in.ID, Start: in.CreatedAt, GPUs: in.GPUCount,
			Price: in.Rates.ComputePerHour, Status: in.RentalType + " " + in.Status, AccountID: in.AccountID})
	}
	sortCalendar(out)
	return out, nil
}

func sortCalendar(es []suanli.CalendarEntry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].Start.Before(es[j-1].Start); j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}
