package http

import (
	"net/http"
	"time"

	"github.com/suanli/suanli"
)

// BidRequest is the body of POST /v1/instances/{id}/bid.
type BidRequest struct {
	Bid suanli.Money `json:"bid"` // per hour for the whole instance
}

// ReserveRequest is the body of POST /v1/instances/{id}/reservation.
type ReserveRequest struct {
	Days int `json:"days"`
}

func init() {
	apiOps = append(apiOps,
		apiOp{"POST", "/v1/fleets", "Rent several instances in one request, on an offer or on the offers a query picks (all or nothing on request).", suanli.FleetCreate{}, suanli.FleetResult{}},
		apiOp{"POST", "/v1/instances/{id}/bid", "Change an interruptible instance's bid (compute settles at the old bid first).", BidRequest{}, suanli.Instance{}},
		apiOp{"POST", "/v1/instances/{id}/recreate", "Create a new instance like this one on another host.", suanli.Recreate{}, suanli.RecreateResult{}},
		apiOp{"GET", "/v1/instances/{id}/reservation", "The instance's active reservation.", nil, suanli.Reservation{}},
		apiOp{"POST", "/v1/instances/{id}/reservation", "Prepay days of an on-demand instance at the host's discount.", ReserveRequest{}, suanli.Reservation{}},
		apiOp{"DELETE", "/v1/instances/{id}/reservation", "Cancel the reservation early: refund the unused part minus the discount received and the host's fee.", nil, suanli.Reservation{}},
		apiOp{"GET", "/v1/market/prices", "Price history of GPU models: q (gpu_name=H100), since (RFC 3339), buckets.", nil, suanli.PriceStats{}},
	)
}

func (s *Server) registerMarketRoutes() {
	s.route("POST /v1/fleets", false, func(w http.ResponseWriter, r *http.Request) error {
		var fc suanli.FleetCreate
		if err := decodeRental(r, &fc, &fc.InstanceCreate); err != nil {
			return err
		}
		res, err := s.Service.CreateFleet(r.Context(), fc)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, res)
	})
	s.route("POST /v1/instances/{id}/start", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		var opt suanli.StartOptions
		if r.ContentLength != 0 {
			if err := decode(r, &opt); err != nil {
				return err
			}
		}
		in, err := s.Service.StartInstanceWith(r.Context(), id, opt)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, in)
	})
	s.route("POST /v1/instances/{id}/bid", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		var b BidRequest
		if err := decode(r, &b); err != nil {
			return err
		}
		in, err := s.Service.ChangeBid(r.Context(), id, b.Bid)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, in)
	})
	s.route("POST /v1/instances/{id}/recreate", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		var rc suanli.Recreate
		if r.ContentLength != 0 {
			if err := decode(r, &rc); err != nil {
				return err
			}
		}
		res, err := s.Service.RecreateInstance(r.Context(), id, rc)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, res)
	})
	s.route("GET /v1/instances/{id}/reservation", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		if _, err := s.Service.FindInstanceByID(r.Context(), id); err != nil {
			return err
		}
		res, err := s.Service.Store.ActiveReservation(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, res)
	})
	s.route("POST /v1/instances/{id}/reservation", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		var rr ReserveRequest
		if err := decode(r, &rr); err != nil {
			return err
		}
		res, err := s.Service.ReserveInstance(r.Context(), id, rr.Days)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, res)
	})
	s.route("DELETE /v1/instances/{id}/reservation", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		res, err := s.Service.CancelReservation(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, res)
	})
	s.route("GET /v1/market/prices", false, func(w http.ResponseWriter, r *http.Request) error {
		q := suanli.PriceQuery{Query: r.URL.Query().Get("q")}
		if v := r.URL.Query().Get("since"); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return suanli.FieldErrorf("since", "%q: give an RFC 3339 time (2026-11-22T00:00:00Z)", v)
			}
			q.Since = t
		}
		n, err := queryInt(r, "buckets")
		if err != nil {
			return err
		}
		q.Buckets = int(n)
		st, err := s.Service.MarketPrices(r.Context(), q)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, st)
	})
}
