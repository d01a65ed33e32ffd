package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// The forward market's pages: renters search windows of future capacity
// and book them (the price locked now, the cost held in escrow), list their
// bookings and cancel them; providers see each machine's calendar. The
// rules (what a window offers, what a booking costs, what a cancel refunds)
// are the control plane's: SearchWindows, CreateBooking, FindBookings,
// CancelBooking and MachineCalendar.

func (c *Console) registerForwardRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /windows", c.page(c.handleWindows))
	mux.HandleFunc("POST /windows/book", c.form(c.handleBook))
	mux.HandleFunc("GET /bookings", c.page(c.handleBookings))
	mux.HandleFunc("GET /bookings/{id}", c.page(c.handleBooking))
	mux.HandleFunc("POST /bookings/{id}/cancel", c.form(c.handleBookingCancel))
	mux.HandleFunc("GET /hosts/{id}/calendar", c.page(c.handleCalendar))
}

// windowResults bounds the windows one search shows.
const windowResults = 100

// bookInputs are the booking form's inputs, as typed; names are the API's
// BookingCreate fields, so that an error's Field marks the input.
type bookInputs struct {
	Window, Start, Hours, GPUs, Bid, Image, Cmd string
}

func readBookInputs(v url.Values) bookInputs {
	return bookInputs{Window: v.Get("window_id"), Start: v.Get("start"), Hours: v.Get("hours"), GPUs: v.Get("gpus"),
		Bid: v.Get("bid"), Image: v.Get("image"), Cmd: v.Get("cmd")}
}

// parseWhen reads a time input: RFC 3339, or the browser's datetime-local
// form (2026-12-01T09:00, taken as UTC); empty is the zero time.
func parseWhen(field, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, suanli.FieldErrorf(field, "%q is not a time: give 2026-12-01T09:00 (UTC) or RFC 3339", s)
}

// create turns the inputs into a booking request. Errors are EINVALID
// naming the input; the service checks the rest (window, times, GPUs, bid).
func (in bookInputs) create() (suanli.BookingCreate, error) {
	b := suanli.BookingCreate{Image: strings.TrimSpace(in.Image)}
	id, err := parseInt("window_id", in.Window, 0)
	if err != nil {
		return b, err
	}
	if id <= 0 {
		return b, suanli.FieldErrorf("window_id", "choose a window to book (search for one above)")
	}
	b.WindowID = id
	if b.Start, err = parseWhen("start", in.Start); err != nil {
		return b, err
	}
	hours, err := parseInt("hours", in.Hours, 0)
	if err != nil {
		return b, err
	}
	if hours < 0 {
		return b, suanli.FieldErrorf("hours", "%d: give how many hours to book, or leave it empty for the rest of the window", hours)
	}
	b.Hours = int(hours)
	gpus, err := parseInt("gpus", in.GPUs, 0)
	if err != nil {
		return b, err
	}
	if gpus < 0 {
		return b, suanli.FieldErrorf("gpus", "%d: give how many GPUs, or leave it empty for every free GPU", gpus)
	}
	b.GPUs = int(gpus)
	if t := strings.TrimSpace(in.Bid); t != "" {
		if b.Bid, err = suanli.ParseMoney(t); err != nil {
			return b, suanli.FieldErrorf("bid", "%v", err)
		}
	}
	if cmd := strings.TrimSpace(in.Cmd); cmd != "" {
		b.Cmd = []string{"sh", "-c", strings.ReplaceAll(cmd, "\r\n", "\n")}
	}
	return b, nil
}

// windowsPage is the windows template's data.
type windowsPage struct {
	Query    string
	Windows  []*suanli.Window
	QueryErr *fieldError // the search's error
	In       bookInputs
	Error    *fieldError // the booking form's error
	Now      time.Time
}

// windowsPage searches the windows matching query; a query error is shown
// on the page (with the status it maps to), not as an error page.
func (c *Console) windowsPage(r *http.Request, query string) (*windowsPage, int, error) {
	p := &windowsPage{Query: query, Now: c.now()}
	ws, err := c.svc.SearchWindows(r.Context(), suanli.WindowSearch{Query: query, Limit: windowResults})
	if err != nil {
		if p.QueryErr = formError(err); p.QueryErr == nil {
			return nil, 0, err
		}
		if p.QueryErr.Field == "" {
			p.QueryErr.Field = "q"
		}
		return p, statusOf(err), nil
	}
	p.Windows = ws
	return p, http.StatusOK, nil
}

// handleWindows searches open windows with the window query language
// (?q=gpu_name=RTX_4090 start>=2026-12-01T00:00Z hours>=8) and shows the
// booking form; ?book=ID preselects a window.
func (c *Console) handleWindows(w http.ResponseWriter, r *http.Request, s *session) error {
	q := r.URL.Query()
	p, status, err := c.windowsPage(r, strings.TrimSpace(q.Get("q")))
	if err != nil {
		return err
	}
	p.In = bookInputs{Window: q.Get("book"), Image: "ubuntu:24.04"}
	c.render(w, r, status, "windows.html", &view{Title: "Windows", Nav: "windows", sess: s, Notice: notice(r), Page: p})
	return nil
}

// handleBook books a window; errors come back on the form with the
// search kept, success goes to the booking's page.
func (c *Console) handleBook(w http.ResponseWriter, r *http.Request, s *session) error {
	in := readBookInputs(r.PostForm)
	auditTarget(r, "window "+strings.TrimSpace(in.Window))
	req, err := in.create()
	var b *suanli.Booking
	if err == nil {
		b, err = c.svc.CreateBooking(r.Context(), req)
	}
	if err != nil {
		fe := formError(err)
		if fe == nil {
			return err
		}
		p, _, perr := c.windowsPage(r, strings.TrimSpace(r.PostFormValue("q")))
		if perr != nil {
			return perr
		}
		p.In, p.Error = in, fe
		c.render(w, r, statusOf(err), "windows.html", &view{Title: "Windows", Nav: "windows", sess: s, Page: p})
		return nil
	}
	c.log.Info("console window booked", "booking_id", b.ID, "window_id", b.WindowID, "account_id", s.accountID)
	redirect(w, r, withNotice("/bookings/"+strconv.FormatInt(b.ID, 10), "booked"))
	return nil
}

// bookingRow is one booking with what cancelling it now would do.
type bookingRow struct {
	B         *suanli.Booking
	CanCancel bool
	Fee       suanli.Money // kept by the provider if cancelled now
	Refund    suanli.Money // back to the balance if cancelled now
	Confirm   string       // what cancelling does, for the dialog
}

func (c *Console) bookingRow(b *suanli.Booking) bookingRow {
	row := bookingRow{B: b, CanCancel: b.Status == suanli.BookingBooked}
	if row.CanCancel {
		row.Fee, row.Refund = b.CancelSettlement(c.now())
		row.Confirm = bookingCancelText(b, row.Fee, row.Refund)
	}
	return row
}

// bookingCancelText says what cancelling a booking now does.
func bookingCancelText(b *suanli.Booking, fee, refund suanli.Money) string {
	t := "Cancel booking " + strconv.FormatInt(b.ID, 10) + " (" + strconv.Itoa(b.GPUs) + " GPUs on machine " + strconv.FormatInt(b.MachineID, 10) +
		" from " + b.Start.UTC().Format("2006-01-02 15:04 UTC") + ")? "
	if fee == 0 {
		return t + "It is before the provider's deadline: all " + refund.String() + " goes back from escrow to your balance."
	}
	return t + "The free-cancel deadline has passed: the provider keeps a fee of " + fee.String() + " and " + refund.String() +
		" goes back to your balance. This cannot be undone."
}

// bookingsPage is the bookings template's data.
type bookingsPage struct {
	Bookings []bookingRow
	Escrow   suanli.Money // held now for bookings not yet delivered
}

// handleBookings lists the caller's bookings, earliest start first, with
// the escrow they hold and a cancel for those not started.
func (c *Console) handleBookings(w http.ResponseWriter, r *http.Request, s *session) error {
	bs, err := c.svc.FindBookings(r.Context())
	if err != nil {
		return err
	}
	p := &bookingsPage{}
	for _, b := range bs {
		p.Bookings = append(p.Bookings, c.bookingRow(b))
		if b.Status == suanli.BookingBooked || b.Status == suanli.BookingRunning {
			p.Escrow += b.Cost
		}
	}
	c.render(w, r, http.StatusOK, "bookings.html", &view{Title: "Bookings", Nav: "bookings", sess: s, Notice: notice(r), Page: p})
	return nil
}

// handleBooking shows one booking: its window, the price locked, the
// escrow, the cancel terms and why it was booked this way.
func (c *Console) handleBooking(w http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "booking")
	if err != nil {
		return err
	}
	b, err := c.svc.FindBookingByID(r.Context(), id)
	if err != nil {
		return err
	}
	row := c.bookingRow(b)
	c.render(w, r, http.StatusOK, "booking.html", &view{Title: "Booking " + strconv.FormatInt(id, 10), Nav: "bookings", sess: s,
		Notice: notice(r), Page: struct {
			bookingRow
			Mine bool // the caller booked it (a provider may read the bookings of its machines)
		}{row, b.AccountID == s.accountID}})
	return nil
}

// handleBookingCancel cancels a booking once confirmed.
func (c *Console) handleBookingCancel(w http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "booking")
	if err != nil {
		return err
	}
	auditTarget(r, "booking "+strconv.FormatInt(id, 10))
	if !confirmed(r) {
		b, err := c.svc.FindBookingByID(r.Context(), id)
		if err != nil {
			return err
		}
		if b.AccountID != s.accountID {
			return suanli.Errorf(suanli.ENOTFOUND, "booking %d not found", id)
		}
		row := c.bookingRow(b)
		if !row.CanCancel {
			return suanli.Errorf(suanli.ECONFLICT, "booking %d is %s: only a booking that has not started can be cancelled", id, b.Status)
		}
		c.confirm(w, r, s, "bookings", confirmPage{Heading: "Cancel booking " + strconv.FormatInt(id, 10) + "?", Text: row.Confirm,
			Post: "/bookings/" + strconv.FormatInt(id, 10) + "/cancel", Back: "/bookings", Label: "Cancel booking", Danger: row.Fee > 0})
		return nil
	}
	b, err := c.svc.CancelBooking(r.Context(), id)
	if err != nil {
		return err
	}
	c.log.Info("console booking cancelled", "booking_id", b.ID, "refund", b.Refund.String(), "account_id", s.accountID)
	redirect(w, r, withNotice("/bookings", "bookingcancelled"))
	return nil
}
