package control

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
	"github.com/suanli/suanli/auth"
)

// ownMachine loads a machine the caller owns (any, for an operator).
func (s *Service) ownMachine(ctx context.Context, scope string, id int64) (*suanli.Principal, *suanli.Machine, error) {
	p, err := principal(ctx, scope)
	if err != nil {
		return nil, nil, err
	}
	m, err := s.Store.FindMachineByID(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	s.withBeats(m)
	if m.OwnerID != p.AccountID && p.Role != suanli.RoleOperator {
		return nil, nil, suanli.Errorf(suanli.ENOTFOUND, "machine %d not found", id)
	}
	return p, m, nil
}

// FindMachines lists the caller's machines (all of them for an operator).
func (s *Service) FindMachines(ctx context.Context, f suanli.MachineFilter) ([]*suanli.Machine, int, error) {
	p, err := principal(ctx, suanli.ScopeHostRead)
	if err != nil {
		return nil, 0, err
	}
	if p.Role != suanli.RoleOperator {
		f.OwnerID = &p.AccountID
	}
	ms, n, err := s.Store.FindMachines(ctx, f)
	s.withBeats(ms...)
	return ms, n, err
}

// FindMachineByID returns one of the caller's machines.
func (s *Service) FindMachineByID(ctx context.Context, id int64) (*suanli.Machine, error) {
	_, m, err := s.ownMachine(ctx, suanli.ScopeHostRead, id)
	return m, err
}

func nonNegative(field string, v *suanli.Money) error {
	if v != nil && *v < 0 {
		return suanli.FieldErrorf(field, "%s is negative: prices are zero or more", *v)
	}
	return nil
}

// ListMachine applies a listing update and puts the machine on the market.
func (s *Service) ListMachine(ctx context.Context, id int64, u suanli.ListingUpdate) (*suanli.Machine, error) {
	_, m, err := s.ownMachine(ctx, suanli.ScopeHostWrite, id)
	if err != nil {
		return nil, err
	}
	for field, v := range map[string]*suanli.Money{"price_gpu": u.PriceGPU, "price_cpu": u.PriceCPU, "price_ram": u.PriceRAM,
		"price_disk": u.PriceDisk, "price_inet_up": u.PriceInetUp, "price_inet_down": u.PriceInetDown, "min_bid": u.MinBid} {
		if err := nonNegative(field, v); err != nil {
			return nil, err
		}
	}
	l := m.Listing
	set := func(dst *suanli.Money, v *suanli.Money) {
		if v != nil {
			*dst = *v
		}
	}
	set(&l.PriceGPU, u.PriceGPU)
	set(&l.PriceCPU, u.PriceCPU)
	set(&l.PriceRAM, u.PriceRAM)
	set(&l.PriceDisk, u.PriceDisk)
	set(&l.PriceInetUp, u.PriceInetUp)
	set(&l.PriceInetDown, u.PriceInetDown)
	set(&l.MinBid, u.MinBid)
	now := s.now()
	if u.EndDate != nil {
		if !u.EndDate.After(now) {
			return nil, suanli.FieldErrorf("end_date", "%s is in the past: give a future date", u.EndDate.Format(time.RFC3339))
		}
		l.EndDate = u.EndDate
	}
	if u.PreemptGraceS != nil {
		if *u.PreemptGraceS < 0 || *u.PreemptGraceS > 120 {
			return nil, suanli.FieldErrorf("preempt_grace_s", "%d is outside 0..120 seconds", *u.PreemptGraceS)
		}
		l.PreemptGraceS = *u.PreemptGraceS
	}
	if l.PreemptGraceS == 0 {
		l.PreemptGraceS = 30
	}
	if err := applyReserveTerms(&l, u); err != nil {
		return nil, err
	}
	country, region := m.Country, m.Region
	if u.Country != nil {
		country = *u.Country
	}
	if u.Region != nil {
		region = *u.Region
	}
	if err := applyGreenDiscount(&l, u, m.ID, country); err != nil {
		return nil, err
	}
	if m.IsGPU() && l.PriceGPU <= 0 {
		return nil, suanli.FieldErrorf("price_gpu", "a GPU machine needs a price per GPU-hour above zero (--price-gpu 0.40)")
	}
	if !m.IsGPU() && l.PriceCPU <= 0 {
		return nil, suanli.FieldErrorf("price_cpu", "a CPU-only machine needs a price per core-hour above zero (--price-cpu 0.02)")
	}
	l.Listed = true
	out, err := s.Store.UpdateListing(ctx, id, l, country, region)
	if err != nil {
		return nil, err
	}
	if err := s.putOffer(ctx, out); err != nil {
		return nil, err
	}
	s.Logger.Info("machine listed", "machine_id", id, "price_gpu", l.PriceGPU.String(), "price_cpu", l.PriceCPU.String())
	return out, nil
}

// UnlistMachine takes a machine off the market; running rentals continue.
func (s *Service) UnlistMachine(ctx context.Context, id int64) (*suanli.Machine, error) {
	_, m, err := s.ownMachine(ctx, suanli.ScopeHostWrite, id)
	if err != nil {
		return nil, err
	}
	l := m.Listing
	l.Listed = false
	out, err := s.Store.UpdateListing(ctx, id, l, m.Country, m.Region)
	if err != nil {
		return nil, err
	}
	s.Index.Delete(id)
	s.Logger.Info("machine unlisted", "machine_id", id)
	return out, nil
}

// CreateJoinToken returns a one-time token for registering a machine owned
// by the caller; ttl 0 means one day.
func (s *Service) CreateJoinToken(ctx context.Context, ttl time.Duration) (*suanli.JoinToken, error) {
	p, err := principal(ctx, suanli.ScopeHostWrite)
	if err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	if ttl > 7*24*time.Hour {
		return nil, suanli.FieldErrorf("ttl", "at most 7 days")
	}
	tok := auth.NewSecret(auth.PrefixJoin)
	exp := s.now().Add(ttl)
	if err := s.Store.CreateJoinToken(ctx, auth.Hash(tok), p.AccountID, exp); err != nil {
		return nil, err
	}
	return &suanli.JoinToken{Token: tok, AccountID: p.AccountID, ExpiresAt: exp}, nil
}

// applyGreenDiscount checks and applies a listing update's green discount:
// 0 to 50%, and none on a machine whose grid (by country) is not green,
// since a "green" discount there would say what is not so. A listing
// whose grid stops being green keeps the figure, unapplied
// (suanli.Listing.ForRenters), and must clear it before its next change.
func applyGreenDiscount(l *suanli.Listing, u suanli.ListingUpdate, id int64, country string) error {
	if u.GreenDiscountBP != nil {
		if v := *u.GreenDiscountBP; v < 0 || v > suanli.MaxGreenDiscountBP {
			return suanli.FieldErrorf("green_discount_bp", "%d: give 0 to %d bp (50%%)", v, suanli.MaxGreenDiscountBP)
		}
		l.GreenDiscountBP = *u.GreenDiscountBP
	}
	if l.GreenDiscountBP == 0 || greenGrid(&suanli.Machine{Country: country}) {
		return nil
	}
	g, ok := advisor.CarbonIntensity(country)
	why := "its country is not set, so its grid is unknown (--country NO)"
	if ok {
		why = fmt.Sprintf("its grid (%s) emits %.0f gCO2/kWh, above the %.0f that counts as green", g.Country, g.GPerKWh, advisor.GreenThreshold)
	} else if strings.TrimSpace(country) != "" {
		why = fmt.Sprintf("the carbon intensity of %q's grid is unknown", country)
	}
	return suanli.FieldErrorf("green_discount_bp", "machine %d: a green discount needs a green grid, and %s: correct --country, or drop the discount (--green-discount 0)", id, why)
}

// applyReserveTerms checks and applies a listing update's reservation
// terms: steps of 1 to 366 days at 0 to 90% off, a cap, a cancel fee.
func applyReserveTerms(l *suanli.Listing, u suanli.ListingUpdate) error {
	if u.ReserveDiscounts != nil {
		steps := *u.ReserveDiscounts
		for _, d := range steps {
			if d.MinDays < 1 || d.MinDays > suanli.MaxReserveDays {
				return suanli.FieldErrorf("reserve_discounts", "%d days: a step is 1 to %d days", d.MinDays, suanli.MaxReserveDays)
			}
			if d.DiscountBP < 0 || d.DiscountBP > suanli.MaxReserveDiscountBP {
				return suanli.FieldErrorf("reserve_discounts", "%d days at %d bp: a discount is 0 to %d bp (90%%)", d.MinDays, d.DiscountBP, suanli.MaxReserveDiscountBP)
			}
		}
		l.ReserveDiscounts = steps
	}
	if u.ReserveMaxDiscountBP != nil {
		if v := *u.ReserveMaxDiscountBP; v < 0 || v > suanli.MaxReserveDiscountBP {
			return suanli.FieldErrorf("reserve_max_discount_bp", "%d: give 0 to %d bp (90%%)", v, suanli.MaxReserveDiscountBP)
		}
		l.ReserveMaxDiscountBP = *u.ReserveMaxDiscountBP
	}
	if u.ReserveCancelFeeBP != nil {
		if v := *u.ReserveCancelFeeBP; v < 0 || v > 10_000 {
			return suanli.FieldErrorf("reserve_cancel_fee_bp", "%d: give 0 to 10000 bp (100%%)", v)
		}
		l.ReserveCancelFeeBP = *u.ReserveCancelFeeBP
	}
	return nil
}
