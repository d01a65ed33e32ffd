package http

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/suanli/suanli"
)

// BudgetList is the reply of GET /v1/budgets.
type BudgetList struct {
	Budgets []*suanli.Budget `json:"budgets"`
}

// VolumeList is the reply of GET /v1/volumes.
type VolumeList struct {
	Volumes []*suanli.Volume `json:"volumes"`
}

// AlertList is the reply of GET /v1/alerts.
type AlertList struct {
	Alerts []*suanli.Alert `json:"alerts"`
}

// PayoutRequest is the body of POST /v1/host/payouts.
type PayoutRequest struct {
	Amount suanli.Money `json:"amount"` // 0: everything available
}

func (s *Server) registerCostRoutes() {
	s.route("POST /v1/quotes", false, func(w http.ResponseWriter, r *http.Request) error {
		var q suanli.QuoteRequest
		if err := decodeRental(r, &q, &q.InstanceCreate); err != nil {
			return err
		}
		out, err := s.Service.Quote(r.Context(), q)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, out)
	}, unaudited) // a read sent with POST
	s.route("POST /v1/volumes", false, func(w http.ResponseWriter, r *http.Request) error {
		var c suanli.VolumeCreate
		if err := decode(r, &c); err != nil {
			return err
		}
		v, err := s.Service.CreateVolume(r.Context(), c)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, v)
	})
	s.route("GET /v1/volumes", false, func(w http.ResponseWriter, r *http.Request) error {
		vs, err := s.Service.FindVolumes(r.Context(), r.URL.Query().Get("all") == "true")
		if err != nil {
			return err
		}
		return writeJSON(w, 200, VolumeList{Volumes: vs})
	})
	s.route("DELETE /v1/volumes/{name}", false, func(w http.ResponseWriter, r *http.Request) error {
		v, err := s.Service.DeleteVolume(r.Context(), r.PathValue("name"))
		if err != nil {
			return err
		}
		return writeJSON(w, 200, v)
	})
	s.route("GET /v1/budgets", false, func(w http.ResponseWriter, r *http.Request) error {
		bs, err := s.Service.FindBudgets(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, 200, BudgetList{Budgets: bs})
	})
	s.route("PUT /v1/budgets/{name}", false, func(w http.ResponseWriter, r *http.Request) error {
		var b suanli.Budget
		if err := decode(r, &b); err != nil {
			return err
		}
		b.Name = r.PathValue("name")
		out, err := s.Service.SetBudget(r.Context(), b)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, out)
	})
	s.route("DELETE /v1/budgets/{name}", false, func(w http.ResponseWriter, r *http.Request) error {
		if err := s.Service.DeleteBudget(r.Context(), r.PathValue("name")); err != nil {
			return err
		}
		return writeJSON(w, 200, map[string]bool{"deleted": true})
	})
	s.route("GET /v1/alerts", false, func(w http.ResponseWriter, r *http.Request) error {
		limit, err := queryInt(r, "limit")
		if err != nil {
			return err
		}
		as, err := s.Service.FindAlerts(r.Context(), int(limit))
		if err != nil {
			return err
		}
		return writeJSON(w, 200, AlertList{Alerts: as})
	})
	s.route("GET /v1/billing/invoices/{month}", false, func(w http.ResponseWriter, r *http.Request) error {
		inv, err := s.Service.Invoice(r.Context(), r.PathValue("month"))
		if err != nil {
			return err
		}
		if r.URL.Query().Get("format") == "csv" {
			w.Header().Set("Content-Type", "text/csv; charset=utf-8")
			w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="suanli-invoice-%s.csv"`, inv.Month))
			return WriteInvoiceCSV(w, inv)
		}
		return writeJSON(w, 200, inv)
	})
	s.route("GET /v1/billing/report", false, func(w http.ResponseWriter, r *http.Request) error {
		since, err := sinceParam(r, 30*24*time.Hour)
		if err != nil {
			return err
		}
		by := r.URL.Query().Get("by")
		if by == "" {
			by = "project"
		}
		rep, err := s.Service.CostReport(r.Context(), by, since)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, rep)
	})
	s.route("GET /v1/host/earnings", false, func(w http.ResponseWriter, r *http.Request) error {
		since, err := sinceParam(r, 30*24*time.Hour)
		if err != nil {
			return err
		}
		e, err := s.Service.Earnings(r.Context(), since, s.Service.Now().Add(time.Second))
		if err != nil {
			return err
		}
		return writeJSON(w, 200, e)
	})
	s.route("POST /v1/host/payouts", false, func(w http.ResponseWriter, r *http.Request) error {
		var p PayoutRequest
		if err := decode(r, &p); err != nil {
			return err
		}
		if p.Amount < 0 {
			return suanli.FieldErrorf("amount", "must not be negative")
		}
		e, err := s.Service.Payout(r.Context(), p.Amount)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, e)
	})
}

// sinceParam reads ?since= as a duration back ("30d", "12h") or a date.
func sinceParam(r *http.Request, def time.Duration) (time.Time, error) {
	v := r.URL.Query().Get("since")
	now := time.Now().UTC()
	if v == "" {
		return now.Add(-def), nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := suanli.ParseDuration(v)
	if err != nil || d <= 0 {
		return time.Time{}, suanli.FieldErrorf("since", "%q: give a span like 30d or 12h, or a date like 2026-11-01", v)
	}
	return now.Add(-d), nil
}

// WriteInvoiceCSV writes an invoice as CSV, amounts in currency units.
func WriteInvoiceCSV(w http.ResponseWriter, inv *suanli.Invoice) error {
	c := csv.NewWriter(w)
	c.Write([]string{"month", "instance_id", "label", "project", "kind", "quantity", "amount"})
	for _, l := range inv.Lines {
		c.Write([]string{inv.Month, strconv.FormatInt(l.InstanceID, 10), l.Label, l.Project, l.Kind, l.Quantity, l.Amount.Decimal()})
	}
	c.Write([]string{inv.Month, "", "", "", "credits", "", inv.Credits.Decimal()})
	c.Write([]string{inv.Month, "", "", "", "total", "", inv.Total.Decimal()})
	c.Flush()
	return c.Error()
}
