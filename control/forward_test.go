package control_test

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// step is how far the clock may move at once: up to the next start or end
// of a booking, at most 5 s (so that leases and grace periods stay
// honest), at least a second.
func (mk *market) step() time.Duration {
	mk.t.Helper()
	bs, err := mk.db.FindBookings(context.Background(), sqlstore.BookingFilter{Live: true})
	if err != nil {
		mk.t.Fatal(err)
	}
	d := 5 * time.Second
	for _, b := range bs {
		next := b.End
		if b.Status == suanli.BookingBooked {
			next = b.Start
		}
		if g := next.Sub(mk.now); g < d {
			d = g
		}
	}
	return max(d, time.Second)
}

// tick moves the clock d, a step at a time (see step); each step the forward
// market's loop runs, then every agent except those in down syncs twice
// and the GPU invariants are checked.
func (mk *market) tick(d time.Duration, down map[int64]bool) {
	mk.t.Helper()
	ids := sortedIDs(mk.agents)
	for end := mk.now.Add(d); mk.now.Before(end); {
		mk.now = mk.now.Add(min(mk.step(), end.Sub(mk.now)))
		if err := mk.svc.RunBookings(context.Background()); err != nil {
			mk.t.Fatalf("run bookings: %v", err)
		}
		if err := mk.svc.CheckLeases(context.Background()); err != nil {
			mk.t.Fatalf("check leases: %v", err)
		}
		for round := 0; round < 2; round++ {
			for _, id := range ids {
				if !down[id] {
					mk.agents[id].sync()
				}
			}
			mk.checkGPUs()
		}
	}
}

func (mk *market) window(machine int64, gpus int, start, end time.Time, price suanli.Money, cancelBefore time.Duration, feeBP int64) *suanli.Window {
	mk.t.Helper()
	w, err := mk.svc.CreateWindow(mk.host, suanli.WindowCreate{MachineID: machine, GPUs: gpus, Start: start, End: end, PriceGPU: price,
		CancelBefore: cancelBefore, CancelFeeBP: feeBP})
	if err != nil {
		mk.t.Fatal(err)
	}
	return w
}

func (mk *market) balance(acct string) suanli.Money {
	mk.t.Helper()
	b, err := mk.db.LedgerBalance(context.Background(), acct)
	if err != nil {
		mk.t.Fatal(err)
	}
	return b
}

func (mk *market) checkLedger() {
	mk.t.Helper()
	c, err := mk.db.CheckLedger(context.Background())
	if err != nil {
		mk.t.Fatal(err)
	}
	if c.PostingSum != 0 || c.BalanceSum != 0 || len(c.Mismatched) > 0 || len(c.UnbalancedTxn) > 0 {
		mk.t.Fatalf("ledger does not balance: %+v", c)
	}
}

func renterID(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	return suanli.PrincipalFromContext(ctx).AccountID
}

func TestBookingLifecycle(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(4, suanli.Dollars(1), suanli.Money(100_000), 4)
	mk.tick(2*time.Second, nil)
	start := mk.now.Add(10 * time.Minute)
	w := mk.window(m, 4, start, start.Add(8*time.Hour), suanli.Dollars(2), 5*time.Minute, 2500)

	r := renterID(t, mk.renter)
	before := mk.balance(suanli.LedgerBalance(r))
	b, err := mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{WindowID: w.ID, Duration: 20 * time.Minute, GPUs: 3, Image: "img", Cmd: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	want := suanli.Dollars(2 * 3 * 20 / 60)
	if b.Cost != want {
		t.Fatalf("cost = %s, want %s", b.Cost, want)
	}
	if got := before - mk.balance(suanli.LedgerBalance(r)); got != want {
		t.Fatalf("balance moved by %s, want %s", got, want)
	}
	if got := mk.balance(suanli.LedgerEscrow(r)); got != want {
		t.Fatalf("escrow = %s, want %s", got, want)
	}
	// Three GPUs are booked: an on-demand rental of two would overlap.
	if _, err := mk.create(m, 2, 0); suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Fatalf("on-demand over a booking: err = %v, want conflict", err)
	}
	od := mk.mustCreate(m, 1, 0)
	bid := mk.mustCreate(m, 3, suanli.Dollars(1)) // interruptible: until the start
	mk.tick(5*time.Second, nil)
	mk.wantStatus(bid.ID, suanli.StatusRunning)
	// The listing's price changes: the booking's price stays.
	p := suanli.Dollars(9)
	if _, err := mk.svc.ListMachine(mk.host, m, suanli.ListingUpdate{PriceGPU: &p}); err != nil {
		t.Fatal(err)
	}

	mk.tick(start.Sub(mk.now), nil)
	b, _ = mk.svc.FindBookingByID(mk.renter, b.ID)
	if b.Status != suanli.BookingRunning || b.StartedAt == nil || b.StartedAt.Sub(start) > 2*time.Second {
		t.Fatalf("at the start: %+v", b)
	}
	mk.tick(10*time.Second, nil)
	in := mk.wantStatus(b.InstanceID, suanli.StatusRunning)
	if in.RentalType != suanli.RentalBooked || in.GPUCount != 3 {
		t.Fatalf("booked instance: %+v", in)
	}
	if got := mk.get(bid.ID).Status; got != suanli.StatusPreempted {
		t.Fatalf("interruptible on the booked GPUs: %s, want preempted", got)
	}
	mk.wantStatus(od.ID, suanli.StatusRunning)

	mk.tick(20*time.Minute, nil)
	b, _ = mk.svc.FindBookingByID(mk.renter, b.ID)
	if b.Status != suanli.BookingCompleted || b.Paid != want || b.Refund != 0 {
		t.Fatalf("at the end: %+v", b)
	}
	if st := mk.get(b.InstanceID).Status; st != suanli.StatusStopped {
		t.Fatalf("booked instance after the end: %s", st)
	}
	if _, err := mk.svc.StartInstance(mk.renter, b.InstanceID); suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Fatalf("restart after the end: err = %v, want conflict", err)
	}
	if got := mk.balance(suanli.LedgerEscrow(r)); got != 0 {
		t.Fatalf("escrow after the end = %s", got)
	}
	sum, err := mk.db.FindCharges(context.Background(), suanli.ChargeFilter{InstanceID: &b.InstanceID})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total != want {
		t.Fatalf("renter paid %s for the booking, want exactly %s: %+v", sum.Total, want, sum.ByKind)
	}
	mk.checkLedger()
}

func TestBookingCancelAndFailure(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(2, suanli.Dollars(1), suanli.Money(100_000), 4)
	mk.tick(2*time.Second, nil)
	r := renterID(t, mk.renter)
	start := mk.now.Add(20 * time.Minute)
	w := mk.window(m, 2, start, start.Add(10*time.Hour), suanli.Dollars(3), 10*time.Minute, 2000)
	book := func(at time.Time) *suanli.Booking {
		t.Helper()
		b, err := mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{WindowID: w.ID, Start: at, Duration: 10 * time.Minute, GPUs: 2, Image: "img"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b1 := book(start)
	if _, err := mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{WindowID: w.ID, Start: start.Add(5 * time.Minute), Hours: 1, GPUs: 1, Image: "img"}); suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Fatalf("overlapping booking: err = %v, want conflict", err)
	}
	before := mk.balance(suanli.LedgerBalance(r))
	c, err := mk.svc.CancelBooking(mk.renter, b1.ID)
	if err != nil || c.Refund != b1.Cost || c.Paid != 0 {
		t.Fatalf("cancel before the deadline: %+v, %v", c, err)
	}
	if got := mk.balance(suanli.LedgerBalance(r)) - before; got != b1.Cost {
		t.Fatalf("refund moved %s, want %s", got, b1.Cost)
	}
	b2 := book(start)
	mk.tick(10*time.Minute+time.Second, nil) // past the deadline
	earn := mk.balance(suanli.LedgerEarnings(mk.hostID))
	c, err = mk.svc.CancelBooking(mk.renter, b2.ID)
	wantFee := suanli.MulDiv(b2.Cost, 2000, 10_000)
	if err != nil || c.Paid != wantFee || c.Refund != b2.Cost-wantFee {
		t.Fatalf("cancel after the deadline: %+v, %v", c, err)
	}
	if got := mk.balance(suanli.LedgerEarnings(mk.hostID)) - earn; got != wantFee {
		t.Fatalf("host earned %s from the fee, want %s", got, wantFee)
	}

	// The host goes silent: at the start the booking fails, the renter gets
	// everything back and the machine counts a failed start.
	b3 := book(start.Add(time.Hour))
	mk.tick(start.Add(time.Hour).Sub(mk.now)+time.Second, map[int64]bool{m: true})
	b3, _ = mk.svc.FindBookingByID(mk.renter, b3.ID)
	if b3.Status != suanli.BookingFailed || b3.Refund != b3.Cost {
		t.Fatalf("host offline at the start: %+v", b3)
	}
	rec, err := mk.db.HostRecord(context.Background(), m)
	if err != nil || rec.FailedStarts != 1 {
		t.Fatalf("failed starts = %d (%v), want 1", rec.FailedStarts, err)
	}
	if got := mk.balance(suanli.LedgerEscrow(r)); got != 0 {
		t.Fatalf("escrow = %s, want 0", got)
	}
	mk.checkLedger()
}

// TestForwardProperty drives random windows, bookings, cancellations,
// on-demand and interruptible rentals on a fake clock and checks: no two
// running workloads share a GPU (tick), live bookings never overlap beyond
// their window, every booking on a healthy host starts within two seconds
// of its start, and escrow, charges and refunds reconcile exactly with the
// ledger.
func TestForwardProperty(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewSource(seed))
		mk := newMarket(t)
		ms := []int64{mk.machine(4, suanli.Dollars(1), suanli.Money(100_000), 2), mk.machine(2, suanli.Dollars(1), suanli.Money(100_000), 2)}
		mk.tick(2*time.Second, nil)
		var ws []*suanli.Window
		for i := 0; i < 6; i++ {
			m := ms[rng.Intn(len(ms))]
			start := mk.now.Add(time.Duration(1+rng.Intn(15)) * time.Minute)
			w, err := mk.svc.CreateWindow(mk.host, suanli.WindowCreate{MachineID: m, GPUs: 1 + rng.Intn(2), Start: start,
				End: start.Add(time.Duration(5+rng.Intn(10)) * time.Minute), PriceGPU: suanli.Money(500_000 + rng.Int63n(3_000_000)),
				CancelBefore: time.Duration(rng.Intn(10)) * time.Minute, CancelFeeBP: rng.Int63n(5000)})
			if err == nil {
				ws = append(ws, w)
			} else if suanli.ErrorCode(err) != suanli.ECONFLICT {
				t.Fatal(err)
			}
		}
		var booked []int64
		for step := 0; step < 40; step++ {
			switch k := rng.Intn(10); {
			case k < 4 && len(ws) > 0:
				w := ws[rng.Intn(len(ws))]
				at := w.Start.Add(time.Duration(rng.Intn(5)) * time.Minute)
				if !at.After(mk.now) {
					continue
				}
				b, err := mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{WindowID: w.ID, Start: at, Duration: time.Duration(1+rng.Intn(5)) * time.Minute,
					GPUs: 1 + rng.Intn(w.GPUs), Image: "img"})
				if err == nil {
					booked = append(booked, b.ID)
				} else if c := suanli.ErrorCode(err); c != suanli.ECONFLICT && c != suanli.EINVALID {
					t.Fatal(err)
				}
			case k < 5 && len(booked) > 0:
				mk.svc.CancelBooking(mk.renter, booked[rng.Intn(len(booked))])
			case k < 7:
				mk.create(ms[rng.Intn(len(ms))], 1, 0)
			case k < 9:
				mk.create(ms[rng.Intn(len(ms))], 1+rng.Intn(2), suanli.Money(200_000+rng.Int63n(2_000_000)))
			default:
				live := true
				ins, _, _ := mk.db.FindInstances(context.Background(), suanli.InstanceFilter{Live: &live, Limit: 1000}, mk.now)
				if len(ins) > 0 {
					if in := ins[rng.Intn(len(ins))]; in.RentalType != suanli.RentalBooked {
						mk.svc.DestroyInstance(mk.renter, in.ID)
					}
				}
			}
			mk.tick(time.Duration(5+rng.Intn(20))*time.Second, nil)
		}
		mk.tick(35*time.Minute, nil)
		r := renterID(t, mk.renter)
		bs, err := mk.db.FindBookings(context.Background(), sqlstore.BookingFilter{AccountID: r})
		if err != nil {
			t.Fatal(err)
		}
		var paid, refunded suanli.Money
		started := 0
		for _, b := range bs {
			switch b.Status {
			case suanli.BookingCompleted:
				started++
				if b.StartedAt == nil || b.StartedAt.Sub(b.Start) > 2*time.Second || b.StartedAt.Before(b.Start) {
					t.Errorf("seed %d: booking %d started at %v, due %v", seed, b.ID, b.StartedAt, b.Start)
				}
				if b.Paid != b.Cost {
					t.Errorf("seed %d: booking %d paid %s of %s", seed, b.ID, b.Paid, b.Cost)
				}
			case suanli.BookingCancelled:
				fee, refund := b.CancelSettlement(*b.EndedAt)
				if b.Paid != fee || b.Refund != refund {
					t.Errorf("seed %d: booking %d cancelled: paid %s refund %s, want %s and %s", seed, b.ID, b.Paid, b.Refund, fee, refund)
				}
			default:
				t.Errorf("seed %d: booking %d is %s after every window ended (%s)", seed, b.ID, b.Status, b.Message)
			}
			paid += b.Paid
			refunded += b.Refund
			for _, o := range bs {
				if o.ID < b.ID && o.WindowID == b.WindowID && o.Status == suanli.BookingCompleted && b.Status == suanli.BookingCompleted &&
					o.Start.Before(b.End) && b.Start.Before(o.End) {
					w, _ := mk.db.FindWindowByID(context.Background(), b.WindowID)
					if o.GPUs+b.GPUs > w.GPUs {
						t.Errorf("seed %d: bookings %d and %d overlap on window %d beyond its %d GPUs", seed, o.ID, b.ID, w.ID, w.GPUs)
					}
				}
			}
		}
		if got := mk.balance(suanli.LedgerEscrow(r)); got != 0 {
			t.Errorf("seed %d: escrow left %s", seed, got)
		}
		var bookingCharges suanli.Money
		sum, err := mk.db.FindCharges(context.Background(), suanli.ChargeFilter{AccountID: &r})
		if err != nil {
			t.Fatal(err)
		}
		bookingCharges = sum.ByKind[sqlstore.KindBookingPayout] + sum.ByKind[sqlstore.KindBookingFee]
		if bookingCharges != paid {
			t.Errorf("seed %d: booking charges %s, bookings paid %s", seed, bookingCharges, paid)
		}
		mk.checkLedger()
		t.Logf("seed %d: %d bookings, %d delivered, paid %s, refunded %s", seed, len(bs), started, paid, refunded)
	}
}

// TestBookingHostLost: the host of a running booking is lost halfway: the
// provider is paid for the part delivered up to the last heartbeat, the
// renter gets the rest of the escrow back, and the instance stays stopped
// when the host returns.
func TestBookingHostLost(t *testing.T) {
	mk := newMarket(t)
	mk.svc.SetClock(func() time.Time { return mk.now }) // the failover grace runs on this clock
	m := mk.machine(2, suanli.Dollars(1), suanli.Money(100_000), 4)
	mk.tick(2*time.Second, nil)
	r := renterID(t, mk.renter)
	start := mk.now.Add(10 * time.Minute)
	w := mk.window(m, 2, start, start.Add(10*time.Hour), suanli.Dollars(3), time.Minute, 0)
	b, err := mk.svc.CreateBooking(mk.renter, suanli.BookingCreate{WindowID: w.ID, Duration: time.Hour, GPUs: 2, Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	mk.tick(start.Sub(mk.now)+20*time.Minute, nil)
	earn := mk.balance(suanli.LedgerEarnings(mk.hostID))
	bal := mk.balance(suanli.LedgerBalance(r))
	mk.tick(5*time.Minute, map[int64]bool{m: true}) // silent past lost-after
	b, _ = mk.svc.FindBookingByID(mk.renter, b.ID)
	in := mk.get(b.InstanceID)
	if in.Status != suanli.StatusLost || in.StoppedAt == nil {
		t.Fatalf("booked instance after its host went silent: %s", in.Status)
	}
	delivered := in.StoppedAt.Sub(b.Start)
	if delivered < 19*time.Minute || delivered > 21*time.Minute {
		t.Fatalf("delivered %s, want about 20 minutes", delivered)
	}
	paid := suanli.MulDiv(b.Cost, delivered.Microseconds(), time.Hour.Microseconds())
	if b.Status != suanli.BookingFailed || b.Paid != paid || b.Refund != b.Cost-paid {
		t.Fatalf("booking after the loss: status %s, paid %s, refund %s; want failed, %s, %s (%s)", b.Status, b.Paid, b.Refund, paid, b.Cost-paid, b.Message)
	}
	if got := mk.balance(suanli.LedgerEarnings(mk.hostID)) - earn; got != paid {
		t.Errorf("provider earned %s, want %s for the part delivered", got, paid)
	}
	if got := mk.balance(suanli.LedgerBalance(r)) - bal; got != b.Cost-paid {
		t.Errorf("renter got %s back, want %s", got, b.Cost-paid)
	}
	if got := mk.balance(suanli.LedgerEscrow(r)); got != 0 {
		t.Errorf("escrow = %s, want 0", got)
	}
	mk.tick(10*time.Second, nil) // the host is back
	if in := mk.get(b.InstanceID); in.Desired != suanli.DesiredStopped || in.Status == suanli.StatusRunning {
		t.Errorf("booked instance after its host came back: %s (desired %s)", in.Status, in.Desired)
	}
	mk.checkLedger()
}

// TestBookingRequestKey: a booking request retried with the same
// Idempotency-Key (after a crash between the booking's commit and its
// recorded reply) gets the same booking back; escrow is held once.
func TestBookingRequestKey(t *testing.T) {
	mk := newMarket(t)
	m := mk.machine(4, suanli.Dollars(1), suanli.Money(100_000), 4)
	mk.tick(2*time.Second, nil)
	start := mk.now.Add(10 * time.Minute)
	w := mk.window(m, 4, start, start.Add(8*time.Hour), suanli.Dollars(2), 5*time.Minute, 2500)
	r := renterID(t, mk.renter)
	before := mk.balance(suanli.LedgerBalance(r))
	ctx := suanli.NewContextWithRequestKey(mk.renter, "book-once")
	c := suanli.BookingCreate{WindowID: w.ID, Duration: 20 * time.Minute, GPUs: 1, Image: "img", Cmd: []string{"train"}}
	first, err := mk.svc.CreateBooking(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := mk.svc.CreateBooking(ctx, c)
	if err != nil || again.ID != first.ID {
		t.Fatalf("retry with the same key: booking %d (%v), want %d", again.ID, err, first.ID)
	}
	if got := before - mk.balance(suanli.LedgerBalance(r)); got != first.Cost {
		t.Errorf("balance moved by %s, want one booking's %s", got, first.Cost)
	}
	other, err := mk.svc.CreateBooking(suanli.NewContextWithRequestKey(mk.renter, "book-twice"), c)
	if err != nil || other.ID == first.ID {
		t.Errorf("another key: booking %d (%v), want a new one", other.ID, err)
	}
	// A window published twice with one key is one window.
	hk := suanli.NewContextWithRequestKey(mk.host, "publish-once")
	wc := suanli.WindowCreate{MachineID: m, GPUs: 1, Start: start.Add(24 * time.Hour), End: start.Add(30 * time.Hour), PriceGPU: suanli.Dollars(2)}
	w1, err := mk.svc.CreateWindow(hk, wc)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := mk.svc.CreateWindow(hk, wc)
	if err != nil || w2.ID != w1.ID || w2.FreeGPUs != 1 {
		t.Errorf("window retry with the same key: %+v (%v), want window %d back with 1 free GPU", w2, err, w1.ID)
	}
	mk.checkLedger()
}
