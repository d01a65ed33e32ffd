package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// Ledger transaction kinds of bookings. The hold and its refund carry a
// zero amount (they are not charges: the money stays the renter's); the
// payout and the cancel fee carry what the renter paid.
const (
	KindBookingHold   = "booking_hold"   // balance → escrow
	KindBookingRefund = "booking_refund" // escrow → balance
	KindBookingPayout = "booking"        // escrow → provider earnings and platform fee
	KindBookingFee    = "booking_cancel_fee"
)

const windowCols = `id, machine_id, host_id, gpus, start_us, end_us, price_gpu, accept_bids, min_bid, cancel_before_s, cancel_fee_bp, status, created_at`

func scanWindow(r scanner) (*suanli.Window, error) {
	var w suanli.Window
	var start, end, price, minBid, before, created int64
	var bids int64
	if err := r.Scan(&w.ID, &w.MachineID, &w.HostID, &w.GPUs, &start, &end, &price, &bids, &minBid, &before, &w.CancelFeeBP, &w.Status, &created); err != nil {
		return nil, err
	}
	w.Start, w.End, w.CreatedAt = fromUS(start), fromUS(end), fromUS(created)
	w.PriceGPU, w.MinBid, w.AcceptBids = suanli.Money(price), suanli.Money(minBid), bids != 0
	w.CancelBefore = time.Duration(before) * time.Second
	return &w, nil
}

const bookingCols = `id, window_id, machine_id, host_id, account_id, gpus, start_us, end_us, price_gpu, cost, fee_bp, cancel_deadline,
	cancel_fee_bp, status, instance_id, image, cmd, refund, paid, started_at, ended_at, message, note, schedule_id, created_at`

func scanBooking(r scanner) (*suanli.Booking, error) {
	var b suanli.Booking
	var start, end, price, cost, deadline, refund, paid, created int64
	var cmd string
	var started, ended sql.NullInt64
	if err := r.Scan(&b.ID, &b.WindowID, &b.MachineID, &b.HostID, &b.AccountID, &b.GPUs, &start, &end, &price, &cost, &b.FeeBP, &deadline,
		&b.CancelFeeBP, &b.Status, &b.InstanceID, &b.Image, &cmd, &refund, &paid, &started, &ended, &b.Message, &b.Note, &b.ScheduleID, &created); err != nil {
		return nil, err
	}
	b.Start, b.End, b.CancelDeadline, b.CreatedAt = fromUS(start), fromUS(end), fromUS(deadline), fromUS(created)
	b.PriceGPU, b.Cost, b.Refund, b.Paid = suanli.Money(price), suanli.Money(cost), suanli.Money(refund), suanli.Money(paid)
	b.StartedAt, b.EndedAt = fromUSPtr(started), fromUSPtr(ended)
	if err := json.Unmarshal([]byte(cmd), &b.Cmd); err != nil {
		return nil, fmt.Errorf("booking %d: cmd: %w", b.ID, err)
	}
	return &b, nil
}

// Span is a number of units held from Start to End (End zero: open-ended).
type Span struct {
	Units      int
	Start, End time.Time
}

// PeakOverlap is the most units the spans hold at one moment within
// [from, to) (to zero: open-ended). Spans are half-open intervals.
func PeakOverlap(spans []Span, from, to time.Time) int {
	overlaps := func(s Span, a, b time.Time) bool {
		return (b.IsZero() || s.Start.Before(b)) && (s.End.IsZero() || s.End.After(a))
	}
	peak := 0
	// The peak is reached at the start of some span (or at from).
	points := []time.Time{from}
	for _, s := range spans {
		if s.Start.After(from) && (to.IsZero() || s.Start.Before(to)) {
			points = append(points, s.Start)
		}
	}
	for _, p := range points {
		n := 0
		for _, s := range spans {
			if !s.Start.After(p) && (s.End.IsZero() || s.End.After(p)) && overlaps(s, from, to) {
				n += s.Units
			}
		}
		peak = max(peak, n)
	}
	return peak
}

// CreateWindow publishes a window on a machine with total GPUs: the open
// windows on the machine may at no moment offer more GPUs than it has.
// w.ID and w.Status are set. ECONFLICT with the numbers when they would.
func (s *DB) CreateWindow(ctx context.Context, w *suanli.Window, total int, now time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error {
		if w.RequestKey != "" {
			// A retry of a request that published before its reply was
			// recorded (a crash): the window it made, not a second one.
			prior, err := scanWindow(tx.queryRow(ctx, `SELECT `+windowCols+` FROM windows WHERE host_id = ? AND request_key = ?`, w.HostID, w.RequestKey))
			if err == nil {
				*w = *prior
				return tx.fillFree(ctx, w)
			} else if !isNoRows(err) {
				return err
			}
		}
		others, err := tx.windows(ctx, `machine_id = ? AND status = ? AND end_us > ? AND start_us < ?`, w.MachineID, suanli.WindowOpen, us(w.Start), us(w.End))
		if err != nil {
			return err
		}
		var spans []Span
		for _, o := range others {
			spans = append(spans, Span{o.GPUs, o.Start, o.End})
		}
		if peak := PeakOverlap(spans, w.Start, w.End); peak+w.GPUs > total {
			return suanli.Errorf(suanli.ECONFLICT, "machine %d has %d GPUs and other windows already offer %d of them in that time: offer at most %d",
				w.MachineID, total, peak, max(total-peak, 0))
		}
		bids := 0
		if w.AcceptBids {
			bids = 1
		}
		w.Status, w.CreatedAt = suanli.WindowOpen, now
		id, err := tx.insert(ctx, `INSERT INTO windows (machine_id, host_id, gpus, start_us, end_us, price_gpu, accept_bids, min_bid, cancel_before_s,
			cancel_fee_bp, status, created_at, request_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			w.MachineID, w.HostID, w.GPUs, us(w.Start), us(w.End), int64(w.PriceGPU), bids, int64(w.MinBid), int64(w.CancelBefore/time.Second),
			w.CancelFeeBP, w.Status, us(now), w.RequestKey)
		w.ID, w.FreeGPUs = id, w.GPUs
		return err
	})
}

func (tx *Tx) windows(ctx context.Context, where string, args ...any) ([]*suanli.Window, error) {
	rows, err := tx.query(ctx, `SELECT `+windowCols+` FROM windows WHERE `+where+` ORDER BY start_us, id`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanWindow)
}

func (tx *Tx) bookings(ctx context.Context, where string, args ...any) ([]*suanli.Booking, error) {
	rows, err := tx.query(ctx, `SELECT `+bookingCols+` FROM bookings WHERE `+where+` ORDER BY start_us, id`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanBooking)
}

// live is the where clause of bookings that hold GPUs now or later.
const liveBookings = `status IN ('booked', 'running')`

// fillFree sets w.FreeGPUs: its GPUs less the peak of its live bookings.
func (tx *Tx) fillFree(ctx context.Context, w *suanli.Window) error {
	bs, err := tx.bookings(ctx, `window_id = ? AND `+liveBookings, w.ID)
	if err != nil {
		return err
	}
	var spans []Span
	for _, b := range bs {
		spans = append(spans, Span{b.GPUs, b.Start, b.End})
	}
	w.FreeGPUs = max(0, w.GPUs-PeakOverlap(spans, w.Start, w.End))
	return nil
}

// WindowFilter selects windows; zero fields mean "any".
type WindowFilter struct {
	MachineID int64
	HostID    int64
	Status    string
	EndAfter  time.Time // windows that end after this
}

// FindWindows lists windows by filter, earliest start first, each with its
// free GPUs.
func (s *DB) FindWindows(ctx context.Context, f WindowFilter) ([]*suanli.Window, error) {
	where, args := []string{"1 = 1"}, []any{}
	if f.MachineID != 0 {
		where, args = append(where, "machine_id = ?"), append(args, f.MachineID)
	}
	if f.HostID != 0 {
		where, args = append(where, "host_id = ?"), append(args, f.HostID)
	}
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, f.Status)
	}
	if !f.EndAfter.IsZero() {
		where, args = append(where, "end_us > ?"), append(args, us(f.EndAfter))
	}
	var out []*suanli.Window
	err := s.read(ctx, func(tx *Tx) error {
		var err error
		if out, err = tx.windows(ctx, strings.Join(where, " AND "), args...); err != nil {
			return err
		}
		for _, w := range out {
			if err := tx.fillFree(ctx, w); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// FindWindowByID returns a window with its free GPUs. ENOTFOUND.
func (s *DB) FindWindowByID(ctx context.Context, id int64) (*suanli.Window, error) {
	var w *suanli.Window
	err := s.read(ctx, func(tx *Tx) error {
		var err error
		w, err = scanWindow(tx.queryRow(ctx, `SELECT `+windowCols+` FROM windows WHERE id = ?`, id))
		if isNoRows(err) {
			return suanli.Errorf(suanli.ENOTFOUND, "window %d not found: `suanli windows search` lists open ones", id)
		} else if err != nil {
			return err
		}
		return tx.fillFree(ctx, w)
	})
	return w, err
}

// WithdrawWindow stops a window taking bookings; those made stand.
func (s *DB) WithdrawWindow(ctx context.Context, id int64) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE windows SET status = ? WHERE id = ?`), suanli.WindowWithdrawn, id)
	return err
}

// CreateBooking books part of a window in one transaction: the window must
// be open and cover the span, its GPUs not already booked at any moment of
// it, and the renter's balance must cover b.Cost, which moves to the
// renter's escrow (a hold). b.ID, b.Status, b.CreatedAt are set. ECONFLICT
// or EPAYMENTREQUIRED with the numbers.
func (s *DB) CreateBooking(ctx context.Context, b *suanli.Booking, now time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error {
		if b.RequestKey != "" {
			// A retry of a request that booked before its reply was
			// recorded (a crash): the booking it made, not a second one.
			prior, err := scanBooking(tx.queryRow(ctx, `SELECT `+bookingCols+` FROM bookings WHERE account_id = ? AND request_key = ?`, b.AccountID, b.RequestKey))
			if err == nil {
				*b = *prior
				return nil
			} else if !isNoRows(err) {
				return err
			}
		}
		w, err := scanWindow(tx.queryRow(ctx, `SELECT `+windowCols+` FROM windows WHERE id = ?`, b.WindowID))
		if isNoRows(err) {
			return suanli.Errorf(suanli.ENOTFOUND, "window %d not found: `suanli windows search` lists open ones", b.WindowID)
		} else if err != nil {
			return err
		}
		if w.Status != suanli.WindowOpen {
			return suanli.Errorf(suanli.ECONFLICT, "window %d is %s: search for another", w.ID, w.Status)
		}
		if b.Start.Before(w.Start) || b.End.After(w.End) {
			return suanli.Errorf(suanli.ECONFLICT, "window %d runs %s to %s: book inside it", w.ID, w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339))
		}
		if err := tx.fillFreeSpan(ctx, w, b); err != nil {
			return err
		}
		bal, err := tx.ledgerBalance(ctx, suanli.LedgerBalance(b.AccountID))
		if err != nil {
			return err
		}
		if bal < b.Cost {
			return suanli.Errorf(suanli.EPAYMENTREQUIRED, "balance %s does not cover this booking's %s (held in escrow until it runs): add credit first", bal, b.Cost)
		}
		cmd, err := json.Marshal(nonNil(b.Cmd))
		if err != nil {
			return err
		}
		b.MachineID, b.HostID, b.Status, b.CreatedAt = w.MachineID, w.HostID, suanli.BookingBooked, now
		b.CancelDeadline, b.CancelFeeBP = b.Start.Add(-w.CancelBefore), w.CancelFeeBP
		id, err := tx.insert(ctx, `INSERT INTO bookings (window_id, machine_id, host_id, account_id, gpus, start_us, end_us, price_gpu, cost, fee_bp,
			cancel_deadline, cancel_fee_bp, status, image, cmd, note, schedule_id, created_at, request_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			b.WindowID, b.MachineID, b.HostID, b.AccountID, b.GPUs, us(b.Start), us(b.End), int64(b.PriceGPU), int64(b.Cost), b.FeeBP,
			us(b.CancelDeadline), b.CancelFeeBP, b.Status, b.Image, string(cmd), b.Note, b.ScheduleID, us(now), b.RequestKey)
		if err != nil {
			return err
		}
		b.ID = id
		t := txn{Kind: KindBookingHold, AccountID: b.AccountID, From: b.Start, To: b.End, At: now,
			Quantity: fmt.Sprintf("%d GPUs × %s × %s/GPU-h", b.GPUs, b.End.Sub(b.Start), b.PriceGPU),
			Memo:     fmt.Sprintf("booking %d: %s held in escrow (window %d)", id, b.Cost, w.ID)}
		return tx.post(ctx, t, []suanli.Posting{
			{Account: suanli.LedgerBalance(b.AccountID), Amount: -b.Cost},
			{Account: suanli.LedgerEscrow(b.AccountID), Amount: b.Cost},
		})
	})
}

// fillFreeSpan checks that b's GPUs are free in window w for b's span.
func (tx *Tx) fillFreeSpan(ctx context.Context, w *suanli.Window, b *suanli.Booking) error {
	bs, err := tx.bookings(ctx, `window_id = ? AND `+liveBookings+` AND start_us < ? AND end_us > ?`, w.ID, us(b.End), us(b.Start))
	if err != nil {
		return err
	}
	var spans []Span
	for _, o := range bs {
		spans = append(spans, Span{o.GPUs, o.Start, o.End})
	}
	if peak := PeakOverlap(spans, b.Start, b.End); peak+b.GPUs > w.GPUs {
		return suanli.Errorf(suanli.ECONFLICT, "window %d has %d of its %d GPUs free from %s to %s, you asked for %d",
			w.ID, max(w.GPUs-peak, 0), w.GPUs, b.Start.Format(time.RFC3339), b.End.Format(time.RFC3339), b.GPUs)
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// FindBookingByID returns a booking. ENOTFOUND.
func (s *DB) FindBookingByID(ctx context.Context, id int64) (*suanli.Booking, error) {
	b, err := scanBooking(s.db.QueryRowContext(ctx, s.q(`SELECT `+bookingCols+` FROM bookings WHERE id = ?`), id))
	if isNoRows(err) {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "booking %d not found: `suanli bookings` lists yours", id)
	}
	return b, err
}

// BookingFilter selects bookings; zero fields mean "any".
type BookingFilter struct {
	AccountID  int64
	MachineID  int64
	WindowID   int64
	ScheduleID int64
	Live       bool      // booked or running only
	StartBy    time.Time // booked ones starting at or before this
	EndBy      time.Time // running ones ending at or before this
	EndAfter   time.Time
}

// FindBookings lists bookings by filter, earliest start first.
func (s *DB) FindBookings(ctx context.Context, f BookingFilter) ([]*suanli.Booking, error) {
	where, args := []string{"1 = 1"}, []any{}
	add := func(cond string, v any) { where, args = append(where, cond), append(args, v) }
	if f.AccountID != 0 {
		add("account_id = ?", f.AccountID)
	}
	if f.MachineID != 0 {
		add("machine_id = ?", f.MachineID)
	}
	if f.WindowID != 0 {
		add("window_id = ?", f.WindowID)
	}
	if f.ScheduleID != 0 {
		add("schedule_id = ?", f.ScheduleID)
	}
	if f.Live {
		where = append(where, liveBookings)
	}
	if !f.StartBy.IsZero() {
		add("status = 'booked' AND start_us <= ?", us(f.StartBy))
	}
	if !f.EndBy.IsZero() {
		add("status = 'running' AND end_us <= ?", us(f.EndBy))
	}
	if !f.EndAfter.IsZero() {
		add("end_us > ?", us(f.EndAfter))
	}
	var out []*suanli.Booking
	err := s.read(ctx, func(tx *Tx) error {
		var err error
		out, err = tx.bookings(ctx, strings.Join(where, " AND "), args...)
		return err
	})
	return out, err
}

// MarkBookingStarted records that a booking's instance was launched at at.
// ECONFLICT when the booking is no longer waiting to start.
func (s *DB) MarkBookingStarted(ctx context.Context, id, instanceID int64, at time.Time) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE bookings SET status = ?, instance_id = ?, started_at = ?, message = ? WHERE id = ? AND status = ?`),
		suanli.BookingRunning, instanceID, us(at), fmt.Sprintf("launched as instance %d", instanceID), id, suanli.BookingBooked)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return suanli.Errorf(suanli.ECONFLICT, "booking %d is no longer waiting to start", id)
	}
	return nil
}

// SettleBooking closes a booking in one transaction, splitting its escrow
// exactly: refund back to the renter's balance, fee (a cancel after the
// deadline) or the whole rest (a delivered booking) to the provider's
// earnings less the platform's share. status is the booking's new status;
// from lists the statuses it may be closed from. ECONFLICT when it is in
// none of them.
func (s *DB) SettleBooking(ctx context.Context, id int64, status string, refund suanli.Money, message string, now time.Time, from ...string) (*suanli.Booking, error) {
	var out *suanli.Booking
	err := s.withTx(ctx, func(tx *Tx) error {
		b, err := scanBooking(tx.queryRow(ctx, `SELECT `+bookingCols+` FROM bookings WHERE id = ?`, id))
		if isNoRows(err) {
			return suanli.Errorf(suanli.ENOTFOUND, "booking %d not found", id)
		} else if err != nil {
			return err
		}
		ok := false
		for _, f := range from {
			ok = ok || b.Status == f
		}
		if !ok {
			return suanli.Errorf(suanli.ECONFLICT, "booking %d is %s", id, b.Status)
		}
		if refund < 0 || refund > b.Cost {
			return fmt.Errorf("booking %d: refund %s outside 0..%s", id, refund, b.Cost)
		}
		paid := b.Cost - refund
		if refund > 0 {
			t := txn{Kind: KindBookingRefund, AccountID: b.AccountID, InstanceID: b.InstanceID, From: b.Start, To: b.End, At: now,
				Memo: fmt.Sprintf("booking %d: %s back from escrow (%s)", id, refund, status)}
			if err := tx.post(ctx, t, []suanli.Posting{
				{Account: suanli.LedgerEscrow(b.AccountID), Amount: -refund},
				{Account: suanli.LedgerBalance(b.AccountID), Amount: refund},
			}); err != nil {
				return err
			}
		}
		if paid > 0 {
			kind, memo := KindBookingPayout, fmt.Sprintf("booking %d: %d GPUs at the locked %s/GPU-h", id, b.GPUs, b.PriceGPU)
			if status == suanli.BookingCancelled {
				kind, memo = KindBookingFee, fmt.Sprintf("booking %d cancelled after its deadline %s: %s fee", id, b.CancelDeadline.Format(time.RFC3339), bp(b.CancelFeeBP))
			}
			fee := suanli.MulDiv(paid, b.FeeBP, 10_000)
			t := txn{Kind: kind, AccountID: b.AccountID, InstanceID: b.InstanceID, Amount: paid, From: b.Start, To: b.End, At: now,
				Quantity: fmt.Sprintf("%d GPUs × %s × %s/GPU-h", b.GPUs, b.End.Sub(b.Start), b.PriceGPU), Memo: memo}
			if err := tx.post(ctx, t, []suanli.Posting{
				{Account: suanli.LedgerEscrow(b.AccountID), Amount: -paid},
				{Account: suanli.LedgerEarnings(b.HostID), Amount: paid - fee},
				{Account: suanli.LedgerPlatformFees, Amount: fee},
			}); err != nil {
				return err
			}
		}
		b.Status, b.Refund, b.Paid, b.Message = status, refund, paid, message
		b.EndedAt = &now
		if _, err := tx.exec(ctx, `UPDATE bookings SET status = ?, refund = ?, paid = ?, ended_at = ?, message = ? WHERE id = ?`,
			b.Status, int64(refund), int64(paid), us(now), message, id); err != nil {
			return err
		}
		out = b
		return nil
	})
	return out, err
}
