package http

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/suanli/suanli"
)

// Quote asks for an itemized quote with pre-flight checks.
func (c *Client) Quote(ctx context.Context, q suanli.QuoteRequest) (*suanli.Quote, error) {
	var out suanli.Quote
	return &out, c.do(ctx, c.HTTP, http.MethodPost, "/v1/quotes", rentalBody(q, q.InstanceCreate), &out)
}

// SetBudget creates or replaces a budget by name.
func (c *Client) SetBudget(ctx context.Context, b suanli.Budget) (*suanli.Budget, error) {
	var out suanli.Budget
	return &out, c.do(ctx, c.HTTP, http.MethodPut, "/v1/budgets/"+url.PathEscape(b.Name), b, &out)
}

// FindBudgets lists budgets.
func (c *Client) FindBudgets(ctx context.Context) ([]*suanli.Budget, error) {
	var l BudgetList
	err := c.get(ctx, "/v1/budgets", &l)
	return l.Budgets, err
}

// DeleteBudget deletes a budget.
func (c *Client) DeleteBudget(ctx context.Context, name string) error {
	return c.do(ctx, c.HTTP, http.MethodDelete, "/v1/budgets/"+url.PathEscape(name), nil, nil)
}

// FindAlerts lists alerts.
func (c *Client) FindAlerts(ctx context.Context, limit int) ([]*suanli.Alert, error) {
	var l AlertList
	err := c.get(ctx, "/v1/alerts?limit="+itoa(limit), &l)
	return l.Alerts, err
}

// Invoice returns a month's invoice ("" for this month).
func (c *Client) Invoice(ctx context.Context, month string) (*suanli.Invoice, error) {
	if month == "" {
		month = time.Now().UTC().Format("2006-01")
	}
	var inv suanli.Invoice
	return &inv, c.get(ctx, "/v1/billing/invoices/"+url.PathEscape(month), &inv)
}

// CostReport groups spend.
func (c *Client) CostReport(ctx context.Context, by, since string) (*suanli.CostReport, error) {
	var r suanli.CostReport
	return &r, c.get(ctx, "/v1/billing/report?"+url.Values{"by": {by}, "since": {since}}.Encode(), &r)
}

// Earnings returns provider earnings since a span or date.
func (c *Client) Earnings(ctx context.Context, since string) (*suanli.Earnings, error) {
	var e suanli.Earnings
	return &e, c.get(ctx, "/v1/host/earnings?"+url.Values{"since": {since}}.Encode(), &e)
}

// Payout pays out earnings (0: all available).
func (c *Client) Payout(ctx context.Context, amount suanli.Money) (*suanli.Earnings, error) {
	var e suanli.Earnings
	return &e, c.do(ctx, c.HTTP, http.MethodPost, "/v1/host/payouts", PayoutRequest{Amount: amount}, &e)
}

func itoa(n int) string { return strconv.Itoa(n) }

// CreateVolume creates a volume.
func (c *Client) CreateVolume(ctx context.Context, v suanli.VolumeCreate) (*suanli.Volume, error) {
	var out suanli.Volume
	return &out, c.do(ctx, c.HTTP, http.MethodPost, "/v1/volumes", v, &out)
}

// FindVolumes lists volumes.
func (c *Client) FindVolumes(ctx context.Context, all bool) ([]*suanli.Volume, error) {
	var l VolumeList
	q := ""
	if all {
		q = "?all=true"
	}
	err := c.get(ctx, "/v1/volumes"+q, &l)
	return l.Volumes, err
}

// DeleteVolume deletes a volume by name.
func (c *Client) DeleteVolume(ctx context.Context, name string) (*suanli.Volume, error) {
	var out suanli.Volume
	return &out, c.do(ctx, c.HTTP, http.MethodDelete, "/v1/volumes/"+url.PathEscape(name), nil, &out)
}
