package console

import (
	"cmp"
	"encoding/csv"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// Billing page bounds: the chart's days, and how many charges one page
// view reads (the settlement loop writes one per meter every few seconds,
// so a busy month can hold many).
const (
	billingDays     = 30
	maxChargeScan   = 200_000
	statementRows   = 100
	maxCSVCharges   = 1_000_000
	instanceBarRows = 20
)

func (c *Console) registerBillingRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /billing", c.page(c.handleBilling))
	mux.HandleFunc("GET /billing/charges.csv", c.page(c.handleChargesCSV))
}

// instanceSpend is one instance's spend over the period.
type instanceSpend struct {
	ID     int64
	Name   string
	Amount suanli.Money
	Bar    template.HTML
}

// statementRow is the charges of one instance and meter on one day (or one
// credit), which is how a person reads a bill; the CSV has every charge.
type statementRow struct {
	Day        time.Time
	InstanceID int64
	Kind       string
	Charges    int
	Amount     suanli.Money
	Memo       string
}

// billingPage is the billing template's data.
type billingPage struct {
	Balance     *suanli.Balance
	Runway      string // how long the balance lasts at the burn rate
	Chart       template.HTML
	Days        []dayTotal
	PeriodTotal suanli.Money
	ByKind      []kindTotal
	ByInstance  []instanceSpend
	Statement   []statementRow
	Partial     bool // more charges than one view reads: the figures cover the newest
	Scanned     int
	From        time.Time
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

func (c *Console) handleBilling(w http.ResponseWriter, r *http.Request, s *session) error {
	bal, err := c.svc.Balance(r.Context())
	if err != nil {
		return err
	}
	now := c.now()
	last := midnight(now)
	first := last.AddDate(0, 0, -(billingDays - 1))
	sum, err := c.svc.FindCharges(r.Context(), suanli.ChargeFilter{Since: &first, Limit: maxChargeScan})
	if err != nil {
		return err
	}
	p := billingPage{Balance: bal, Runway: runway(bal.Balance, bal.BurnRate), From: first, Scanned: len(sum.Charges),
		Partial: sum.Count > len(sum.Charges)}
	p.Days = spendByDay(sum.Charges, first, last)
	for _, d := range p.Days {
		p.PeriodTotal += d.Amount
	}
	p.Chart = spendChart(p.Days, "Spend by day, last "+strconv.Itoa(billingDays)+" days")
	for _, m := range meterNames {
		p.ByKind = append(p.ByKind, kindTotal{Kind: m.label, Amount: sum.ByKind[m.kind]})
	}

	names := map[int64]string{}
	if ins, _, err := c.svc.FindInstances(r.Context(), suanli.InstanceFilter{Limit: 10000}); err == nil {
		for _, in := range ins {
			n := in.Image
			if in.Label != "" {
				n = in.Label
			}
			names[in.ID] = n
		}
	}
	byInst := map[int64]suanli.Money{}
	rows := map[statementRow]*statementRow{}
	var order []*statementRow
	for _, ch := range sum.Charges {
		if ch.Kind == "credit" {
			order = append(order, &statementRow{Day: midnight(ch.CreatedAt), Kind: "credit", Charges: 1, Amount: ch.Amount, Memo: ch.Memo})
			continue
		}
		byInst[ch.InstanceID] += ch.Amount
		key := statementRow{Day: midnight(ch.To), InstanceID: ch.InstanceID, Kind: ch.Kind}
		row, ok := rows[key]
		if !ok {
			row = &key
			rows[key] = row
			order = append(order, row)
		}
		row.Charges++
		row.Amount += ch.Amount
	}
	var largest suanli.Money
	for id, amt := range byInst {
		p.ByInstance = append(p.ByInstance, instanceSpend{ID: id, Name: names[id], Amount: amt})
		largest = max(largest, amt)
	}
	slices.SortFunc(p.ByInstance, func(a, b instanceSpend) int {
		return cmp.Or(cmp.Compare(b.Amount, a.Amount), cmp.Compare(a.ID, b.ID))
	})
	if len(p.ByInstance) > instanceBarRows {
		p.ByInstance = p.ByInstance[:instanceBarRows]
	}
	for i := range p.ByInstance {
		p.ByInstance[i].Bar = shareBar(p.ByInstance[i].Amount, largest)
	}
	for _, row := range order { // charges come newest first, so rows do too
		if len(p.Statement) == statementRows {
			break
		}
		p.Statement = append(p.Statement, *row)
	}
	c.render(w, r, http.StatusOK, "billing.html", &view{Title: "Billing", Nav: "billing", sess: s, Page: p})
	return nil
}

// csvSafe keeps a spreadsheet from reading a text cell as a formula.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// handleChargesCSV downloads every charge and credit as CSV (amounts in
// currency units with six decimals at most, as suanli.Money formats them).
func (c *Console) handleChargesCSV(w http.ResponseWriter, r *http.Request, s *session) error {
	sum, err := c.svc.FindCharges(r.Context(), suanli.ChargeFilter{Limit: maxCSVCharges})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="suanli-charges.csv"`)
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
