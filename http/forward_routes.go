package http

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/suanli/suanli"
)

func init() {
	apiOps = append(apiOps,
		apiOp{"POST", "/v1/windows", "Publish a window of future capacity on one of your machines.", suanli.WindowCreate{}, suanli.Window{}},
		apiOp{"GET", "/v1/windows", "Your windows that have not ended: machine_id narrows.", nil, []suanli.Window{}},
		apiOp{"DELETE", "/v1/windows/{id}", "Withdraw a window: it takes no more bookings; those made stand.", nil, suanli.Window{}},
		apiOp{"GET", "/v1/windows/search", "Open windows with free GPUs: q is the offer query plus start, end and hours.", nil, []suanli.Window{}},
		apiOp{"POST", "/v1/bookings", "Book part of a window (window_id, or query: the cheapest open window matching) at its price, locked now; the cost is held in escrow.", suanli.BookingCreate{}, suanli.Booking{}},
		apiOp{"GET", "/v1/bookings", "Your bookings.", nil, []suanli.Booking{}},
		apiOp{"GET", "/v1/bookings/{id}", "One booking (yours, or one on your machine).", nil, suanli.Booking{}},
		apiOp{"DELETE", "/v1/bookings/{id}", "Cancel a booking before its start: full refund before the provider's deadline, less its fee after.", nil, suanli.Booking{}},
		apiOp{"GET", "/v1/machines/{id}/calendar", "A machine's windows, bookings and open-ended rentals from now on.", nil, []suanli.CalendarEntry{}},
	)
}

func (s *Server) registerForwardRoutes() {
	s.route("POST /v1/windows", false, func(w http.ResponseWriter, r *http.Request) error {
		var c suanli.WindowCreate
		if err := decode(r, &c); err != nil {
			return err
		}
		win, err := s.Service.CreateWindow(r.Context(), c)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, win)
	})
	s.route("GET /v1/windows", false, func(w http.ResponseWriter, r *http.Request) error {
		var machine int64
		if v := r.URL.Query().Get("machine_id"); v != "" {
			var err error
			if machine, err = strconv.ParseInt(v, 10, 64); err != nil {
				return suanli.FieldErrorf("machine_id", "%q is not a machine id", v)
			}
		}
		ws, err := s.Service.HostWindows(r.Context(), machine)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, ws)
	})
	s.route("DELETE /v1/windows/{id}", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		win, err := s.Service.WithdrawWindow(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, win)
	})
	s.route("GET /v1/windows/search", false, func(w http.ResponseWriter, r *http.Request) error {
		q := suanli.WindowSearch{Query: r.URL.Query().Get("q")}
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return suanli.FieldErrorf("limit", "%q: give a whole number", v)
			}
			q.Limit = n
		}
		ws, err := s.Service.SearchWindows(r.Context(), q)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, ws)
	})
	s.route("POST /v1/bookings", false, func(w http.ResponseWriter, r *http.Request) error {
		var c suanli.BookingCreate
		if err := decode(r, &c); err != nil {
			return err
		}
		b, err := s.Service.CreateBooking(r.Context(), c)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, b)
	})
	s.route("GET /v1/bookings", false, func(w http.ResponseWriter, r *http.Request) error {
		bs, err := s.Service.FindBookings(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, 200, bs)
	})
	s.route("GET /v1/bookings/{id}", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		b, err := s.Service.FindBookingByID(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, b)
	})
	s.route("DELETE /v1/bookings/{id}", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		b, err := s.Service.CancelBooking(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, b)
	})
	s.route("GET /v1/machines/{id}/calendar", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		es, err := s.Service.MachineCalendar(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, es)
	})
}

// CreateWindow publishes a window of future capacity.
func (c *Client) CreateWindow(ctx context.Context, wc suanli.WindowCreate) (*suanli.Window, error) {
	var w suanli.Window
	return &w, c.do(ctx, c.HTTP, http.MethodPost, "/v1/windows", wc, &w)
}

// HostWindows lists the caller's windows (on one machine when machineID is not 0).
func (c *Client) HostWindows(ctx context.Context, machineID int64) ([]*suanli.Window, error) {
	var ws []*suanli.Window
	path := "/v1/windows"
	if machineID != 0 {
		path += fmt.Sprintf("?machine_id=%d", machineID)
	}
	err := c.get(ctx, path, &ws)
	return ws, err
}

// WithdrawWindow withdraws one of the caller's windows.
func (c *Client) WithdrawWindow(ctx context.Context, id int64) (*suanli.Window, error) {
	var w suanli.Window
	return &w, c.do(ctx, c.HTTP, http.MethodDelete, fmt.Sprintf("/v1/windows/%d", id), nil, &w)
}

// SearchWindows finds open windows.
func (c *Client) SearchWindows(ctx context.Context, q suanli.WindowSearch) ([]*suanli.Window, error) {
	var ws []*suanli.Window
	v := url.Values{"q": {q.Query}}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	err := c.get(ctx, "/v1/windows/search?"+v.Encode(), &ws)
	return ws, err
}

// CreateBooking books part of a window.
func (c *Client) CreateBooking(ctx context.Context, bc suanli.BookingCreate) (*suanli.Booking, error) {
	var b suanli.Booking
	return &b, c.do(ctx, c.HTTP, http.MethodPost, "/v1/bookings", bc, &b)
}

// FindBookings lists the caller's bookings.
func (c *Client) FindBookings(ctx context.Context) ([]*suanli.Booking, error) {
	var bs []*suanli.Booking
	err := c.get(ctx, "/v1/bookings", &bs)
	return bs, err
}

// FindBookingByID returns one booking.
func (c *Client) FindBookingByID(ctx context.Context, id int64) (*suanli.Booking, error) {
	var b suanli.Booking
	return &b, c.get(ctx, fmt.Sprintf("/v1/bookings/%d", id), &b)
}

// CancelBooking cancels a booking before its start.
func (c *Client) CancelBooking(ctx context.Context, id int64) (*suanli.Booking, error) {
	var b suanli.Booking
	return &b, c.do(ctx, c.HTTP, http.MethodDelete, fmt.Sprintf("/v1/bookings/%d", id), nil, &b)
}

// MachineCalendar returns a machine's calendar.
func (c *Client) MachineCalendar(ctx context.Context, id int64) ([]suanli.CalendarEntry, error) {
	var es []suanli.CalendarEntry
	err := c.get(ctx, fmt.Sprintf("/v1/machines/%d/calendar", id), &es)
	return es, err
}

func init() {
	apiOps = append(apiOps,
		apiOp{"POST", "/v1/deferred", "Run a job whenever it is cheapest before a deadline: books the cheapest window, or runs now.", suanli.DeferredCreate{}, suanli.DeferredPlan{}},
		apiOp{"POST", "/v1/schedules", "A recurring rental: a cron schedule whose runs are booked a day ahead.", suanli.Schedule{}, suanli.Schedule{}},
		apiOp{"GET", "/v1/schedules", "Your recurring rentals with their next run.", nil, []suanli.Schedule{}},
		apiOp{"DELETE", "/v1/schedules/{id}", "Stop a recurring rental (booked runs stand).", nil, nil},
	)
}

func (s *Server) registerDeferredRoutes() {
	s.route("POST /v1/deferred", false, func(w http.ResponseWriter, r *http.Request) error {
		var c suanli.DeferredCreate
		if err := decode(r, &c); err != nil {
			return err
		}
		plan, err := s.Service.CreateDeferred(r.Context(), c)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, plan)
	})
	s.route("POST /v1/schedules", false, func(w http.ResponseWriter, r *http.Request) error {
		var sc suanli.Schedule
		if err := decode(r, &sc); err != nil {
			return err
		}
		out, err := s.Service.CreateSchedule(r.Context(), sc)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, out)
	})
	s.route("GET /v1/schedules", false, func(w http.ResponseWriter, r *http.Request) error {
		scs, err := s.Service.FindSchedules(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, 200, scs)
	})
	s.route("DELETE /v1/schedules/{id}", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		if err := s.Service.CancelSchedule(r.Context(), id); err != nil {
			return err
		}
		return writeJSON(w, 200, map[string]bool{"cancelled": true})
	})
}

// CreateDeferred plans a deferred job.
func (c *Client) CreateDeferred(ctx context.Context, d suanli.DeferredCreate) (*suanli.DeferredPlan, error) {
	var p suanli.DeferredPlan
	return &p, c.do(ctx, c.HTTP, http.MethodPost, "/v1/deferred", d, &p)
}

// CreateSchedule creates a recurring rental.
func (c *Client) CreateSchedule(ctx context.Context, sc suanli.Schedule) (*suanli.Schedule, error) {
	var out suanli.Schedule
	return &out, c.do(ctx, c.HTTP, http.MethodPost, "/v1/schedules", sc, &out)
}

// FindSchedules lists recurring rentals.
func (c *Client) FindSchedules(ctx context.Context) ([]*suanli.Schedule, error) {
	var out []*suanli.Schedule
	err := c.get(ctx, "/v1/schedules", &out)
	return out, err
}

// CancelSchedule stops a recurring rental.
func (c *Client) CancelSchedule(ctx context.Context, id int64) error {
	return c.do(ctx, c.HTTP, http.MethodDelete, fmt.Sprintf("/v1/schedules/%d", id), nil, nil)
}
