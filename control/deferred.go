package control

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/market"
	"github.com/suanli/suanli/sqlstore"
)

// windowPrice is what a window charges per GPU-hour: its fixed price, or
// the floor of a window that takes bids (the least a booking may bid).
func windowPrice(w *suanli.Window) suanli.Money {
	if w.AcceptBids {
		return w.MinBid
	}
	return w.PriceGPU
}

// cheapestWindow finds the window where gpus GPUs for d starting in
// [from, latestStart] cost least (ties: the earliest start), at most
// maxPrice per GPU-hour (0: any). start is the window's start, or from
// when the window is already open.
func (s *Service) cheapestWindow(ctx context.Context, query string, gpus int, d time.Duration, from, latestStart time.Time, maxPrice suanli.Money) (*suanli.Window, time.Time, int, error) {
	q := strings.TrimSpace(query + fmt.Sprintf(" hours>=%d", int(d.Hours())))
	ws, err := s.SearchWindows(ctx, suanli.WindowSearch{Query: q})
	if err != nil {
		return nil, time.Time{}, 0, err
	}
	var best *suanli.Window
	var bestStart time.Time
	considered := 0
	for _, w := range ws {
		start := w.Start
		if start.Before(from) {
			start = from
		}
		if w.FreeGPUs < gpus || start.After(latestStart) || start.Add(d).After(w.End) {
			continue
		}
		considered++
		price := windowPrice(w)
		if maxPrice > 0 && price > maxPrice {
			continue
		}
		if best == nil || price < windowPrice(best) || (price == windowPrice(best) && start.Before(bestStart)) {
			best, bestStart = w, start
		}
	}
	return best, bestStart, considered, nil
}

// CreateDeferred plans a deferred job: the cheapest published window that
// fits before the deadline (booked now, its price locked), unless running
// now on the market costs no more. The plan says what was chosen and what
// it saves against running now.
func (s *Service) CreateDeferred(ctx context.Context, c suanli.DeferredCreate) (*suanli.DeferredPlan, error) {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return nil, err
	}
	now := s.now()
	switch {
	case c.Hours <= 0:
		return nil, suanli.FieldErrorf("hours", "give how many hours the job runs (--hours 6)")
	case c.GPUs <= 0:
		return nil, suanli.FieldErrorf("gpus", "give how many GPUs the job needs (--gpus 1)")
	case !c.Deadline.After(now.Add(time.Duration(c.Hours) * time.Hour)):
		return nil, suanli.FieldErrorf("deadline", "%s leaves no room for %d hours from now: give a later deadline", c.Deadline.Format(time.RFC3339), c.Hours)
	case strings.TrimSpace(c.Image) == "":
		return nil, suanli.FieldErrorf("image", "name the image the job runs")
	case c.MaxPrice < 0:
		return nil, suanli.FieldErrorf("max_price", "must not be negative")
	}
	d := time.Duration(c.Hours) * time.Hour
	plan := &suanli.DeferredPlan{}
	// Now: the cheapest rentable offer that fits.
	res, err := s.Index.Search(suanli.OfferQuery{Query: strings.TrimSpace(c.Query + fmt.Sprintf(" num_gpus>=%d", c.GPUs)), Order: "gpu_price", Limit: 1}, s.viewer(p))
	if err != nil {
		return nil, err
	}
	var nowOffer *suanli.Offer
	if len(res.Offers) > 0 {
		nowOffer = res.Offers[0]
		plan.NowCost = suanli.BookingCost(nowOffer.GPUPrice, c.GPUs, d)
	}
	if err := s.priceValley(ctx, plan, nowOffer, c, now, c.Deadline.Add(-d)); err != nil {
		return nil, err
	}
	w, start, considered, err := s.cheapestWindow(ctx, c.Query, c.GPUs, d, now.Add(time.Minute), c.Deadline.Add(-d), c.MaxPrice)
	if err != nil {
		return nil, err
	}
	plan.Considered = considered
	nowFits := nowOffer != nil && (c.MaxPrice == 0 || nowOffer.GPUPrice <= c.MaxPrice)
	if w != nil {
		winCost := suanli.BookingCost(windowPrice(w), c.GPUs, d)
		if !nowFits || winCost < plan.NowCost {
			// The explanation is written before booking (the cost is the
			// window's price for the job, as book computes it) so that it
			// is stored on the booking in the same write.
			plan.Cost = winCost
			if nowOffer != nil {
				plan.Saving = plan.NowCost - winCost
				above := ""
				if !nowFits {
					above = ", above your max price"
				}
				plan.Explanation = fmt.Sprintf("booked window %d on machine %d from %s at %s/GPU-h: %s for %d h, %s less than running now on offer %d at %s/GPU-h (%s%s); %d windows fit before the deadline",
					w.ID, w.MachineID, start.Format(time.RFC3339), windowPrice(w), winCost, c.Hours, plan.Saving, nowOffer.ID, nowOffer.GPUPrice, plan.NowCost, above, considered)
			} else {
				plan.Explanation = fmt.Sprintf("booked window %d on machine %d from %s at %s/GPU-h: %s for %d h; nothing matching is rentable now; %d windows fit before the deadline",
					w.ID, w.MachineID, start.Format(time.RFC3339), windowPrice(w), winCost, c.Hours, considered)
			}
			note := fmt.Sprintf("deferred job (deadline %s): %s", c.Deadline.UTC().Format(time.RFC3339), plan.Explanation)
			b, err := s.book(ctx, p, suanli.BookingCreate{WindowID: w.ID, Start: start, Duration: d, GPUs: c.GPUs, Bid: bidFor(w), Image: c.Image, Cmd: c.Cmd}, 0, note)
			if err != nil {
				return nil, err
			}
			plan.Booking, plan.Cost = b, b.Cost
			s.Logger.Info("deferred job booked", "booking_id", b.ID, "saving", plan.Saving.String())
			return plan, nil
		}
	}
	if !nowFits {
		hint := ""
		if plan.ValleyAt != nil && c.MaxPrice > 0 && plan.ValleyPrice <= c.MaxPrice {
			hint = fmt.Sprintf(" (price history: %s is typically %s/GPU-h, under your cap: create it again then)", plan.ValleyAt.Format(time.RFC3339), plan.ValleyPrice)
		}
		return nil, suanli.Errorf(suanli.ECONFLICT, "no window before %s and no offer now fits %d× GPUs%s %s: raise --max-price, move the deadline, or search with `suanli windows search`%s",
			c.Deadline.Format(time.RFC3339), c.GPUs, queryText(c.Query), priceCap(c.MaxPrice), hint)
	}
	in, err := s.CreateInstance(ctx, suanli.InstanceCreate{OfferID: nowOffer.ID, Image: c.Image, Cmd: c.Cmd, GPUCount: c.GPUs,
		Guards: suanli.Guards{MaxRuntime: suanli.Duration(d)}})
	if err != nil {
		return nil, err
	}
	plan.Instance, plan.Cost = in, plan.NowCost
	plan.Explanation = fmt.Sprintf("running now on offer %d at %s/GPU-h (%s for %d h, stopped after %d h by its max runtime): no published window before the deadline was cheaper (%d considered)",
		nowOffer.ID, nowOffer.GPUPrice, plan.NowCost, c.Hours, c.Hours, considered)
	switch {
	case plan.ValleyAt == nil:
	case plan.ValleyPrice < nowOffer.GPUPrice:
		plan.Explanation += fmt.Sprintf("; price history puts the valley before the deadline at %s, typically %s/GPU-h, but no window is published for it, so it runs now",
			plan.ValleyAt.Format(time.RFC3339), plan.ValleyPrice)
	default:
		plan.Explanation += fmt.Sprintf("; price history has no hour before the deadline typically cheaper (its lowest: %s/GPU-h at %s)",
			plan.ValleyPrice, plan.ValleyAt.Format(time.RFC3339))
	}
	// No booking holds the choice: it goes into the instance's history,
	// where `suanli show` prints it.
	if err := s.Store.AddInstanceEvent(ctx, in.ID, now, in.Status, fmt.Sprintf("deferred job (deadline %s): %s", c.Deadline.UTC().Format(time.RFC3339), plan.Explanation)); err != nil {
		s.Logger.Error("record deferred explanation", "instance_id", in.ID, "err", err)
	}
	return plan, nil
}

// priceValley sets plan's ValleyAt and ValleyPrice from the last week's
// price history of the GPU model: the offer's rentable now, else the one
// the query names (gpu_name=…); nothing when neither says one.
func (s *Service) priceValley(ctx context.Context, plan *suanli.DeferredPlan, nowOffer *suanli.Offer, c suanli.DeferredCreate, now, latestStart time.Time) error {
	var names []string
	if nowOffer != nil && nowOffer.GPUName != "" {
		names = []string{nowOffer.GPUName}
	} else if ns, err := market.PriceModels(c.Query); err == nil {
		names = ns
	}
	if len(names) == 0 {
		return nil
	}
	points, _, _, err := s.Store.PriceHistory(ctx, names, now.Add(-DefaultPriceWindow), now)
	if err != nil {
		return err
	}
	if at, price, ok := market.CheapHour(points, now, latestStart); ok {
		plan.ValleyAt, plan.ValleyPrice = &at, price
	}
	return nil
}

func bidFor(w *suanli.Window) suanli.Money {
	if w.AcceptBids {
		return w.MinBid
	}
	return 0
}

func queryText(q string) string {
	if strings.TrimSpace(q) == "" {
		return ""
	}
	return " (" + q + ")"
}

// CreateSchedule stores a recurring rental; its runs are booked ahead by
// RunSchedules.
func (s *Service) CreateSchedule(ctx context.Context, sc suanli.Schedule) (*suanli.Schedule, error) {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return nil, err
	}
	cron, err := suanli.ParseCron(sc.Cron)
	if err != nil {
		return nil, suanli.FieldErrorf("schedule", "%v", err)
	}
	switch {
	case sc.Hours <= 0:
		return nil, suanli.FieldErrorf("hours", "give how many hours each run lasts (--hours 2)")
	case sc.GPUs <= 0:
		return nil, suanli.FieldErrorf("gpus", "give how many GPUs each run needs")
	case strings.TrimSpace(sc.Image) == "":
		return nil, suanli.FieldErrorf("image", "name the image each run runs")
	}
	if _, _, err := splitWindowQuery(sc.Query); err != nil {
		return nil, err
	}
	sc.AccountID, sc.CreatedAt = p.AccountID, s.now()
	if err := s.Store.CreateSchedule(ctx, &sc); err != nil {
		return nil, err
	}
	sc.NextRun = cron.Next(s.now())
	s.Logger.Info("schedule created", "schedule_id", sc.ID, "cron", sc.Cron, "account_id", p.AccountID)
	if err := s.RunSchedules(ctx); err != nil {
		s.Logger.Error("book schedule", "schedule_id", sc.ID, "err", err)
	}
	out, err := s.FindSchedules(ctx)
	if err != nil {
		return nil, err
	}
	for _, x := range out {
		if x.ID == sc.ID {
			return x, nil
		}
	}
	return &sc, nil
}

// FindSchedules lists the caller's active recurring rentals with their next run.
func (s *Service) FindSchedules(ctx context.Context) ([]*suanli.Schedule, error) {
	p, err := principal(ctx, suanli.ScopeInstanceRead)
	if err != nil {
		return nil, err
	}
	scs, err := s.Store.FindSchedules(ctx, p.AccountID, false)
	for _, sc := range scs {
		if c, err := suanli.ParseCron(sc.Cron); err == nil {
			sc.NextRun = c.Next(s.now())
		}
	}
	return scs, err
}

// CancelSchedule stops a recurring rental; runs already booked stand
// (cancel them with `suanli bookings cancel`).
func (s *Service) CancelSchedule(ctx context.Context, id int64) error {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return err
	}
	scs, err := s.Store.FindSchedules(ctx, p.AccountID, false)
	if err != nil {
		return err
	}
	for _, sc := range scs {
		if sc.ID == id {
			return s.Store.SetScheduleState(ctx, id, false, "")
		}
	}
	return suanli.Errorf(suanli.ENOTFOUND, "schedule %d not found", id)
}

// RunSchedules books every recurring rental's runs that start within
// ScheduleAhead and are not booked yet, each in the cheapest window that
// holds it. A run no window holds is reported once, on the schedule and as
// an alert.
func (s *Service) RunSchedules(ctx context.Context) error {
	scs, err := s.Store.FindSchedules(ctx, 0, false)
	if err != nil {
		return err
	}
	now := s.now()
	for _, sc := range scs {
		cron, err := suanli.ParseCron(sc.Cron)
		if err != nil {
			continue
		}
		booked, err := s.Store.FindBookings(ctx, sqlstore.BookingFilter{ScheduleID: sc.ID})
		if err != nil {
			return err
		}
		have := map[int64]bool{}
		for _, b := range booked {
			have[b.Start.Unix()] = true
		}
		a, err := s.Store.FindAccountByID(ctx, sc.AccountID)
		if err != nil {
			return err
		}
		pctx := suanli.NewContextWithPrincipal(ctx, &suanli.Principal{AccountID: a.ID, Role: a.Role, Scopes: []string{suanli.ScopeAll}})
		d := time.Duration(sc.Hours) * time.Hour
		lastErr := ""
		for t, n := cron.Next(now.Add(30*time.Second)), 0; !t.IsZero() && t.Before(now.Add(suanli.ScheduleAhead)) && n < 48; t, n = cron.Next(t), n+1 {
			if have[t.Unix()] {
				continue
			}
			w, _, _, err := s.cheapestWindow(pctx, sc.Query, sc.GPUs, d, t, t, sc.MaxPrice)
			if err != nil {
				return err
			}
			if w == nil {
				lastErr = fmt.Sprintf("no published window holds the run at %s (%d× GPUs%s for %d h, %s)", t.Format(time.RFC3339), sc.GPUs, queryText(sc.Query), sc.Hours, priceCap(sc.MaxPrice))
				continue
			}
			b, err := s.book(pctx, &suanli.Principal{AccountID: a.ID, Role: a.Role, Scopes: []string{suanli.ScopeAll}},
				suanli.BookingCreate{WindowID: w.ID, Start: t, Duration: d, GPUs: sc.GPUs, Bid: bidFor(w), Image: sc.Image, Cmd: sc.Cmd}, sc.ID,
				fmt.Sprintf("run of schedule %d (%q) at %s: the cheapest published window holding it, at %s/GPU-h", sc.ID, sc.Cron, t.Format(time.RFC3339), windowPrice(w)))
			if err != nil {
				lastErr = fmt.Sprintf("run at %s: %s", t.Format(time.RFC3339), suanli.ErrorMessage(err))
				continue
			}
			s.Logger.Info("scheduled run booked", "schedule_id", sc.ID, "booking_id", b.ID, "start", t)
		}
		if lastErr != sc.LastError {
			if err := s.Store.SetScheduleState(ctx, sc.ID, true, lastErr); err != nil {
				return err
			}
			if lastErr != "" {
				s.alert(ctx, &suanli.Alert{AccountID: sc.AccountID, Kind: "schedule", Message: fmt.Sprintf("schedule %d: %s", sc.ID, lastErr)}, "", "", "")
			}
		}
	}
	return nil
}

func priceCap(m suanli.Money) string {
	if m == 0 {
		return "at any price"
	}
	return "at most " + m.String() + "/GPU-h"
}
