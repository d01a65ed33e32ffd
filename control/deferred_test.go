package control_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// TestDeferredPicksTheValley: a job with a deadline goes to the cheapest
// window before it, and says what it saves against running now; when no
// window is cheaper it runs now with a max runtime; a price cap nothing
// meets is refused with the numbers.
func TestDeferredPicksTheValley(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(2, suanli.Dollars(1), 100_000, 4) // $1/GPU-h on demand now
	mk.tick(2*time.Second, nil)
	night := mk.now.Add(10 * time.Hour)
	mk.window(m, 2, night, night.Add(6*time.Hour), 400_000, time.Hour, 0)                    // $0.40 tonight
	mk.window(m, 2, night.Add(20*time.Hour), night.Add(30*time.Hour), 300_000, time.Hour, 0) // $0.30, after the deadline
	plan, err := mk.svc.CreateDeferred(mk.renter, suanli.DeferredCreate{Query: "gpu_name=RTX_4090", GPUs: 1, Hours: 6,
		Deadline: mk.now.Add(24 * time.Hour), MaxPrice: 800_000, Image: "img", Cmd: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Booking == nil || !plan.Booking.Start.Equal(night) || plan.Cost != 2_400_000 || plan.NowCost != 6_000_000 || plan.Saving != 3_600_000 {
		t.Fatalf("plan = %+v (booking %+v)", plan, plan.Booking)
	}
	if !strings.Contains(plan.Explanation, "$3.60 less than running now") {
		t.Errorf("explanation = %q", plan.Explanation)
	}
	// The choice is stored on the booking: a later read explains it.
	stored, err := mk.svc.FindBookingByID(mk.renter, plan.Booking.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stored.Note, plan.Explanation) || !strings.HasPrefix(stored.Note, "deferred job (deadline ") {
		t.Errorf("stored note = %q, want the explanation %q", stored.Note, plan.Explanation)
	}
	// A later deadline reaches the $0.30 window.
	plan, err = mk.svc.CreateDeferred(mk.renter, suanli.DeferredCreate{GPUs: 1, Hours: 6, Deadline: mk.now.Add(48 * time.Hour), Image: "img", Cmd: []string{"x"}})
	if err != nil || plan.Booking == nil || plan.Booking.PriceGPU != 300_000 {
		t.Fatalf("later deadline: %+v %v", plan, err)
	}
	// Nothing under $0.10: refused, nothing booked.
	_, err = mk.svc.CreateDeferred(mk.renter, suanli.DeferredCreate{GPUs: 1, Hours: 2, Deadline: mk.now.Add(48 * time.Hour), MaxPrice: 100_000, Image: "img"})
	if suanli.ErrorCode(err) != suanli.ECONFLICT || !strings.Contains(err.Error(), "raise --max-price") {
		t.Errorf("cap under every price: %v", err)
	}
	// When now is cheapest it runs now, stopped by its max runtime.
	p := suanli.Money(100_000)
	if _, err := mk.svc.ListMachine(mk.host, m, suanli.ListingUpdate{PriceGPU: &p}); err != nil {
		t.Fatal(err)
	}
	plan, err = mk.svc.CreateDeferred(mk.renter, suanli.DeferredCreate{GPUs: 1, Hours: 2, Deadline: mk.now.Add(5 * time.Hour), Image: "img", Cmd: []string{"x"}})
	if err != nil || plan.Instance == nil || time.Duration(plan.Instance.Guards.MaxRuntime) != 2*time.Hour {
		t.Fatalf("now cheapest: %+v %v", plan, err)
	}
	// No booking holds that choice: the instance's history does.
	evs, err := mk.db.InstanceEvents(context.Background(), plan.Instance.ID)
	if err != nil {
		t.Fatal(err)
	}
	explained := false
	for _, e := range evs {
		explained = explained || strings.Contains(e.Message, plan.Explanation)
	}
	if !explained {
		t.Errorf("instance %d history %+v does not hold the explanation %q", plan.Instance.ID, evs, plan.Explanation)
	}
	mk.checkLedger()
}

// TestScheduleBooksAhead: a recurring rental books its runs within a day
// ahead, once each, and says when no window holds a run.
func TestScheduleBooksAhead(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(2, suanli.Dollars(1), 100_000, 4)
	mk.tick(2*time.Second, nil)
	day := mk.now.Truncate(24 * time.Hour).Add(24 * time.Hour) // next midnight UTC
	mk.window(m, 2, day, day.Add(6*time.Hour), 500_000, time.Hour, 0)
	sc, err := mk.svc.CreateSchedule(mk.renter, suanli.Schedule{Cron: "0 2 * * *", GPUs: 1, Hours: 2, Image: "img", Cmd: []string{"report"}})
	if err != nil {
		t.Fatal(err)
	}
	if !sc.NextRun.Equal(day.Add(2 * time.Hour)) {
		t.Fatalf("next run %v, want %v", sc.NextRun, day.Add(2*time.Hour))
	}
	if err := mk.svc.RunSchedules(context.Background()); err != nil { // again: no double booking
		t.Fatal(err)
	}
	bs, err := mk.db.FindBookings(context.Background(), sqlstore.BookingFilter{ScheduleID: sc.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 || !bs[0].Start.Equal(day.Add(2*time.Hour)) || bs[0].End.Sub(bs[0].Start) != 2*time.Hour || bs[0].Cost != 1_000_000 {
		t.Fatalf("bookings = %+v", bs)
	}
	if !strings.Contains(bs[0].Note, "run of schedule") {
		t.Errorf("scheduled booking's note = %q, want it to name the schedule", bs[0].Note)
	}
	// A run no window holds is reported on the schedule and as an alert.
	sc2, err := mk.svc.CreateSchedule(mk.renter, suanli.Schedule{Cron: "0 12 * * *", GPUs: 1, Hours: 1, Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sc2.LastError, "no published window holds the run") {
		t.Errorf("schedule without a window: last error %q", sc2.LastError)
	}
	if _, err := mk.svc.CreateSchedule(mk.renter, suanli.Schedule{Cron: "61 * * * *", GPUs: 1, Hours: 1, Image: "img"}); suanli.ErrorCode(err) != suanli.EINVALID {
		t.Errorf("bad cron: %v", err)
	}
	mk.checkLedger()
}

// TestDeferredUsesPriceHistory: with no window published, the last week's
// price history names the valley before the deadline; the plan reports it
// (it runs now, since only a window can hold a later start), and a job
// refused by its price cap is told when the cap is typically met.
func TestDeferredUsesPriceHistory(t *testing.T) {
	mk := newMarket(t)
	mk.machine(2, suanli.Dollars(1), 100_000, 4) // $1/GPU-h on demand now
	mk.tick(2*time.Second, nil)
	midnight := mk.now.Truncate(24 * time.Hour)
	var history []suanli.PricePoint
	for k := 1; k <= 3; k++ {
		day := midnight.Add(-time.Duration(k) * 24 * time.Hour)
		history = append(history,
			suanli.PricePoint{At: day.Add(3 * time.Hour), GPUName: "RTX 4090", Kind: suanli.PriceListed, Price: 400_000},
			suanli.PricePoint{At: day.Add(12 * time.Hour), GPUName: "RTX 4090", Kind: suanli.PriceListed, Price: suanli.Dollars(1)})
	}
	if err := mk.db.RecordMarketSample(context.Background(), history, nil); err != nil {
		t.Fatal(err)
	}
	valley := midnight.Add(27 * time.Hour) // tomorrow 03:00 UTC
	if valley.Sub(mk.now) > 22*time.Hour || valley.Before(mk.now) {
		t.Fatalf("test clock %s: tomorrow 03:00 is not within the deadline", mk.now)
	}
	_, err := mk.svc.CreateDeferred(mk.renter, suanli.DeferredCreate{GPUs: 1, Hours: 2, Deadline: mk.now.Add(24 * time.Hour), MaxPrice: 500_000, Image: "img"})
	if suanli.ErrorCode(err) != suanli.ECONFLICT || !strings.Contains(err.Error(), "price history: "+valley.Format(time.RFC3339)+" is typically $0.40/GPU-h, under your cap") {
		t.Errorf("capped under the price now: %v, want a conflict naming the valley %s", err, valley)
	}
	plan, err := mk.svc.CreateDeferred(mk.renter, suanli.DeferredCreate{GPUs: 1, Hours: 2, Deadline: mk.now.Add(24 * time.Hour), Image: "img", Cmd: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Instance == nil || plan.ValleyAt == nil || !plan.ValleyAt.Equal(valley) || plan.ValleyPrice != 400_000 {
		t.Fatalf("plan = %+v, want it run now with the valley at %s for $0.40", plan, valley)
	}
	if !strings.Contains(plan.Explanation, "price history puts the valley before the deadline at "+valley.Format(time.RFC3339)) {
		t.Errorf("explanation = %q, want the valley", plan.Explanation)
	}
	mk.checkLedger()
}
