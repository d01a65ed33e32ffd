package control

import (
	"context"

	"github.com/suanli/suanli"
)

// Balance returns the caller's balance, earnings, spend and burn rate.
func (s *Service) Balance(ctx context.Context) (*suanli.Balance, error) {
	p, err := principal(ctx, suanli.ScopeBillingRead)
	if err != nil {
		return nil, err
	}
	return s.balanceOf(ctx, p.AccountID)
}

func (s *Service) balanceOf(ctx context.Context, id int64) (*suanli.Balance, error) {
	b := &suanli.Balance{AccountID: id}
	var err error
	if b.Balance, err = s.Store.LedgerBalance(ctx, suanli.LedgerBalance(id)); err != nil {
		return nil, err
	}
	if b.Earnings, err = s.Store.LedgerBalance(ctx, suanli.LedgerEarnings(id)); err != nil {
		return nil, err
	}
	if b.BurnRate, err = s.Store.AccountBurn(ctx, id); err != nil {
		return nil, err
	}
	sum, err := s.Store.FindCharges(ctx, suanli.ChargeFilter{AccountID: &id, Limit: 1})
	if err != nil {
		return nil, err
	}
	b.Spent = sum.Total
	return b, nil
}

// FindCharges lists the caller's charges with totals.
func (s *Service) FindCharges(ctx context.Context, f suanli.ChargeFilter) (*suanli.ChargeSummary, error) {
	p, err := principal(ctx, suanli.ScopeBillingRead)
	if err != nil {
		return nil, err
	}
	if f.InstanceID != nil {
		if _, _, err := s.ownInstance(ctx, suanli.ScopeBillingRead, *f.InstanceID, false); err != nil {
			return nil, err
		}
	}
	f.AccountID = &p.AccountID
	return s.Store.FindCharges(ctx, f)
}

// Credit adds credit to an account. Operators only.
func (s *Service) Credit(ctx context.Context, accountID int64, amount suanli.Money, memo string) (*suanli.Balance, error) {
	p, err := operator(ctx, "grant credit")
	if err != nil {
		return nil, err
	}
	if amount == 0 {
		return nil, suanli.FieldErrorf("amount", "must not be zero")
	}
	if memo == "" {
		memo = "credit by operator"
	}
	if err := s.Store.Credit(ctx, accountID, amount, memo, s.now()); err != nil {
		return nil, err
	}
	s.Logger.Info("credit granted", "account_id", accountID, "amount", amount.String(), "by", p.AccountID)
	return s.balanceOf(ctx, accountID)
}
