package control

import (
	"context"

	"github.com/suanli/suanli"
)

// effectiveQuota is an account's quota: its override, else the default for
// its age; operators have none.
func (s *Service) effectiveQuota(ctx context.Context, p *suanli.Principal) (q suanli.Quota, isNew, unlimited bool, err error) {
	if p.Role == suanli.RoleOperator {
		return q, false, true, nil
	}
	a, err := s.Store.FindAccountByID(ctx, p.AccountID)
	if err != nil {
		return q, false, false, err
	}
	over, err := s.Store.AccountQuota(ctx, p.AccountID)
	if err != nil {
		return q, false, false, err
	}
	isNew = s.now().Sub(a.CreatedAt) < suanli.NewAccountPeriod
	q = suanli.AccountQuota
	if isNew {
		q = suanli.NewAccountQuota
	}
	if over.GPUs > 0 {
		q.GPUs = over.GPUs
	}
	if over.Instances > 0 {
		q.Instances = over.Instances
	}
	return q, isNew, false, nil
}

// checkQuota refuses a rental (or a start) of gpus more GPUs when the
// account would run more than its quota allows, with a message that says
// the limit, the use, and what to do.
func (s *Service) checkQuota(ctx context.Context, p *suanli.Principal, gpus int, except int64) error {
	return s.checkQuotaN(ctx, p, gpus, 1, except)
}

// checkQuotaN is checkQuota for n instances with gpus GPUs in all (a fleet).
func (s *Service) checkQuotaN(ctx context.Context, p *suanli.Principal, gpus, n int, except int64) error {
	q, isNew, unlimited, err := s.effectiveQuota(ctx, p)
	if err != nil || unlimited {
		return err
	}
	live := true
	ins, _, err := s.Store.FindInstances(ctx, suanli.InstanceFilter{AccountID: &p.AccountID, Live: &live, Limit: 1 << 30}, s.now())
	if err != nil {
		return err
	}
	usedGPUs, usedInstances := 0, 0
	for _, in := range ins {
		if in.ID == except || !in.HoldsGPUs() {
			continue
		}
		usedGPUs += in.GPUCount
		usedInstances++
	}
	who := "this account"
	if isNew {
		who = "new accounts (first 7 days)"
	}
	if usedInstances+n > q.Instances {
		if n > 1 {
			return suanli.Errorf(suanli.EFORBIDDEN, "quota: %s may run %d instances at once; you run %d and asked for %d more: ask for fewer, or ask the operator to raise it",
				who, q.Instances, usedInstances, n)
		}
		return suanli.Errorf(suanli.EFORBIDDEN, "quota: %s may run %d instances at once and you run %d: stop or destroy one, or ask the operator to raise it",
			who, q.Instances, usedInstances)
	}
	if usedGPUs+gpus > q.GPUs {
		return suanli.Errorf(suanli.EFORBIDDEN, "quota: %s may run %d GPUs at once; you run %d and asked for %d more: stop an instance, or ask the operator to raise it (`suanli admin quota`)",
			who, q.GPUs, usedGPUs, gpus)
	}
	return nil
}

// SetQuota overrides an account's quota. Operators only.
func (s *Service) SetQuota(ctx context.Context, accountID int64, q suanli.Quota) error {
	p, err := principal(ctx, suanli.ScopeAdmin)
	if err != nil {
		return err
	}
	if p.Role != suanli.RoleOperator {
		return suanli.Errorf(suanli.EFORBIDDEN, "only a marketplace operator can set quotas")
	}
	if q.GPUs < 0 || q.Instances < 0 {
		return suanli.FieldErrorf("gpus", "quotas must not be negative (0 means the default)")
	}
	if err := s.Store.SetAccountQuota(ctx, accountID, q); err != nil {
		return err
	}
	s.Logger.Info("quota set", "account_id", accountID, "gpus", q.GPUs, "instances", q.Instances, "by", p.AccountID)
	return nil
}

func gpuCountFor(m *suanli.Machine, c suanli.InstanceCreate, used []int) int {
	if !m.IsGPU() {
		return 0
	}
	if c.GPUCount > 0 {
		return c.GPUCount
	}
	return len(m.Hardware.GPUs) - len(used)
}
