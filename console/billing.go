package console

import (
	"encoding/csv"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// Billing page bounds: the days the chart covers, the bars per breakdown,
// and the charges one CSV download holds.
const (
	billingDays   = 30
	breakdownRows = 20
	maxCSVCharges = 1_000_000
	invoiceMonths = 3
)

func (c *Console) registerBillingRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /billing", c.page(c.handleBilling))
	mux.HandleFunc("GET /billing/charges.csv", c.page(c.handleChargesCSV))
	mux.HandleFunc("GET /billing/invoices/{file}", c.page(c.handleInvoiceCSV))
	c.registerBudgetRoutes(mux)
}

// shareRow is one group of a breakdown (a project, an instance, a meter)
// with its bar.
type shareRow struct {
	Key    string
	Name   string // the instance's label or image, for instance rows
	Link   string // the instance's page, for instance rows
	Amount suanli.Money
	Bar    template.HTML
}

// budgetRow is a budget with its progress bar and what deleting it does.
type budgetRow struct {
	B       *suanli.Budget
	Bar     template.HTML
	Confirm string
}

// billingPage is the billing template's data.
type billingPage struct {
	Balance     *suanli.Balance
	Runway      string // how long the balance lasts at the burn rate
	Chart       template.HTML
	Days        []dayTotal
	PeriodTotal suanli.Money
	From        time.Time
	ByProject   []shareRow
	ByInstance  []shareRow
	ByService   []shareRow
	TagKey      string   // the tag key ByTag groups by; "" when no instance has tags
	TagKeys     []string // the caller's instances' tag keys, the most used first
	ByTag       []shareRow
	Budgets     []budgetRow
	Alerts      []*suanli.Alert
	Invoice     *suanli.Invoice
	Months      []string // invoices to download, newest first

	BudgetIn   budgetInputs // the budget form: defaults, a budget to edit, or what was typed
	BudgetErr  *fieldError
	BudgetEdit bool     // the form edits an existing budget
	Scopes     []string // suggestions for the scope input
}

// runway says how long balance lasts at burn per hour, in integer hours.
func runway(balance, burn suanli.Money) string {
	switch {
	case burn <= 0:
		return "Nothing is running up charges now"
	case balance <= 0:
		return "The balance is used up: add credit, or running instances will be stopped"
	}
	h := int64(balance / burn)
	switch {
	case h < 1:
		return "The balance lasts less than an hour at the current burn rate"
	case h < 72:
		return "The balance lasts about " + plural(int(h), "hour", "hours") + " at the current burn rate"
	}
	return "The balance lasts about " + plural(int(h/24), "day", "days") + " at the current burn rate"
}

// shares turns a cost report into bars against its largest row.
func shares(rep *suanli.CostReport, link func(key string) string) []shareRow {
	var out []shareRow
	var largest suanli.Money
	for _, r := range rep.Rows {
		largest = max(largest, r.Amount)
	}
	for i, r := range rep.Rows {
		if i == breakdownRows {
			break
		}
		row := shareRow{Key: r.Key, Amount: r.Amount, Bar: shareBar(r.Amount, largest)}
		if link != nil {
			row.Link = link(r.Key)
		}
		out = append(out, row)
	}
	return out
}

// daysOf spreads a by-day cost report over the days from first to last.
func daysOf(rep *suanli.CostReport, first, last time.Time) []dayTotal {
	byKey := map[string]suanli.Money{}
	for _, r := range rep.Rows {
		byKey[r.Key] = r.Amount
	}
	var days []dayTotal
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		days = append(days, dayTotal{Day: d, Amount: byKey[d.Format(time.DateOnly)]})
	}
	return days
}

// handleBilling shows the money: balance and runway, budgets, spend by
// day, project, tag (?tag=KEY; the most used key by default), instance and
// meter (the control plane's cost reports, which
// reconcile with the ledger), this month's invoice and downloads. With
// ?edit=NAME the budget form starts filled with that budget.
func (c *Console) handleBilling(w http.ResponseWriter, r *http.Request, s *session) error {
	p, err := c.billingPage(r)
	if err != nil {
		return err
	}
	if name := r.URL.Query().Get("edit"); name != "" {
		for _, b := range p.Budgets {
			if b.B.Name == name {
				p.BudgetIn, p.BudgetEdit = budgetInputsOf(b.B), true
			}
		}
	}
	c.render(w, r, http.StatusOK, "billing.html", &view{Title: "Billing", Nav: "billing", sess: s, Notice: notice(r), Page: p})
	return nil
}

// billingPage gathers the billing page's data, with the budget form at its
// defaults.
func (c *Console) billingPage(r *http.Request) (*billingPage, error) {
	ctx := r.Context()
	bal, err := c.svc.Balance(ctx)
	if err != nil {
		return nil, err
	}
	now := c.now().UTC()
	last := midnight(now)
	first := last.AddDate(0, 0, -(billingDays - 1))
	p := &billingPage{Balance: bal, Runway: runway(bal.Balance-bal.Accrued, bal.BurnRate), From: first, BudgetIn: newBudgetInputs()}
	report := func(by string) (*suanli.CostReport, error) { return c.svc.CostReport(ctx, by, first) }
	day, err := report("day")
	if err != nil {
		return nil, err
	}
	p.Days, p.PeriodTotal = daysOf(day, first, last), day.Total
	p.Chart = spendChart(p.Days, "Spend by day, last "+strconv.Itoa(billingDays)+" days")
	for by, dst := range map[string]*[]shareRow{"project": &p.ByProject, "instance": &p.ByInstance, "service": &p.ByService} {
		rep, err := report(by)
		if err != nil {
			return nil, err
		}
		var link func(string) string
		if by == "instance" {
			link = func(k string) string { return "/instances/" + k }
		}
		*dst = shares(rep, link)
	}
	p.Scopes = []string{"account"}
	tagUses := map[string]int{}
	if ins, _, err := c.svc.FindInstances(ctx, suanli.InstanceFilter{Limit: 10000}); err == nil {
		names := map[string]string{}
		for _, in := range ins {
			for k := range in.Tags {
				tagUses[k]++
			}
			names[strconv.FormatInt(in.ID, 10)] = cmpOr(in.Label, in.Image)
			if in.Project != "" && !slices.Contains(p.Scopes, "project:"+in.Project) {
				p.Scopes = append(p.Scopes, "project:"+in.Project)
			}
		}
		for i := range p.ByInstance {
			p.ByInstance[i].Name = names[p.ByInstance[i].Key]
		}
	}
	p.TagKeys = tagKeys(tagUses)
	p.TagKey = strings.TrimSpace(r.URL.Query().Get("tag"))
	if p.TagKey == "" && len(p.TagKeys) > 0 {
		p.TagKey = p.TagKeys[0]
	} else if p.TagKey != "" && !slices.Contains(p.TagKeys, p.TagKey) {
		p.TagKeys = append(p.TagKeys, p.TagKey)
	}
	if p.TagKey != "" {
		rep, err := report("tag:" + p.TagKey)
		if err != nil {
			return nil, err
		}
		p.ByTag = shares(rep, nil)
	}
	bs, err := c.svc.FindBudgets(ctx)
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		p.Budgets = append(p.Budgets, budgetRow{B: b, Bar: budgetBar(b.Percent, b.Thresholds), Confirm: budgetDeleteText(b.Name)})
	}
	if p.Alerts, err = c.svc.FindAlerts(ctx, 10); err != nil {
		return nil, err
	}
	if p.Invoice, err = c.svc.Invoice(ctx, now.Format("2006-01")); err != nil {
		return nil, err
	}
	for i := range invoiceMonths {
		p.Months = append(p.Months, time.Date(now.Year(), now.Month()-time.Month(i), 1, 0, 0, 0, 0, time.UTC).Format("2006-01"))
	}
	return p, nil
}

// tagKeys orders tag keys by how many instances carry them, most first,
// then by name: the billing page's by-tag chart starts on the first.
func tagKeys(uses map[string]int) []string {
	keys := make([]string, 0, len(uses))
	for k := range uses {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if uses[a] != uses[b] {
			return uses[b] - uses[a]
		}
		return strings.Compare(a, b)
	})
	return keys
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// csvSafe keeps a spreadsheet from reading a text cell as a formula.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func csvHeaders(w http.ResponseWriter, name string) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
}

// handleChargesCSV downloads every charge and credit as CSV (amounts in
// currency units, as suanli.Money formats them).
func (c *Console) handleChargesCSV(w http.ResponseWriter, r *http.Request, s *session) error {
	sum, err := c.svc.FindCharges(r.Context(), suanli.ChargeFilter{Limit: maxCSVCharges})
	if err != nil {
		return err
	}
	csvHeaders(w, "suanli-charges.csv")
	cw := csv.NewWriter(w)
	cw.Write([]string{"id", "created_at", "instance_id", "kind", "amount", "from", "to", "quantity", "memo"})
	for _, ch := range sum.Charges {
		inst := ""
		if ch.InstanceID != 0 {
			inst = strconv.FormatInt(ch.InstanceID, 10)
		}
		cw.Write([]string{strconv.FormatInt(ch.ID, 10), ch.CreatedAt.UTC().Format(time.RFC3339), inst, ch.Kind, ch.Amount.Decimal(),
			ch.From.UTC().Format(time.RFC3339Nano), ch.To.UTC().Format(time.RFC3339Nano), csvSafe(ch.Quantity), csvSafe(ch.Memo)})
	}
	cw.Flush()
	return cw.Error()
}

// handleInvoiceCSV downloads a month's invoice (/billing/invoices/2026-11.csv).
func (c *Console) handleInvoiceCSV(w http.ResponseWriter, r *http.Request, s *session) error {
	month, ok := strings.CutSuffix(r.PathValue("file"), ".csv")
	if !ok {
		return suanli.Errorf(suanli.ENOTFOUND, "invoice %q not found: ask for MONTH.csv, e.g. %s.csv", r.PathValue("file"), c.now().Format("2006-01"))
	}
	inv, err := c.svc.Invoice(r.Context(), month)
	if err != nil {
		return err
	}
	csvHeaders(w, "suanli-invoice-"+inv.Month+".csv")
	cw := csv.NewWriter(w)
	cw.Write([]string{"month", "instance_id", "label", "project", "kind", "quantity", "amount"})
	for _, l := range inv.Lines {
		cw.Write([]string{inv.Month, strconv.FormatInt(l.InstanceID, 10), csvSafe(l.Label), csvSafe(l.Project), l.Kind, l.Quantity, l.Amount.Decimal()})
	}
	cw.Write([]string{inv.Month, "", "", "", "credits", "", inv.Credits.Decimal()})
	cw.Write([]string{inv.Month, "", "", "", "total", "", inv.Total.Decimal()})
	cw.Flush()
	return cw.Error()
}
