package control_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
)

func TestPreemptionLifecycle(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(2, 400_000, 100_000, 10)
	low := mk.mustCreate(m, 1, 250_000)
	if low.RentalType != suanli.RentalInterruptible || low.Bid != 250_000 {
		t.Fatalf("create = %s bid %s, want interruptible at $0.25", low.RentalType, low.Bid)
	}
	mk.advance(time.Second)
	mk.wantStatus(low.ID, suanli.StatusRunning)
	mk.advance(20 * time.Second)

	// An on-demand rental of both GPUs outranks the bid: it preempts it and
	// waits for it to stop before it starts.
	od := mk.mustCreate(m, 2, 0)
	if od.Status != suanli.StatusScheduling || !strings.Contains(od.StatusMessage, "preempted instance") {
		t.Errorf("on-demand create: %s %q, want scheduling while the bid stops", od.Status, od.StatusMessage)
	}
	v := mk.wantStatus(low.ID, suanli.StatusPreempting)
	if !strings.Contains(v.StatusMessage, "SIGTERM now, stopped within 10 s") || v.PreemptedBy != od.ID {
		t.Errorf("victim message %q (by %d)", v.StatusMessage, v.PreemptedBy)
	}
	for i := 0; i < 12; i++ {
		mk.advance(time.Second)
		mk.checkGPUs()
	}
	mk.wantStatus(low.ID, suanli.StatusPreempted)
	mk.wantStatus(od.ID, suanli.StatusRunning)
	a := mk.agents[m]
	var sig, stop, odStart time.Time
	for _, e := range a.events {
		switch {
		case e.id == low.ID && e.what == "sigterm":
			sig = e.at
		case e.id == low.ID && e.what == "stop":
			stop = e.at
		case e.id == od.ID && e.what == "start":
			odStart = e.at
		}
	}
	if sig.IsZero() || stop.Before(sig) || odStart.Before(stop) {
		t.Errorf("SIGTERM %s, stop %s, on-demand start %s: want SIGTERM, then stop, then the start", sig, stop, odStart)
	}

	// While preempted: no compute accrues; the disk does.
	before := mk.get(low.ID)
	mk.advance(time.Minute)
	after := mk.get(low.ID)
	storage := suanli.MulDiv(100_000*10, 60*suanli.MicrosPerSecond, suanli.MicrosPerMonth)
	if d := after.CostSoFar - before.CostSoFar; d > storage+1 {
		t.Errorf("a preempted minute cost %s, want only its storage %s", d, storage)
	}

	// The on-demand rental ends: the bid wins its GPU back by itself.
	if _, err := mk.svc.DestroyInstance(mk.renter, od.ID); err != nil {
		t.Fatal(err)
	}
	r := mk.get(low.ID)
	if r.Status != suanli.StatusPending || !strings.Contains(r.StatusMessage, "resuming") {
		t.Errorf("after the destroy: %s %q, want pending (resuming)", r.Status, r.StatusMessage)
	}
	for i := 0; i < 3; i++ {
		mk.advance(time.Second)
		mk.checkGPUs()
	}
	mk.wantStatus(low.ID, suanli.StatusRunning)
	mk.advance(10 * time.Second)
	if _, err := mk.db.Settle(context.Background(), mk.now); err != nil {
		t.Fatal(err)
	}
	mk.computeOnlyWhileRunning(low.ID)
	mk.checkPreemptions(func(int64) time.Duration { return 10 * time.Second })

	// The host's offer shows it interrupted its one interruptible rental.
	o, err := mk.svc.FindOfferByID(mk.renter, m)
	if err != nil {
		t.Fatal(err)
	}
	if o.InterruptionRate != 1 || o.PreemptGraceS != 10 {
		t.Errorf("offer: interruption rate %v, grace %d; want 1 and 10", o.InterruptionRate, o.PreemptGraceS)
	}
	chk, err := mk.db.CheckLedger(context.Background())
	if err != nil || chk.PostingSum != 0 || len(chk.Mismatched) > 0 || len(chk.UnbalancedTxn) > 0 {
		t.Errorf("ledger: %+v %v", chk, err)
	}
}

func TestBidBelowMinimum(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(2, 400_000, 200_000, 30)
	_, err := mk.create(m, 2, 399_999)
	var e *suanli.Error
	if suanli.ErrorCode(err) != suanli.EINVALID || !errorAs(err, &e) || e.Field != "bid" ||
		e.Message != "bid: $0.399999/h is below offer 1's minimum bid of $0.40/h for 2 GPUs" {
		t.Errorf("low bid: %v (%+v)", err, e)
	}
	in := mk.mustCreate(m, 1, 300_000)
	if _, err := mk.svc.ChangeBid(mk.renter, in.ID, 100_000); suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(err.Error(), "minimum bid of $0.20/h") {
		t.Errorf("lowering below the minimum: %v", err)
	}
	od := mk.mustCreate(m, 1, 0)
	if _, err := mk.svc.ChangeBid(mk.renter, od.ID, 500_000); suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Errorf("bid on an on-demand rental: %v, want conflict", err)
	}
}

func errorAs(err error, e **suanli.Error) bool {
	x, ok := err.(*suanli.Error)
	*e = x
	return ok
}

func TestBidChangeSwapsWinners(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(1, 400_000, 100_000, 4)
	a := mk.mustCreate(m, 1, 200_000)
	mk.advance(time.Second)
	b := mk.mustCreate(m, 1, 300_000) // outbids a
	mk.wantStatus(a.ID, suanli.StatusPreempting)
	for i := 0; i < 6; i++ {
		mk.advance(time.Second)
		mk.checkGPUs()
	}
	mk.wantStatus(a.ID, suanli.StatusPreempted)
	mk.wantStatus(b.ID, suanli.StatusRunning)

	// An equal bid does not win it back; a higher one does.
	if _, err := mk.svc.ChangeBid(mk.renter, a.ID, 300_000); err != nil {
		t.Fatal(err)
	}
	mk.wantStatus(a.ID, suanli.StatusPreempted)
	in, err := mk.svc.ChangeBid(mk.renter, a.ID, 500_000)
	if err != nil {
		t.Fatal(err)
	}
	if in.Status != suanli.StatusPending || in.Bid != 500_000 || in.Rates.ComputePerHour != 500_000 {
		t.Errorf("raised bid: %s bid %s rate %s, want pending at $0.50", in.Status, in.Bid, in.Rates.ComputePerHour)
	}
	mk.wantStatus(b.ID, suanli.StatusPreempting)
	for i := 0; i < 6; i++ {
		mk.advance(time.Second)
		mk.checkGPUs()
	}
	mk.wantStatus(a.ID, suanli.StatusRunning)
	mk.wantStatus(b.ID, suanli.StatusPreempted)

	// Lowering b's bid while it waits keeps it waiting; stopping it ends the wait.
	if _, err := mk.svc.StopInstance(mk.renter, b.ID); err != nil {
		t.Fatal(err)
	}
	if got := mk.get(b.ID); got.Status != suanli.StatusStopped || got.Waiting() {
		t.Errorf("stopped while preempted: %s waiting=%v", got.Status, got.Waiting())
	}
}

func TestStartWhenGPUsWereTaken(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(1, 400_000, 100_000, 5)
	a := mk.mustCreate(m, 1, 0)
	mk.advance(time.Second)
	if _, err := mk.svc.StopInstance(mk.renter, a.ID); err != nil {
		t.Fatal(err)
	}
	mk.advance(6 * time.Second) // within the grace
	mk.wantStatus(a.ID, suanli.StatusStopped)
	b := mk.mustCreate(m, 1, 0)
	mk.advance(time.Second)

	_, err := mk.svc.StartInstance(mk.renter, a.ID)
	if suanli.ErrorCode(err) != suanli.ECONFLICT || !strings.Contains(err.Error(), "instance 2 (on-demand)") ||
		!strings.Contains(err.Error(), "--wait") || !strings.Contains(err.Error(), "--elsewhere") {
		t.Fatalf("start with its GPU taken: %v; want a conflict naming the holder and both ways on", err)
	}
	q, err := mk.svc.StartInstanceWith(mk.renter, a.ID, suanli.StartOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if !q.Waiting() || q.WaitingSince == nil {
		t.Fatalf("queued start: %s desired %s, want waiting", q.Status, q.Desired)
	}
	if _, err := mk.svc.DestroyInstance(mk.renter, b.ID); err != nil {
		t.Fatal(err)
	}
	mk.advance(6 * time.Second)
	mk.wantStatus(a.ID, suanli.StatusRunning)

	// An on-demand start preempts an interruptible rental on its GPU.
	if _, err := mk.svc.StopInstance(mk.renter, a.ID); err != nil {
		t.Fatal(err)
	}
	mk.advance(6 * time.Second)
	bid := mk.mustCreate(m, 1, 300_000)
	mk.advance(time.Second)
	if _, err := mk.svc.StartInstance(mk.renter, a.ID); err != nil {
		t.Fatalf("on-demand start over a bid: %v", err)
	}
	mk.wantStatus(bid.ID, suanli.StatusPreempting)
	for i := 0; i < 5; i++ {
		mk.advance(time.Second)
		mk.checkGPUs()
	}
	mk.wantStatus(a.ID, suanli.StatusRunning)
	mk.wantStatus(bid.ID, suanli.StatusPreempted)
}

func TestStartQueueOrder(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(1, 400_000, 100_000, 5)
	stoppedOne := func() *suanli.Instance {
		in := mk.mustCreate(m, 1, 0)
		mk.advance(time.Second)
		if _, err := mk.svc.StopInstance(mk.renter, in.ID); err != nil {
			t.Fatal(err)
		}
		mk.advance(6 * time.Second)
		return in
	}
	a, b := stoppedOne(), stoppedOne()
	holder := mk.mustCreate(m, 1, 0)
	mk.advance(time.Second)
	for _, in := range []*suanli.Instance{b, a} { // b queues first
		if _, err := mk.svc.StartInstanceWith(mk.renter, in.ID, suanli.StartOptions{Wait: true}); err != nil {
			t.Fatal(err)
		}
		mk.advance(time.Second)
	}
	if _, err := mk.svc.DestroyInstance(mk.renter, holder.ID); err != nil {
		t.Fatal(err)
	}
	mk.advance(6 * time.Second)
	mk.wantStatus(b.ID, suanli.StatusRunning)
	if got := mk.get(a.ID); !got.Waiting() {
		t.Fatalf("a = %s, want still queued behind b", got.Status)
	}
	if _, err := mk.svc.DestroyInstance(mk.renter, b.ID); err != nil {
		t.Fatal(err)
	}
	mk.advance(6 * time.Second)
	mk.wantStatus(a.ID, suanli.StatusRunning)
	mk.checkGPUs()
}

func TestFleetsAndQueries(t *testing.T) {
	mk := newMarket(t)
	cheap := mk.machine(2, 400_000, 100_000, 30)
	dear := mk.machine(2, 600_000, 100_000, 30)
	fc := suanli.FleetCreate{InstanceCreate: suanli.InstanceCreate{Image: "img", Cmd: []string{"train"}}, Query: "gpu_name=RTX_4090 num_gpus=1", Count: 3}
	res, err := mk.svc.CreateFleet(mk.renter, fc)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Instances) != 3 || res.Unplaced != 0 {
		t.Fatalf("fleet: %s", res.Message)
	}
	on := map[int64]int{}
	for _, in := range res.Instances {
		on[in.MachineID]++
		if in.GPUCount != 1 {
			t.Errorf("instance %d has %d GPUs, want 1 (num_gpus in a create query is per instance)", in.ID, in.GPUCount)
		}
	}
	if on[cheap] != 2 || on[dear] != 1 {
		t.Errorf("placed %v, want the cheaper machine filled first", on)
	}
	// One GPU is left: all or nothing rents nothing and says so.
	fc.AllOrNothing = true
	_, err = mk.svc.CreateFleet(mk.renter, fc)
	if suanli.ErrorCode(err) != suanli.ECONFLICT || !strings.Contains(err.Error(), "only 1 of 3 instances could be placed, so nothing was rented") {
		t.Errorf("all or nothing: %v", err)
	}
	// Partial placement says what was placed and why the rest was not.
	fc.AllOrNothing = false
	res, err = mk.svc.CreateFleet(mk.renter, fc)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Instances) != 1 || res.Unplaced != 2 || !strings.Contains(res.Message, "placed 1 of 3") ||
		!strings.Contains(res.Message, "offer 1 has 0 free GPUs") || len(res.Rejections) != 2 {
		t.Errorf("partial: %q, rejections %+v", res.Message, res.Rejections)
	}
	// A maximum price below every offer: each offer says why.
	_, err = mk.svc.CreateFleet(mk.renter, suanli.FleetCreate{InstanceCreate: suanli.InstanceCreate{Image: "img", Cmd: []string{"train"}},
		Query: "gpu_name=RTX_4090", MaxPrice: 100_000})
	if suanli.ErrorCode(err) != suanli.ECONFLICT || !strings.Contains(err.Error(), "above your maximum of $0.10/h") {
		t.Errorf("max price: %v", err)
	}
	// A query no offer matches.
	_, err = mk.svc.CreateFleet(mk.renter, suanli.FleetCreate{InstanceCreate: suanli.InstanceCreate{Image: "img", Cmd: []string{"train"}}, Query: "gpu_name=H100"})
	if suanli.ErrorCode(err) != suanli.ECONFLICT || !strings.Contains(err.Error(), "no listed offer matches") {
		t.Errorf("no match: %v", err)
	}
}

func TestQueryPreemptsBids(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(1, 400_000, 100_000, 5)
	low := mk.mustCreate(m, 1, 150_000)
	mk.advance(time.Second)
	res, err := mk.svc.CreateFleet(mk.renter, suanli.FleetCreate{InstanceCreate: suanli.InstanceCreate{Image: "img", Cmd: []string{"train"}}, Query: "gpu_name=RTX_4090"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Instances) != 1 || res.Instances[0].MachineID != m {
		t.Fatalf("query create: %s", res.Message)
	}
	mk.wantStatus(low.ID, suanli.StatusPreempting)
	// A bid below the running one finds nothing to take.
	bid := suanli.Money(120_000)
	_, err = mk.svc.CreateFleet(mk.renter, suanli.FleetCreate{InstanceCreate: suanli.InstanceCreate{Image: "img", Cmd: []string{"train"}, Bid: &bid}, Query: "gpu_name=RTX_4090"})
	if suanli.ErrorCode(err) != suanli.ECONFLICT || !strings.Contains(err.Error(), "held by on-demand rentals or bids at or above yours") {
		t.Errorf("low bid query: %v", err)
	}
}

func TestReservation(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(1, 400_000, 100_000, 30)
	steps := []suanli.ReserveDiscount{{MinDays: 7, DiscountBP: 1000}, {MinDays: 30, DiscountBP: 2500}}
	maxBP, fee := int64(2000), int64(500)
	if _, err := mk.svc.ListMachine(mk.host, m, suanli.ListingUpdate{ReserveDiscounts: &steps, ReserveMaxDiscountBP: &maxBP, ReserveCancelFeeBP: &fee}); err != nil {
		t.Fatal(err)
	}
	in := mk.mustCreate(m, 1, 0)
	mk.advance(time.Second)
	mk.wantStatus(in.ID, suanli.StatusRunning)
	if _, err := mk.svc.ReserveInstance(mk.renter, in.ID, 3); suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(err.Error(), "at least 7 days") {
		t.Errorf("3 days: %v", err)
	}
	balance := func() suanli.Money {
		b, err := mk.svc.Balance(mk.renter)
		if err != nil {
			t.Fatal(err)
		}
		return b.Balance
	}
	if _, err := mk.db.Settle(context.Background(), mk.now); err != nil {
		t.Fatal(err)
	}
	before := balance()
	r, err := mk.svc.ReserveInstance(mk.renter, in.ID, 30)
	if err != nil {
		t.Fatal(err)
	}
	// 30 days × 24 h × $0.40 = $288 list; 25% capped at 20%: $230.40.
	if r.ListPrice != suanli.Dollars(288) || r.DiscountBP != 2000 || r.Prepaid != 230_400_000 {
		t.Errorf("reservation: list %s, discount %d bp, prepaid %s; want $288, 2000, $230.40", r.ListPrice, r.DiscountBP, r.Prepaid)
	}
	if got := before - balance(); got != r.Prepaid {
		t.Errorf("balance fell by %s, want the prepayment %s", got, r.Prepaid)
	}
	got := mk.get(in.ID)
	if got.RentalType != suanli.RentalReserved || got.ReservedUntil == nil || got.Rates.ComputePerHour != 0 {
		t.Errorf("reserved instance: %s until %v at %s/h", got.RentalType, got.ReservedUntil, got.Rates.ComputePerHour)
	}
	if _, err := mk.svc.ReserveInstance(mk.renter, in.ID, 30); suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Errorf("reserving twice: %v", err)
	}
	// Ten days on, no compute was charged; cancel.
	mk.now = mk.now.Add(10 * 24 * time.Hour)
	if _, err := mk.db.Settle(context.Background(), mk.now); err != nil {
		t.Fatal(err)
	}
	id := in.ID
	sum, err := mk.db.FindCharges(context.Background(), suanli.ChargeFilter{InstanceID: &id})
	if err != nil {
		t.Fatal(err)
	}
	computeBefore := sum.ByKind[suanli.MeterCompute]
	c, err := mk.svc.CancelReservation(mk.renter, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Used 1/3: unused $153.60; discount received $96 − $76.80 = $19.20;
	// fee 5% of $153.60 = $7.68; refund $126.72.
	if c.Status != suanli.ReservationCancelled || c.Refund != 126_720_000 {
		t.Errorf("cancel: %s refund %s, want cancelled, $126.72", c.Status, c.Refund)
	}
	got = mk.get(in.ID)
	if got.RentalType != suanli.RentalOnDemand || got.Rates.ComputePerHour != 400_000 || got.ReservedUntil != nil {
		t.Errorf("after cancel: %s at %s/h", got.RentalType, got.Rates.ComputePerHour)
	}
	mk.now = mk.now.Add(time.Hour)
	mk.agents[m].sync() // compute is settled up to the host's last heartbeat
	if _, err := mk.db.Settle(context.Background(), mk.now); err != nil {
		t.Fatal(err)
	}
	sum, err = mk.db.FindCharges(context.Background(), suanli.ChargeFilter{InstanceID: &id})
	if err != nil {
		t.Fatal(err)
	}
	if d := sum.ByKind[suanli.MeterCompute] - computeBefore; d != 400_000 {
		t.Errorf("compute after cancel: %s for an hour, want $0.40", d)
	}
	if sum.ByKind["reservation"] != r.Prepaid || sum.ByKind["reservation_refund"] != -c.Refund {
		t.Errorf("charges by kind %v", sum.ByKind)
	}
	chk, err := mk.db.CheckLedger(context.Background())
	if err != nil || chk.PostingSum != 0 || len(chk.Mismatched) > 0 || len(chk.UnbalancedTxn) > 0 {
		t.Errorf("ledger: %+v %v", chk, err)
	}
	// Only an on-demand rental can be reserved.
	m2 := mk.machine(1, 400_000, 100_000, 30)
	bid := mk.mustCreate(m2, 1, 200_000)
	if _, err := mk.svc.ReserveInstance(mk.renter, bid.ID, 30); suanli.ErrorCode(err) != suanli.ECONFLICT || !strings.Contains(err.Error(), "interruptible") {
		t.Errorf("reserving a bid: %v", err)
	}
}
