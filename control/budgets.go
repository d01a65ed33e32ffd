package control

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// budgetMatches reports whether an instance's spend counts against a budget's scope.
func budgetMatches(scope string, project string, tags map[string]string) bool {
	switch {
	case scope == "account":
		return true
	case strings.HasPrefix(scope, "project:"):
		return project == strings.TrimPrefix(scope, "project:")
	case strings.HasPrefix(scope, "tag:"):
		k, v, _ := strings.Cut(strings.TrimPrefix(scope, "tag:"), "=")
		return tags[k] == v
	}
	return false
}

func validScope(scope string) error {
	switch {
	case scope == "account":
	case strings.HasPrefix(scope, "project:") && len(scope) > len("project:"):
	case strings.HasPrefix(scope, "tag:") && strings.Contains(scope, "="):
	default:
		return suanli.FieldErrorf("scope", "%q: use account, project:NAME or tag:KEY=VALUE", scope)
	}
	return nil
}

// validateCostAttribution checks the project and cost tags of an instance
// or a volume: what budget scopes and cost reports group by.
func validateCostAttribution(project string, tags map[string]string) error {
	if len(project) > 100 || strings.ContainsAny(project, ":= ") {
		return suanli.FieldErrorf("project", "%q: up to 100 characters, no spaces, ':' or '='", project)
	}
	for k, v := range tags {
		if k == "" || len(k) > 64 || len(v) > 256 || strings.ContainsAny(k, "=: ") {
			return suanli.FieldErrorf("tags", "%q=%q: keys are 1-64 characters without '=', ':' or spaces; values up to 256", k, v)
		}
	}
	if len(tags) > 50 {
		return suanli.FieldErrorf("tags", "at most 50 tags")
	}
	return nil
}

// period returns the budget's current period.
func period(b *suanli.Budget, now time.Time) (time.Time, time.Time) {
	if b.Period == "custom" && b.Start != nil && b.End != nil {
		return *b.Start, *b.End
	}
	now = now.UTC()
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 1, 0)
}

// SetBudget creates or replaces one of the caller's budgets (by name).
func (s *Service) SetBudget(ctx context.Context, b suanli.Budget) (*suanli.Budget, error) {
	p, err := principal(ctx, suanli.ScopeBillingRead)
	if err != nil {
		return nil, err
	}
	if !p.Can(suanli.ScopeInstanceWrite) {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "setting a budget needs the instance:write scope")
	}
	b.AccountID, b.CreatedAt = p.AccountID, s.now()
	if b.WebhookSecret != "" {
		b.WebhookSecret = s.sealText(b.WebhookSecret, webhookPurpose(p.AccountID))
	}
	if b.Scope == "" {
		b.Scope = "account"
	}
	if b.Name == "" {
		b.Name = b.Scope
	}
	if err := validScope(b.Scope); err != nil {
		return nil, err
	}
	if b.Amount <= 0 {
		return nil, suanli.FieldErrorf("amount", "give a positive amount, e.g. 50 for $50")
	}
	switch b.Period {
	case "", "monthly":
		b.Period, b.Start, b.End = "monthly", nil, nil
	case "custom":
		if b.Start == nil || b.End == nil || !b.End.After(*b.Start) {
			return nil, suanli.FieldErrorf("period", "a custom period needs start and end, end after start")
		}
	default:
		return nil, suanli.FieldErrorf("period", "%q: use monthly or custom", b.Period)
	}
	if len(b.Thresholds) == 0 {
		b.Thresholds = []int{50, 80, 100}
	}
	for _, t := range b.Thresholds {
		if t <= 0 || t > 1000 {
			return nil, suanli.FieldErrorf("thresholds", "%d%% is not a threshold: give percentages like 50,80,100", t)
		}
	}
	slices.Sort(b.Thresholds)
	switch b.Action {
	case "":
		b.Action = suanli.BudgetAlert
	case suanli.BudgetAlert, suanli.BudgetBlock, suanli.BudgetStop:
	default:
		return nil, suanli.FieldErrorf("action", "%q: use alert, block or stop", b.Action)
	}
	if b.WebhookURL != "" {
		u, err := url.Parse(b.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, suanli.FieldErrorf("webhook_url", "%q is not an http(s) URL", b.WebhookURL)
		}
	}
	if err := s.Store.PutBudget(ctx, &b); err != nil {
		return nil, err
	}
	s.Logger.Info("budget set", "account_id", p.AccountID, "budget", b.Name, "amount", b.Amount.String(), "action", b.Action)
	bs, err := s.budgetsWithSpend(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	for _, x := range bs {
		if x.ID == b.ID {
			return x, nil
		}
	}
	return nil, suanli.Errorf(suanli.EINTERNAL, "budget vanished")
}

// FindBudgets lists the caller's budgets with spend, percent and forecast.
func (s *Service) FindBudgets(ctx context.Context) ([]*suanli.Budget, error) {
	p, err := principal(ctx, suanli.ScopeBillingRead)
	if err != nil {
		return nil, err
	}
	return s.budgetsWithSpend(ctx, p.AccountID)
}

// DeleteBudget removes one of the caller's budgets.
func (s *Service) DeleteBudget(ctx context.Context, name string) error {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return err
	}
	return s.Store.DeleteBudget(ctx, p.AccountID, name)
}

// FindAlerts lists the caller's newest alerts.
func (s *Service) FindAlerts(ctx context.Context, limit int) ([]*suanli.Alert, error) {
	p, err := principal(ctx, suanli.ScopeBillingRead)
	if err != nil {
		return nil, err
	}
	return s.Store.FindAlerts(ctx, p.AccountID, limit)
}

// budgetsWithSpend reads an account's budgets and fills spend, percent and
// forecast. Secrets are cleared.
func (s *Service) budgetsWithSpend(ctx context.Context, accountID int64) ([]*suanli.Budget, error) {
	bs, err := s.Store.FindBudgets(ctx, accountID)
	if err != nil {
		return nil, err
	}
	if err := s.fillSpend(ctx, accountID, bs); err != nil {
		return nil, err
	}
	for _, b := range bs {
		b.WebhookSecret = ""
	}
	if bs == nil {
		bs = []*suanli.Budget{}
	}
	return bs, nil
}

// fillSpend computes each budget's spend in its period: settled charges
// plus what live instances and volumes accrued since their last
// settlement, and a forecast at the current burn rate.
func (s *Service) fillSpend(ctx context.Context, accountID int64, bs []*suanli.Budget) error {
	if len(bs) == 0 {
		return nil
	}
	now := s.now()
	live := true
	ins, _, err := s.Store.FindInstances(ctx, suanli.InstanceFilter{AccountID: &accountID, Live: &live, Limit: 1 << 30}, now)
	if err != nil {
		return err
	}
	vols, err := s.Store.FindVolumes(ctx, accountID, 0, false, now)
	if err != nil {
		return err
	}
	// A live volume's accrual (its meter is filed under the negated volume
	// id) and burn, computed once for every budget.
	volAccrued := make([]suanli.Money, len(vols))
	for i, v := range vols {
		settled, err := s.Store.InstanceSettled(ctx, -v.ID)
		if err != nil {
			return err
		}
		volAccrued[i] = v.CostSoFar - settled
	}
	for _, b := range bs {
		from, to := period(b, now)
		b.PeriodStart, b.PeriodEnd = from, to
		rows, err := s.Store.ChargeRows(ctx, accountID, from, to)
		if err != nil {
			return err
		}
		b.Spent = 0
		for _, r := range rows {
			if budgetMatches(b.Scope, r.Project, r.Tags) {
				b.Spent += r.Amount
			}
		}
		var burn suanli.Money
		if now.Before(to) && !now.Before(from) {
			for _, in := range ins {
				if !budgetMatches(b.Scope, in.Project, in.Tags) {
					continue
				}
				settled, err := s.Store.InstanceSettled(ctx, in.ID)
				if err != nil {
					return err
				}
				b.Spent += in.CostSoFar - settled
				burn += in.BurnRate
			}
			for i, v := range vols {
				if budgetMatches(b.Scope, v.Project, v.Tags) {
					b.Spent += volAccrued[i]
					burn += suanli.MulDiv(v.Rate*suanli.Money(v.SizeGB), suanli.MicrosPerHour, suanli.MicrosPerMonth)
				}
			}
		}
		b.Forecast = b.Spent
		if now.Before(to) {
			b.Forecast += suanli.MulDiv(burn, to.Sub(now).Microseconds(), suanli.MicrosPerHour)
		}
		b.Percent = int(suanli.MulDiv(b.Spent, 100, int64(max(b.Amount, 1))))
	}
	return nil
}

// checkBudgetsForCreate refuses a new rental when a budget with action
// block or stop covering it is spent.
func (s *Service) checkBudgetsForCreate(ctx context.Context, accountID int64, project string, tags map[string]string) error {
	bs, err := s.Store.FindBudgets(ctx, accountID)
	if err != nil {
		return err
	}
	var hard []*suanli.Budget
	for _, b := range bs {
		if b.Action != suanli.BudgetAlert && budgetMatches(b.Scope, project, tags) {
			hard = append(hard, b)
		}
	}
	if err := s.fillSpend(ctx, accountID, hard); err != nil {
		return err
	}
	for _, b := range hard {
		if b.Spent >= b.Amount {
			return suanli.Errorf(suanli.EPAYMENTREQUIRED, "budget %q (%s of %s, scope %s) is spent: new rentals are blocked until %s; raise it with `suanli budget set %s --amount …`",
				b.Name, b.Spent, b.Amount, b.Scope, b.PeriodEnd.Format(time.DateOnly), b.Name)
		}
	}
	return nil
}

// CheckBudgets fires budget thresholds (once per period each, to the CLI
// and the webhook), applies the 100% action, warns on low balances and
// stops the instances of accounts whose balance stayed at zero past the grace.
func (s *Service) CheckBudgets(ctx context.Context) error {
	bs, err := s.Store.FindBudgets(ctx, 0)
	if err != nil {
		return err
	}
	byAccount := map[int64][]*suanli.Budget{}
	for _, b := range bs {
		byAccount[b.AccountID] = append(byAccount[b.AccountID], b)
	}
	for account, list := range byAccount {
		if err := s.fillSpend(ctx, account, list); err != nil {
			return err
		}
		for _, b := range list {
			key := b.PeriodStart.Format(time.RFC3339)
			for _, th := range b.Thresholds {
				if b.Percent < th {
					continue
				}
				msg := fmt.Sprintf("budget %q reached %d%% (%s of %s, scope %s, period ending %s); forecast %s",
					b.Name, th, b.Spent, b.Amount, b.Scope, b.PeriodEnd.Format(time.DateOnly), b.Forecast)
				if th >= 100 && b.Action != suanli.BudgetAlert {
					msg += "; action: " + map[string]string{suanli.BudgetBlock: "new rentals blocked", suanli.BudgetStop: "running instances stopped, new rentals blocked"}[b.Action]
				}
				secret, err := s.openText(b.WebhookSecret, webhookPurpose(account))
				if err != nil {
					s.Logger.Error("open budget webhook secret", "budget_id", b.ID, "err", err)
				}
				s.alert(ctx, &suanli.Alert{AccountID: account, Kind: "budget", BudgetID: b.ID, Threshold: th, Message: msg}, key, b.WebhookURL, secret)
			}
			if b.Percent >= 100 && b.Action == suanli.BudgetStop {
				if err := s.stopScope(ctx, account, b); err != nil {
					return err
				}
			}
		}
	}
	return s.checkBalances(ctx)
}

func (s *Service) stopScope(ctx context.Context, account int64, b *suanli.Budget) error {
	live := true
	ins, _, err := s.Store.FindInstances(ctx, suanli.InstanceFilter{AccountID: &account, Live: &live, Limit: 1 << 30}, s.now())
	if err != nil {
		return err
	}
	for _, in := range ins {
		if in.Desired == suanli.DesiredRunning && budgetMatches(b.Scope, in.Project, in.Tags) && in.HoldsGPUs() {
			reason := fmt.Sprintf("stopped by budget %q (%s of %s spent): its disk is kept; raise the budget and `suanli start %d`", b.Name, b.Spent, b.Amount, in.ID)
			if err := s.stopForMoney(ctx, in, reason); err != nil {
				return err
			}
		}
	}
	return nil
}

// stopForMoney stops an instance that is running or about to, for a budget
// or an empty balance. Data is never destroyed.
func (s *Service) stopForMoney(ctx context.Context, in *suanli.Instance, reason string) error {
	now := s.now()
	out, err := s.Store.UpdateInstance(ctx, in.ID, now, now, func(i *suanli.Instance) error {
		if i.Desired != suanli.DesiredRunning || !i.HoldsGPUs() {
			return errIgnore
		}
		i.Desired, i.StatusMessage = suanli.DesiredStopped, reason
		if i.Status == suanli.StatusRunning || i.Status == suanli.StatusPreempting {
			i.Status = suanli.StatusStopping
		} else {
			i.Status = suanli.StatusStopped
		}
		return nil
	})
	if err == errIgnore {
		return nil
	} else if err != nil {
		return err
	}
	s.afterChange(ctx, out.MachineID)
	s.Logger.Warn("instance stopped for money", "instance_id", in.ID, "reason", reason)
	s.RecordAudit(ctx, suanli.AuditEvent{AccountID: in.AccountID, Action: "instance.stopped_for_money", Target: fmt.Sprintf("instance %d", in.ID),
		Result: "ok", Detail: reason})
	return nil
}

func (s *Service) checkBalances(ctx context.Context) error {
	accounts, err := s.Store.AccountsWithLiveInstances(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	for _, id := range accounts {
		bal, err := s.balanceOf(ctx, id)
		if err != nil {
			return err
		}
		if bal.BurnRate == 0 {
			continue
		}
		// Include what is accrued but not yet settled.
		live := true
		ins, _, err := s.Store.FindInstances(ctx, suanli.InstanceFilter{AccountID: &id, Live: &live, Limit: 1 << 30}, now)
		if err != nil {
			return err
		}
		avail := bal.Balance
		for _, in := range ins {
			settled, err := s.Store.InstanceSettled(ctx, in.ID)
			if err != nil {
				return err
			}
			avail -= in.CostSoFar - settled
		}
		hours := int64(s.cfg.LowBalanceHours)
		if avail < bal.BurnRate*suanli.Money(hours) {
			last, err := s.Store.LastAlertAt(ctx, id, "low_balance")
			if err != nil {
				return err
			}
			if now.Sub(last) > 24*time.Hour || last.IsZero() {
				left := "none"
				if avail > 0 {
					left = (time.Duration(suanli.MulDiv(avail, int64(time.Hour), int64(bal.BurnRate)))).Round(time.Minute).String()
				}
				s.alert(ctx, &suanli.Alert{AccountID: id, Kind: "low_balance", Message: fmt.Sprintf(
					"low balance: %s left at %s/h burn (about %s); at zero, running instances stop after %s (their disks are kept)",
					avail, bal.BurnRate, left, s.cfg.ZeroBalanceGrace)}, "", "", "")
			}
		}
		s.lowMu.Lock()
		since, low := s.lowSince[id]
		if avail > 0 {
			delete(s.lowSince, id)
		} else if !low {
			s.lowSince[id], since = now, now
		}
		s.lowMu.Unlock()
		if avail <= 0 && now.Sub(since) >= s.cfg.ZeroBalanceGrace {
			for _, in := range ins {
				if err := s.stopForMoney(ctx, in, fmt.Sprintf("stopped: balance reached zero (%s) and stayed there %s; add credit and `suanli start %d` (the disk is kept)", avail, s.cfg.ZeroBalanceGrace, in.ID)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// alert records an alert (once per periodKey for budget thresholds) and
// delivers it to the webhook, if any, signed with HMAC-SHA256.
func (s *Service) alert(ctx context.Context, a *suanli.Alert, periodKey, webhook, secret string) {
	a.CreatedAt = s.now()
	added, err := s.Store.AddAlert(ctx, a, periodKey)
	if err != nil {
		s.Logger.Error("add alert", "account_id", a.AccountID, "err", err)
		return
	}
	if !added {
		return
	}
	s.Logger.Info("alert", "account_id", a.AccountID, "kind", a.Kind, "message", a.Message)
	if webhook == "" {
		return
	}
	go s.deliver(context.WithoutCancel(ctx), *a, webhook, secret)
}

// WebhookSignature is the header value for a webhook body: "sha256=" and
// the hex HMAC-SHA256 of the body under the budget's secret.
func WebhookSignature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (s *Service) deliver(ctx context.Context, a suanli.Alert, webhook, secret string) {
	body, _ := json.Marshal(map[string]any{"event": "alert." + a.Kind, "alert": a})
	result := ""
	for attempt := 0; attempt < 3; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, webhook, bytes.NewReader(body))
		if err != nil {
			result = "failed: " + err.Error()
			break
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Suanli-Event", "alert."+a.Kind)
		req.Header.Set("X-Suanli-Signature", WebhookSignature(secret, body))
		resp, err := s.Client.Do(req)
		if err == nil {
			resp.Body.Close()
			result = resp.Status
			if resp.StatusCode < 300 {
				break
			}
		} else {
			result = "failed: " + err.Error()
		}
		time.Sleep(time.Duration(attempt+1) * time.Second)
	}
	if err := s.Store.SetAlertDelivery(ctx, a.ID, result); err != nil {
		s.Logger.Error("record delivery", "alert_id", a.ID, "err", err)
	}
}
