package http

import (
	"context"
	"net/http"
	"time"

	"github.com/suanli/suanli"
)

func (s *Server) registerAccountRoutes() {
	s.route("GET /v1/me", false, func(w http.ResponseWriter, r *http.Request) error {
		a, err := s.Service.Me(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, 200, a)
	})
	s.route("PUT /v1/me/residency", false, func(w http.ResponseWriter, r *http.Request) error {
		var u suanli.ResidencyUpdate
		if err := decode(r, &u); err != nil {
			return err
		}
		a, err := s.Service.SetResidency(r.Context(), u)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, a)
	})
	s.route("POST /v1/admin/accounts", false, func(w http.ResponseWriter, r *http.Request) error {
		var c suanli.AccountCreate
		if err := decode(r, &c); err != nil {
			return err
		}
		a, err := s.Service.CreateAccount(r.Context(), c)
		if err != nil {
			return err
		}
		setAuditTarget(r, "account %d", a.Account.ID)
		return writeJSON(w, http.StatusCreated, a)
	}, limited)
	s.route("GET /v1/admin/accounts", false, func(w http.ResponseWriter, r *http.Request) error {
		as, err := s.Service.FindAccounts(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, 200, AccountList{Accounts: as})
	})
}

// AccountList is the reply of GET /v1/admin/accounts.
type AccountList struct {
	Accounts []*suanli.Account `json:"accounts"`
}

func (s *Server) registerOfferRoutes() {
	s.route("POST /v1/offers/search", false, s.handleOfferSearch, unaudited)
	s.route("GET /v1/offers", false, s.handleOfferSearch)
	s.route("GET /v1/offers/{id}", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		o, err := s.Service.FindOfferByID(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, o)
	})
}

func (s *Server) handleOfferSearch(w http.ResponseWriter, r *http.Request) error {
	var q suanli.OfferQuery
	if r.Method == http.MethodPost {
		if err := decode(r, &q); err != nil {
			return err
		}
	} else {
		v := r.URL.Query()
		q.Query, q.Order, q.Explain = v.Get("q"), v.Get("order"), v.Get("explain") == "true"
		limit, err := queryInt(r, "limit")
		if err != nil {
			return err
		}
		offset, err := queryInt(r, "offset")
		if err != nil {
			return err
		}
		q.Limit, q.Offset = int(limit), int(offset)
	}
	res, err := s.Service.SearchOffers(r.Context(), q)
	if err != nil {
		return err
	}
	return writeJSON(w, 200, res)
}

// InstanceList is the reply of GET /v1/instances.
type InstanceList struct {
	Instances []*suanli.Instance `json:"instances"`
	Total     int                `json:"total"`
}

func (s *Server) registerInstanceRoutes() {
	s.route("POST /v1/instances", false, func(w http.ResponseWriter, r *http.Request) error {
		var c suanli.InstanceCreate
		if err := decodeRental(r, &c, &c); err != nil {
			return err
		}
		in, err := s.Service.CreateInstance(r.Context(), c)
		if err != nil {
			return err
		}
		setAuditTarget(r, "instance %d", in.ID)
		return writeJSON(w, http.StatusCreated, in)
	})
	s.route("GET /v1/instances", false, func(w http.ResponseWriter, r *http.Request) error {
		f := suanli.InstanceFilter{}
		if r.URL.Query().Get("all") != "true" {
			live := true
			f.Live = &live
		}
		limit, err := queryInt(r, "limit")
		if err != nil {
			return err
		}
		f.Limit = int(limit)
		ins, n, err := s.Service.FindInstances(r.Context(), f)
		if err != nil {
			return err
		}
		if ins == nil {
			ins = []*suanli.Instance{}
		}
		return writeJSON(w, 200, InstanceList{Instances: ins, Total: n})
	})
	s.route("GET /v1/instances/{id}", false, s.instanceAction(s.Service.FindInstanceByID, 200))
	s.route("POST /v1/instances/{id}/stop", false, s.instanceAction(s.Service.StopInstance, 200))
	s.route("DELETE /v1/instances/{id}", false, s.instanceAction(s.Service.DestroyInstance, 200))
	s.route("GET /v1/instances/{id}/logs", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		off, err := queryInt(r, "offset")
		if err != nil {
			return err
		}
		c, err := s.Service.InstanceLogs(r.Context(), id, off)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, c)
	})
	s.route("POST /v1/instances/{id}/progress", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		var p suanli.Progress
		if err := decode(r, &p); err != nil {
			return err
		}
		in, err := s.Service.ReportProgress(r.Context(), id, p)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, in)
	})
	s.route("POST /v1/instances/{id}/exec", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		var req ExecRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		res, err := s.Service.Exec(r.Context(), id, req.Cmd, time.Duration(req.TimeoutSeconds)*time.Second)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, res)
	})
	s.route("GET /v1/instances/{id}/events", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		if _, err := s.Service.FindInstanceByID(r.Context(), id); err != nil {
			return err
		}
		ev, err := s.Service.Store.InstanceEvents(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, map[string]any{"events": ev})
	})
}

func (s *Server) instanceAction(fn func(ctx context.Context, id int64) (*suanli.Instance, error), status int) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		in, err := fn(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, status, in)
	}
}

// ExecRequest is the body of POST /v1/instances/{id}/exec.
type ExecRequest struct {
	Cmd            []string `json:"cmd"`
	TimeoutSeconds int64    `json:"timeout_seconds,omitempty"`
}

// MachineList is the reply of GET /v1/machines.
type MachineList struct {
	Machines []*suanli.Machine `json:"machines"`
	Total    int               `json:"total"`
}

func (s *Server) registerMachineRoutes() {
	s.route("GET /v1/machines", false, func(w http.ResponseWriter, r *http.Request) error {
		ms, n, err := s.Service.FindMachines(r.Context(), suanli.MachineFilter{})
		if err != nil {
			return err
		}
		if ms == nil {
			ms = []*suanli.Machine{}
		}
		return writeJSON(w, 200, MachineList{Machines: ms, Total: n})
	})
	s.route("GET /v1/machines/{id}", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		m, err := s.Service.FindMachineByID(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, m)
	})
	s.route("PUT /v1/machines/{id}/listing", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		var u suanli.ListingUpdate
		if err := decode(r, &u); err != nil {
			return err
		}
		m, err := s.Service.ListMachine(r.Context(), id, u)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, m)
	})
	s.route("DELETE /v1/machines/{id}/listing", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		m, err := s.Service.UnlistMachine(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, m)
	})
	s.route("POST /v1/join-tokens", false, func(w http.ResponseWriter, r *http.Request) error {
		var req struct {
			TTLSeconds int64 `json:"ttl_seconds"`
		}
		if r.ContentLength != 0 {
			if err := decode(r, &req); err != nil {
				return err
			}
		}
		t, err := s.Service.CreateJoinToken(r.Context(), time.Duration(req.TTLSeconds)*time.Second)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, t)
	}, limited)
}

// QuotaRequest is the body of PUT /v1/admin/quota.
type QuotaRequest struct {
	AccountID int64 `json:"account_id"`
	GPUs      int   `json:"gpus"`
	Instances int   `json:"instances"`
}

// CreditRequest is the body of POST /v1/admin/credit.
type CreditRequest struct {
	AccountID int64        `json:"account_id"`
	Amount    suanli.Money `json:"amount"`
	Memo      string       `json:"memo,omitempty"`
}

func (s *Server) registerBillingRoutes() {
	s.route("GET /v1/billing/balance", false, func(w http.ResponseWriter, r *http.Request) error {
		b, err := s.Service.Balance(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, 200, b)
	})
	s.route("GET /v1/billing/charges", false, func(w http.ResponseWriter, r *http.Request) error {
		f := suanli.ChargeFilter{}
		id, err := queryInt(r, "instance_id")
		if err != nil {
			return err
		}
		if id != 0 {
			f.InstanceID = &id
		}
		limit, err := queryInt(r, "limit")
		if err != nil {
			return err
		}
		f.Limit = int(limit)
		sum, err := s.Service.FindCharges(r.Context(), f)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, sum)
	})
	s.route("PUT /v1/admin/quota", false, func(w http.ResponseWriter, r *http.Request) error {
		var q QuotaRequest
		if err := decode(r, &q); err != nil {
			return err
		}
		if q.AccountID <= 0 {
			return suanli.FieldErrorf("account_id", "give the account's id")
		}
		if err := s.Service.SetQuota(r.Context(), q.AccountID, suanli.Quota{GPUs: q.GPUs, Instances: q.Instances}); err != nil {
			return err
		}
		return writeJSON(w, 200, q)
	})
	s.route("POST /v1/admin/credit", false, func(w http.ResponseWriter, r *http.Request) error {
		var c CreditRequest
		if err := decode(r, &c); err != nil {
			return err
		}
		if c.AccountID <= 0 {
			return suanli.FieldErrorf("account_id", "give the account's id")
		}
		b, err := s.Service.Credit(r.Context(), c.AccountID, c.Amount, c.Memo)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, b)
	})
}

func (s *Server) registerAgentRoutes() {
	s.route("POST /v1/agent/join", true, func(w http.ResponseWriter, r *http.Request) error {
		var j suanli.JoinRequest
		if err := decode(r, &j); err != nil {
			return err
		}
		resp, err := s.Service.Join(r.Context(), j)
		if err != nil {
			return err
		}
		setAuditTarget(r, "machine %d", resp.MachineID)
		return writeJSON(w, http.StatusCreated, resp)
	}, limited)
	s.route("POST /v1/agent/sync", false, func(w http.ResponseWriter, r *http.Request) error {
		var req suanli.SyncRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		if req.SSH != nil && req.SSH.Host == "" {
			req.SSH.Host = clientIP(r) // the agent advertises no address: use the one it syncs from
		}
		resp, err := s.Service.Sync(r.Context(), &req)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, resp)
	}, unaudited)
}
