package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// registerBudgetRoutes mounts the billing page's budget forms.
func (c *Console) registerBudgetRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /billing/budgets", c.form(c.handleBudgetSet))
	mux.HandleFunc("POST /billing/budgets/delete", c.form(c.handleBudgetDelete))
}

// budgetInputs are the budget form's inputs, as typed. Names are the API's
// Budget fields, so that an error's Field marks the input. The webhook
// secret is not among them: it is write-only, never shown back, not even
// on a form that comes back with an error.
type budgetInputs struct {
	Name, Scope, Amount, Period, Start, End, Thresholds, Action, WebhookURL string
}

func readBudgetInputs(v url.Values) budgetInputs {
	return budgetInputs{Name: v.Get("name"), Scope: v.Get("scope"), Amount: v.Get("amount"), Period: v.Get("period"),
		Start: v.Get("start"), End: v.Get("end"), Thresholds: v.Get("thresholds"), Action: v.Get("action"), WebhookURL: v.Get("webhook_url")}
}

// newBudgetInputs are the form's defaults: the whole account, monthly,
// alerts at 50, 80 and 100%, alert only.
func newBudgetInputs() budgetInputs {
	return budgetInputs{Scope: "account", Period: "monthly", Thresholds: "50, 80, 100", Action: suanli.BudgetAlert}
}

// budgetInputsOf fills the form from an existing budget, for editing.
func budgetInputsOf(b *suanli.Budget) budgetInputs {
	in := budgetInputs{Name: b.Name, Scope: b.Scope, Amount: b.Amount.Decimal(), Period: b.Period, Action: b.Action, WebhookURL: b.WebhookURL}
	var th []string
	for _, t := range b.Thresholds {
		th = append(th, strconv.Itoa(t))
	}
	in.Thresholds = strings.Join(th, ", ")
	if b.Start != nil {
		in.Start = b.Start.UTC().Format(time.DateOnly)
	}
	if b.End != nil {
		in.End = b.End.UTC().Format(time.DateOnly)
	}
	return in
}

// budget turns the inputs and the secret into the budget to set. Errors
// are EINVALID naming the input; the service checks the rest (scope,
// period, thresholds' range, action, webhook URL).
func (in budgetInputs) budget(secret string) (suanli.Budget, error) {
	b := suanli.Budget{Name: strings.TrimSpace(in.Name), Scope: strings.TrimSpace(in.Scope), Period: in.Period,
		Action: in.Action, WebhookURL: strings.TrimSpace(in.WebhookURL), WebhookSecret: secret}
	if b.Name == "" {
		return b, suanli.FieldErrorf("name", "give the budget a name, such as monthly or ml-project")
	}
	if len(b.Name) > 100 {
		return b, suanli.FieldErrorf("name", "longer than 100 characters")
	}
	if strings.TrimSpace(in.Amount) == "" {
		return b, suanli.FieldErrorf("amount", "give the budget in dollars, such as 50")
	}
	m, err := suanli.ParseMoney(in.Amount)
	if err != nil {
		return b, suanli.FieldErrorf("amount", "%v", err)
	}
	b.Amount = m
	for _, f := range strings.FieldsFunc(in.Thresholds, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(strings.TrimSuffix(f, "%"))
		if err != nil {
			return b, suanli.FieldErrorf("thresholds", "%q is not a percentage: give them like 50, 80, 100", f)
		}
		b.Thresholds = append(b.Thresholds, n)
	}
	if b.Period == "custom" {
		for _, d := range []struct {
			field, text string
			dst         **time.Time
		}{{"start", in.Start, &b.Start}, {"end", in.End, &b.End}} {
			t, err := time.Parse(time.DateOnly, strings.TrimSpace(d.text))
			if err != nil {
				return b, suanli.FieldErrorf(d.field, "%q is not a date: a custom period needs a start and an end, YYYY-MM-DD (UTC)", d.text)
			}
			*d.dst = &t
		}
	}
	return b, nil
}

// handleBudgetSet creates a budget, or replaces the one with the same
// name; errors come back on the form, with what was typed (the secret
// aside).
func (c *Console) handleBudgetSet(w http.ResponseWriter, r *http.Request, s *session) error {
	in := readBudgetInputs(r.PostForm)
	auditTarget(r, "budget "+strings.TrimSpace(in.Name))
	b, err := in.budget(r.PostFormValue("webhook_secret"))
	if err == nil {
		_, err = c.svc.SetBudget(r.Context(), b)
	}
	if err != nil {
		fe := formError(err)
		if fe == nil {
			return err
		}
		p, perr := c.billingPage(r)
		if perr != nil {
			return perr
		}
		p.BudgetIn, p.BudgetErr = in, fe
		c.render(w, r, statusOf(err), "billing.html", &view{Title: "Billing", Nav: "billing", sess: s, Page: p})
		return nil
	}
	c.log.Info("console budget set", "budget", b.Name, "account_id", s.accountID)
	redirect(w, r, withNotice("/billing", "budgetset")+"#budgets-h")
	return nil
}

// budgetDeleteText says what deleting a budget does.
func budgetDeleteText(name string) string {
	return "Delete budget " + strconv.Quote(name) + "? Its alerts stop, and if it blocks or stops rentals at 100%, that stops too. Spending is not changed."
}

// handleBudgetDelete deletes a budget once confirmed.
func (c *Console) handleBudgetDelete(w http.ResponseWriter, r *http.Request, s *session) error {
	name := r.PostFormValue("name")
	auditTarget(r, "budget "+name)
	if !confirmed(r) {
		c.confirm(w, r, s, "billing", confirmPage{Heading: "Delete budget " + strconv.Quote(name) + "?", Text: budgetDeleteText(name),
			Post: "/billing/budgets/delete", Back: "/billing#budgets-h", Label: "Delete", Danger: true,
			Fields: []hiddenField{{"name", name}}})
		return nil
	}
	if err := c.svc.DeleteBudget(r.Context(), name); err != nil {
		return err
	}
	c.log.Info("console budget deleted", "budget", name, "account_id", s.accountID)
	redirect(w, r, withNotice("/billing", "budgetdeleted")+"#budgets-h")
	return nil
}
