package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/suanli/suanli"
)

const reservationCols = `id, instance_id, account_id, host_id, days, start_us, end_us, hourly_price, list_price, discount_bp, prepaid,
	cancel_fee_bp, fee_bp, status, refund, ended_at`

func scanReservation(r scanner) (*suanli.Reservation, error) {
	var v suanli.Reservation
	var start, end, hourly, list, prepaid, refund int64
	var ended sql.NullInt64
	if err := r.Scan(&v.ID, &v.InstanceID, &v.AccountID, &v.HostID, &v.Days, &start, &end, &hourly, &list, &v.DiscountBP, &prepaid,
		&v.CancelFeeBP, &v.FeeBP, &v.Status, &refund, &ended); err != nil {
		return nil, err
	}
	v.Start, v.End = fromUS(start), fromUS(end)
	v.HourlyPrice, v.ListPrice, v.Prepaid, v.Refund = suanli.Money(hourly), suanli.Money(list), suanli.Money(prepaid), suanli.Money(refund)
	v.EndedAt = fromUSPtr(ended)
	return &v, nil
}

// Ledger transaction kinds of reservations.
const (
	KindReservation       = "reservation"        // the prepayment
	KindReservationRefund = "reservation_refund" // an early cancel's refund (a negative charge)
)

// CreateReservation prepays a reservation of an on-demand instance in one
// transaction: the renter's balance must cover r.Prepaid; the ledger moves
// it to the host's earnings (less the platform fee r.FeeBP); the compute
// meter is settled at the on-demand rate up to r.Start and then runs at
// zero until r.End; the instance becomes reserved. r.ID is set. ECONFLICT
// when the instance is not a live on-demand rental or already has an active
// reservation, EPAYMENTREQUIRED with the numbers.
func (s *DB) CreateReservation(ctx context.Context, r *suanli.Reservation, now time.Time) (*suanli.Instance, error) {
	var out *suanli.Instance
	err := s.withTx(ctx, func(tx *Tx) error {
		in, err := tx.instance(ctx, r.InstanceID)
		if err != nil {
			return err
		}
		if in.Status == suanli.StatusDestroyed {
			return suanli.Errorf(suanli.ECONFLICT, "instance %d is destroyed", in.ID)
		}
		if in.RentalType != suanli.RentalOnDemand {
			return suanli.Errorf(suanli.ECONFLICT, "instance %d is %s: only an on-demand rental can be reserved", in.ID, in.RentalType)
		}
		if in.Rates.ComputePerHour != r.HourlyPrice {
			return suanli.Errorf(suanli.ECONFLICT, "instance %d changed while reserving: try again", in.ID)
		}
		bal, err := tx.ledgerBalance(ctx, suanli.LedgerBalance(in.AccountID))
		if err != nil {
			return err
		}
		if bal < r.Prepaid {
			return suanli.Errorf(suanli.EPAYMENTREQUIRED, "balance %s does not cover the prepayment of %s for %d days: add credit first", bal, r.Prepaid, r.Days)
		}
		r.AccountID, r.HostID = in.AccountID, in.HostID
		id, err := tx.insert(ctx, `INSERT INTO reservations (instance_id, account_id, host_id, days, start_us, end_us, hourly_price, list_price,
			discount_bp, prepaid, cancel_fee_bp, fee_bp, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.InstanceID, r.AccountID, r.HostID, r.Days, us(r.Start), us(r.End), int64(r.HourlyPrice), int64(r.ListPrice), r.DiscountBP,
			int64(r.Prepaid), r.CancelFeeBP, r.FeeBP, r.Status)
		if err != nil {
			return err
		}
		r.ID = id
		t := txn{Kind: KindReservation, AccountID: in.AccountID, InstanceID: in.ID, Amount: r.Prepaid, From: r.Start, To: r.End,
			Quantity: fmt.Sprintf("%d days × 24 h × %s/h, %s off", r.Days, r.HourlyPrice, bp(r.DiscountBP)),
			Memo:     fmt.Sprintf("reservation %d, list %s", id, r.ListPrice), At: now}
		if err := tx.post(ctx, t, chargePostings(in.AccountID, in.HostID, r.Prepaid, r.FeeBP)); err != nil {
			return err
		}
		out, err = tx.changeRate(ctx, in.ID, r.Start, now, func(i *suanli.Instance) error {
			end := r.End
			i.RentalType, i.ReservedUntil, i.Rates.ComputePerHour = suanli.RentalReserved, &end, 0
			return nil
		})
		return err
	})
	return out, err
}

func bp(v int64) string {
	if v%100 == 0 {
		return fmt.Sprintf("%d%%", v/100)
	}
	return fmt.Sprintf("%d.%02d%%", v/100, v%100)
}

// ActiveReservation returns an instance's active reservation. ENOTFOUND.
func (s *DB) ActiveReservation(ctx context.Context, instanceID int64) (*suanli.Reservation, error) {
	r, err := scanReservation(s.db.QueryRowContext(ctx, s.q(`SELECT `+reservationCols+` FROM reservations WHERE instance_id = ? AND status = ?`),
		instanceID, suanli.ReservationActive))
	if isNoRows(err) {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "instance %d has no active reservation", instanceID)
	}
	return r, err
}

// EndReservation ends an instance's active reservation at at, in one
// transaction. With cancel (an early end by the renter) the refund that
// suanli.Reservation.RefundAt gives is posted back from the host's earnings
// and the platform's fee in proportion; without, the reservation simply
// ran out. Either way the compute meter returns to the on-demand rate from
// at on and the instance to on-demand. ECONFLICT when none is active.
func (s *DB) EndReservation(ctx context.Context, instanceID int64, at time.Time, cancel bool, now time.Time) (*suanli.Reservation, error) {
	var out *suanli.Reservation
	err := s.withTx(ctx, func(tx *Tx) error {
		r, err := scanReservation(tx.queryRow(ctx, `SELECT `+reservationCols+` FROM reservations WHERE instance_id = ? AND status = ?`,
			instanceID, suanli.ReservationActive))
		if isNoRows(err) {
			return suanli.Errorf(suanli.ECONFLICT, "instance %d has no active reservation", instanceID)
		} else if err != nil {
			return err
		}
		r.Status = suanli.ReservationEnded
		if cancel {
			r.Status = suanli.ReservationCancelled
			rf := r.RefundAt(at)
			r.Refund = rf.Refund
			if rf.Refund > 0 {
				fee := suanli.MulDiv(rf.Refund, r.FeeBP, 10_000)
				t := txn{Kind: KindReservationRefund, AccountID: r.AccountID, InstanceID: instanceID, Amount: -rf.Refund, From: at, To: r.End,
					Quantity: fmt.Sprintf("unused %s − discount received %s − host fee %s", rf.Unused, rf.DiscountReceived, rf.Fee),
					Memo:     fmt.Sprintf("reservation %d cancelled after %s", r.ID, rf.Used.Round(time.Second)), At: now}
				if err := tx.post(ctx, t, []suanli.Posting{
					{Account: suanli.LedgerBalance(r.AccountID), Amount: rf.Refund},
					{Account: suanli.LedgerEarnings(r.HostID), Amount: -(rf.Refund - fee)},
					{Account: suanli.LedgerPlatformFees, Amount: -fee},
				}); err != nil {
					return err
				}
			}
		}
		t := at
		r.EndedAt = &t
		if _, err := tx.exec(ctx, `UPDATE reservations SET status = ?, refund = ?, ended_at = ? WHERE id = ?`,
			r.Status, int64(r.Refund), us(at), r.ID); err != nil {
			return err
		}
		_, err = tx.changeRate(ctx, instanceID, at, now, func(i *suanli.Instance) error {
			i.ReservedUntil, i.Rates.ComputePerHour = nil, r.HourlyPrice
			if i.RentalType == suanli.RentalReserved {
				i.RentalType = suanli.RentalOnDemand
			}
			return nil
		})
		out = r
		return err
	})
	return out, err
}

// DueReservations lists active reservations whose end is at or before now.
func (s *DB) DueReservations(ctx context.Context, now time.Time) ([]*suanli.Reservation, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+reservationCols+` FROM reservations WHERE status = ? AND end_us <= ? ORDER BY end_us`),
		suanli.ReservationActive, us(now))
	if err != nil {
		return nil, err
	}
	return collect(rows, scanReservation)
}
