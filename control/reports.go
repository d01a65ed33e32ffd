package control

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
	"github.com/suanli/suanli/sched"
	"github.com/suanli/suanli/sqlstore"
)

// Quote itemizes what a rental would cost (compute, storage while running
// and while stopped, traffic, the platform fee inside the price) and runs
// the pre-flight checks of a create without reserving anything.
func (s *Service) Quote(ctx context.Context, q suanli.QuoteRequest) (*suanli.Quote, error) {
	p, err := principal(ctx, suanli.ScopeInstanceRead)
	if err != nil {
		return nil, err
	}
	c := q.InstanceCreate
	if c.Image == "" {
		c.Image = "quote" // a quote needs no image
	}
	if err := validateCreate(&c); err != nil {
		return nil, err
	}
	if q.Hours == 0 {
		q.Hours = 1
	}
	if q.Hours < 0 || q.Hours > 24*366 || math.IsNaN(q.Hours) {
		return nil, suanli.FieldErrorf("hours", "%v: give the hours you expect to run, up to a year", q.Hours)
	}
	if q.EgressGB < 0 || q.IngressGB < 0 || math.IsNaN(q.EgressGB+q.IngressGB) {
		return nil, suanli.FieldErrorf("egress_gb", "traffic must not be negative")
	}
	m, err := s.Store.FindMachineByID(ctx, c.OfferID)
	if suanli.ErrorCode(err) == suanli.ENOTFOUND || (err == nil && !m.Listing.Listed) {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "offer %d not found: it is not listed (search again)", c.OfferID)
	} else if err != nil {
		return nil, err
	}
	gpus, cores, ram, err := s.Store.MachineUsage(ctx, m.ID)
	if err != nil {
		return nil, err
	}
	req := sched.Request{GPUCount: c.GPUCount, CPUCores: c.CPUCores, DiskGB: c.DiskGB, RentalType: c.RentalType, FeeBP: s.cfg.FeeBasisPoints}
	if c.Bid != nil {
		req.Bid = *c.Bid
	}
	usage := sched.Usage{GPUs: gpus, CPUCores: cores, RAMMB: ram}
	terms := rentTerms(m)
	plan, err := sched.Place(terms, usage, req)
	if err != nil {
		return nil, err
	}
	r := plan.Rates
	secs := int64(math.Round(q.Hours * 3600))
	runUS := secs * suanli.MicrosPerSecond
	out := &suanli.Quote{OfferID: m.ID, RentalType: c.RentalType, Bid: req.Bid, GPUCount: len(plan.GPUIndexes), DiskGB: c.DiskGB}
	compute, _ := suanli.Accrue(r.ComputePerHour, runUS, suanli.MicrosPerHour, 0)
	unit := fmt.Sprintf("%d GPUs", len(plan.GPUIndexes))
	if len(plan.GPUIndexes) == 0 {
		unit = fmt.Sprintf("%d cores", plan.CPUCores)
	}
	out.Lines = append(out.Lines, suanli.QuoteLine{Item: "compute (" + c.RentalType + ")", Quantity: fmt.Sprintf("%g h × %s", q.Hours, unit),
		Rate: r.ComputePerHour.String() + "/h", Amount: compute})
	storage, _ := suanli.Accrue(r.StoragePerMonth*suanli.Money(c.DiskGB), runUS, suanli.MicrosPerMonth, 0)
	out.Lines = append(out.Lines, suanli.QuoteLine{Item: "storage while running", Quantity: fmt.Sprintf("%d GB × %g h", c.DiskGB, q.Hours),
		Rate: r.StoragePerMonth.String() + "/GB-month", Amount: storage})
	egress := suanli.Money(math.Round(float64(r.InetUpPerGB) * q.EgressGB))
	ingress := suanli.Money(math.Round(float64(r.InetDownPerGB) * q.IngressGB))
	out.Lines = append(out.Lines,
		suanli.QuoteLine{Item: "traffic out", Quantity: fmt.Sprintf("%g GB", q.EgressGB), Rate: r.InetUpPerGB.String() + "/GB", Amount: egress},
		suanli.QuoteLine{Item: "traffic in", Quantity: fmt.Sprintf("%g GB", q.IngressGB), Rate: r.InetDownPerGB.String() + "/GB", Amount: ingress})
	out.StoppedPerDay = suanli.MulDiv(r.StoragePerMonth*suanli.Money(c.DiskGB), 24*suanli.MicrosPerHour, suanli.MicrosPerMonth)
	out.Lines = append(out.Lines, suanli.QuoteLine{Item: "storage while stopped (not in total)", Quantity: "per day",
		Rate: r.StoragePerMonth.String() + "/GB-month", Amount: out.StoppedPerDay})
	for _, l := range out.Lines[:4] {
		out.Total += l.Amount
	}
	out.PerHour = plan.HourlyCost
	out.FeeIncluded = suanli.MulDiv(out.Total, s.cfg.FeeBasisPoints, 10_000)
	out.Lines = append(out.Lines, suanli.QuoteLine{Item: "platform fee (included above)", Quantity: fmt.Sprintf("%d.%02d%%", s.cfg.FeeBasisPoints/100, s.cfg.FeeBasisPoints%100),
		Rate: "of the price, paid by the provider", Amount: out.FeeIncluded})
	if bp := terms.Listing.GreenDiscountBP; bp > 0 {
		if err := s.quoteGreenDiscount(out, m, usage, req, compute, runUS, bp); err != nil {
			return nil, err
		}
	}
	// Pre-flight checks, as create would run them.
	out.Checks = append(out.Checks, fmt.Sprintf("capacity: %s free on offer %d", unit, m.ID))
	if m.Simulated && !s.cfg.AllowSimulated && m.OwnerID != p.AccountID {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "offer %d has simulated GPUs: only its owner may rent it on this marketplace", m.ID)
	}
	if m.Status != suanli.MachineOnline {
		out.Warnings = append(out.Warnings, fmt.Sprintf("host is %s: create would be refused now", m.Status))
	}
	bal, err := s.balanceOf(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	avail := bal.Balance - bal.Accrued // accrued since the last close is owed already
	out.BalanceAfter1h = avail - bal.BurnRate - plan.HourlyCost
	if out.BalanceAfter1h < 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("balance %s does not cover one hour (running instances burn %s/h, this rental %s/h): create would answer payment_required",
			avail, bal.BurnRate, plan.HourlyCost))
	} else {
		out.Checks = append(out.Checks, fmt.Sprintf("balance: %s covers %s", avail, hoursCovered(avail, bal.BurnRate+plan.HourlyCost)))
	}
	if err := s.checkBudgetsForCreate(ctx, p.AccountID, c.Project, c.Tags); err != nil {
		out.Warnings = append(out.Warnings, suanli.ErrorMessage(err))
	} else {
		out.Checks = append(out.Checks, "budgets: none blocks this rental")
	}
	if q.Hours*3600 > 0 && c.Guards.MaxRuntime == 0 && q.Hours > 0 {
		out.Warnings = append(out.Warnings, "no --ttl: it runs until you stop it (idle auto-stop still applies)")
	}
	return out, nil
}

// quoteGreenDiscount itemizes the green discount a quote's compute line
// already includes: what the same hours cost at the host's list price, less
// what they cost now. An interruptible rental pays its bid, so the discount
// only lowers the minimum bid, which a check says.
func (s *Service) quoteGreenDiscount(out *suanli.Quote, m *suanli.Machine, usage sched.Usage, req sched.Request, compute suanli.Money, runUS int64, bp int64) error {
	pct := fmt.Sprintf("%d.%02d%%", bp/100, bp%100)
	grid := m.Country
	if g, ok := advisor.CarbonIntensity(m.Country); ok {
		grid = fmt.Sprintf("%s, %.0f gCO2/kWh", g.Country, g.GPerKWh)
	}
	if req.RentalType == suanli.RentalInterruptible {
		out.Checks = append(out.Checks, fmt.Sprintf("green discount: the host's grid is green (%s), its minimum bid is %s lower; you pay your bid", grid, pct))
		return nil
	}
	list, err := sched.Place(m, usage, req)
	if err != nil {
		return err
	}
	listCompute, _ := suanli.Accrue(list.Rates.ComputePerHour, runUS, suanli.MicrosPerHour, 0)
	out.Lines = append(out.Lines, suanli.QuoteLine{Item: "green discount (included above)", Quantity: pct + " of compute",
		Rate: fmt.Sprintf("list %s/h, green grid (%s)", list.Rates.ComputePerHour, grid), Amount: listCompute - compute})
	return nil
}

func hoursCovered(bal, perHour suanli.Money) string {
	if perHour <= 0 {
		return "indefinitely"
	}
	return (time.Duration(suanli.MulDiv(bal, int64(time.Hour), int64(perHour)))).Round(time.Minute).String() + " at that rate"
}

// Invoice returns the caller's invoice for a month ("2026-11"; "" is this month).
func (s *Service) Invoice(ctx context.Context, month string) (*suanli.Invoice, error) {
	p, err := principal(ctx, suanli.ScopeBillingRead)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if month == "" {
		month = now.Format("2006-01")
	}
	from, err := time.Parse("2006-01", month)
	if err != nil {
		return nil, suanli.FieldErrorf("month", "%q: write YYYY-MM, e.g. %s", month, now.Format("2006-01"))
	}
	to := from.AddDate(0, 1, 0)
	rows, err := s.Store.ChargeRows(ctx, p.AccountID, from, to)
	if err != nil {
		return nil, err
	}
	inv := &suanli.Invoice{AccountID: p.AccountID, Month: month, From: from, To: to, Lines: []suanli.InvoiceLine{}}
	type key struct {
		id   int64
		kind string
	}
	idx := map[key]int{}
	secs := map[key]float64{}
	for _, r := range rows {
		k := key{r.InstanceID, r.Kind}
		i, ok := idx[k]
		if !ok {
			i = len(inv.Lines)
			idx[k] = i
			inv.Lines = append(inv.Lines, suanli.InvoiceLine{InstanceID: r.InstanceID, Label: r.Label, Project: r.Project, Kind: r.Kind})
		}
		inv.Lines[i].Amount += r.Amount
		inv.Total += r.Amount
		if r.Kind == suanli.MeterCompute || r.Kind == suanli.MeterStorage {
			secs[k] += r.To.Sub(r.From).Seconds()
		}
	}
	for k, i := range idx {
		if s, ok := secs[k]; ok {
			inv.Lines[i].Quantity = fmt.Sprintf("%.0f s", s)
		}
	}
	inv.Credits, err = s.Store.CreditsBetween(ctx, p.AccountID, from, to)
	return inv, err
}

// Earnings returns the caller's provider earnings over [from, to) by machine.
func (s *Service) Earnings(ctx context.Context, from, to time.Time) (*suanli.Earnings, error) {
	p, err := principal(ctx, suanli.ScopeHostRead)
	if err != nil {
		return nil, err
	}
	rows, err := s.Store.EarningsByMachine(ctx, p.AccountID, from, to)
	if err != nil {
		return nil, err
	}
	e := &suanli.Earnings{AccountID: p.AccountID, From: from, To: to, Machines: []suanli.MachineEarning{}}
	for _, r := range rows {
		e.Machines = append(e.Machines, suanli.MachineEarning{MachineID: r.MachineID, Gross: r.Gross, Net: r.Net, Fees: r.Gross - r.Net})
		e.Gross += r.Gross
		e.Net += r.Net
	}
	e.Fees = e.Gross - e.Net
	if e.PaidOut, err = s.Store.PaidOut(ctx, p.AccountID); err != nil {
		return nil, err
	}
	e.Available, err = s.Store.LedgerBalance(ctx, suanli.LedgerEarnings(p.AccountID))
	return e, err
}

// Payout pays out a provider's earnings (all of them when amount is 0).
func (s *Service) Payout(ctx context.Context, amount suanli.Money) (*suanli.Earnings, error) {
	p, err := principal(ctx, suanli.ScopeHostWrite)
	if err != nil {
		return nil, err
	}
	if amount == 0 {
		if amount, err = s.Store.LedgerBalance(ctx, suanli.LedgerEarnings(p.AccountID)); err != nil {
			return nil, err
		}
		if amount <= 0 {
			return nil, suanli.Errorf(suanli.EPAYMENTREQUIRED, "no earnings to pay out")
		}
	}
	if err := s.Store.Payout(ctx, p.AccountID, amount, "payout requested", s.now()); err != nil {
		return nil, err
	}
	s.Logger.Info("payout", "account_id", p.AccountID, "amount", amount.String())
	now := s.now()
	return s.Earnings(ctx, now.AddDate(0, -1, 0), now.Add(time.Second))
}

// CostReport groups the caller's spend since a time by project, tag:KEY,
// day, service (meter kind) or instance. Its total equals the ledger's
// charges over the same span.
func (s *Service) CostReport(ctx context.Context, by string, since time.Time) (*suanli.CostReport, error) {
	p, err := principal(ctx, suanli.ScopeBillingRead)
	if err != nil {
		return nil, err
	}
	var keyOf func(r sqlstore.ChargeRow) string
	switch {
	case by == "project":
		keyOf = func(r sqlstore.ChargeRow) string { return orDash(r.Project) }
	case strings.HasPrefix(by, "tag:") && len(by) > 4:
		k := by[4:]
		keyOf = func(r sqlstore.ChargeRow) string { return orDash(r.Tags[k]) }
	case by == "day":
		keyOf = func(r sqlstore.ChargeRow) string { return r.To.UTC().Format(time.DateOnly) }
	case by == "service":
		keyOf = func(r sqlstore.ChargeRow) string { return r.Kind }
	case by == "instance":
		keyOf = func(r sqlstore.ChargeRow) string { return fmt.Sprint(r.InstanceID) }
	case by == "team":
		keyOf = func(r sqlstore.ChargeRow) string { return fmt.Sprint(p.AccountID) }
	default:
		return nil, suanli.FieldErrorf("by", "%q: use project, tag:KEY, team, service, day or instance", by)
	}
	rows, err := s.Store.ChargeRows(ctx, p.AccountID, since, s.now().Add(time.Second))
	if err != nil {
		return nil, err
	}
	sums := map[string]suanli.Money{}
	rep := &suanli.CostReport{By: by, Since: since, Rows: []suanli.CostRow{}}
	for _, r := range rows {
		k := keyOf(r)
		sums[k] += r.Amount
		rep.Total += r.Amount
	}
	for k, v := range sums {
		rep.Rows = append(rep.Rows, suanli.CostRow{Key: k, Amount: v})
	}
	sort.Slice(rep.Rows, func(i, j int) bool {
		if by == "day" {
			return rep.Rows[i].Key < rep.Rows[j].Key
		}
		if rep.Rows[i].Amount != rep.Rows[j].Amount {
			return rep.Rows[i].Amount > rep.Rows[j].Amount
		}
		return rep.Rows[i].Key < rep.Rows[j].Key
	})
	return rep, nil
}

func orDash(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
