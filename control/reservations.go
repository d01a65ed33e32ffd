package control

import (
	"context"
	"time"

	"github.com/suanli/suanli"
)

// ReserveInstance prepays days of an on-demand instance's compute at its
// locked rate, less the host's discount for that commitment (the longest
// step of the listing's schedule that fits, capped by the host's maximum).
// The prepayment goes through the ledger at once; compute is not metered
// again until the reservation ends (it then returns to the on-demand rate).
// Reserved instances are never preempted.
func (s *Service) ReserveInstance(ctx context.Context, id int64, days int) (*suanli.Reservation, error) {
	_, in, err := s.ownInstance(ctx, suanli.ScopeInstanceWrite, id, false)
	if err != nil {
		return nil, err
	}
	if days <= 0 || days > suanli.MaxReserveDays {
		return nil, suanli.FieldErrorf("days", "%d: reserve for 1 to %d days", days, suanli.MaxReserveDays)
	}
	switch {
	case in.Status == suanli.StatusDestroyed:
		return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d is destroyed", id)
	case in.RentalType == suanli.RentalReserved:
		return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d is already reserved until %s: cancel that first (`suanli reserve cancel %d`)",
			id, in.ReservedUntil.Format(time.DateOnly), id)
	case in.RentalType != suanli.RentalOnDemand:
		return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d is %s: a reservation prepays an on-demand rental; create one on-demand and reserve it", id, in.RentalType)
	}
	m, err := s.Store.FindMachineByID(ctx, in.MachineID)
	if err != nil {
		return nil, err
	}
	l := m.Listing
	discount, ok := l.ReserveDiscountBP(days)
	if !ok {
		if len(l.ReserveDiscounts) == 0 {
			return nil, suanli.Errorf(suanli.ECONFLICT, "offer %d takes no reservations: its host has set no discount schedule", m.ID)
		}
		shortest := l.ReserveDiscounts[0].MinDays
		for _, d := range l.ReserveDiscounts {
			shortest = min(shortest, d.MinDays)
		}
		return nil, suanli.FieldErrorf("days", "%d: offer %d takes reservations of at least %d days", days, m.ID, shortest)
	}
	r := suanli.NewReservation(in.Rates.ComputePerHour, days, discount, s.now())
	r.InstanceID, r.CancelFeeBP, r.FeeBP = in.ID, l.ReserveCancelFeeBP, in.Rates.FeeBasisPoints
	if _, err := s.Store.CreateReservation(ctx, &r, s.now()); err != nil {
		return nil, err
	}
	s.Logger.Info("instance reserved", "instance_id", id, "days", days, "discount_bp", discount, "prepaid", r.Prepaid.String())
	return &r, nil
}

// CancelReservation ends an instance's reservation early: the refund is the
// unused part of the prepayment minus the discount already received and the
// host's cancellation fee (suanli.Reservation.RefundAt), posted back through
// the ledger; the instance continues on-demand at its locked rate.
func (s *Service) CancelReservation(ctx context.Context, id int64) (*suanli.Reservation, error) {
	if _, _, err := s.ownInstance(ctx, suanli.ScopeInstanceWrite, id, false); err != nil {
		return nil, err
	}
	now := s.now()
	r, err := s.Store.EndReservation(ctx, id, now, true, now)
	if err != nil {
		return nil, err
	}
	s.Logger.Info("reservation cancelled", "instance_id", id, "reservation_id", r.ID, "refund", r.Refund.String())
	return r, nil
}

// EndReservations ends the reservations that ran out: their instances go
// back to on-demand billing from each reservation's end.
func (s *Service) EndReservations(ctx context.Context) error {
	now := s.now()
	due, err := s.Store.DueReservations(ctx, now)
	if err != nil {
		return err
	}
	for _, r := range due {
		if _, err := s.Store.EndReservation(ctx, r.InstanceID, r.End, false, now); err != nil && suanli.ErrorCode(err) != suanli.ECONFLICT {
			return err
		}
		s.Logger.Info("reservation ended", "instance_id", r.InstanceID, "reservation_id", r.ID)
	}
	return nil
}
