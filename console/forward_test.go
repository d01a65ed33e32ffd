package console_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// mustWindow publishes a window on machine mid for the provider: gpus GPUs
// at price per GPU-hour from start for hours, free to cancel until a day
// before a booking's start, a 25% fee after.
func (m *market) mustWindow(t *testing.T, mid int64, gpus int, price suanli.Money, start time.Time, hours int) *suanli.Window {
	t.Helper()
	w, err := m.svc.CreateWindow(as(m.providerID), suanli.WindowCreate{MachineID: mid, GPUs: gpus, Start: start, End: start.Add(time.Duration(hours) * time.Hour),
		PriceGPU: price, CancelBefore: 24 * time.Hour, CancelFeeBP: 2500})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestForwardMarketPages: a renter searches windows with the window query
// language, books one through the form (the price locked, the cost in
// escrow, shown on the booking's page), sees it with the others (a note
// says why one booked by query was chosen) and cancels one after asking;
// the provider sees both on the machine's calendar, by day; nobody else
// sees that calendar or those bookings.
func TestForwardMarketPages(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	mid, _, _ := m.addMachine(machineSpec{host: "rig", gpus: "RTX 4090:4", region: "eu-west", price: 400_000, minBid: 200_000})
	other, _, _ := m.addMachine(machineSpec{host: "small", gpus: "RTX 3090:1", region: "us-east", price: 200_000, minBid: 100_000})
	start := time.Now().UTC().Add(72 * time.Hour).Truncate(time.Hour)
	w := m.mustWindow(t, mid, 2, suanli.Dollars(2), start, 8)
	m.mustWindow(t, other, 1, suanli.Dollars(1), start.Add(24*time.Hour), 4)

	b := m.browser()
	tok := b.signIn(m.renterKey)
	p := b.get("/windows")
	contains(t, p, `data-window="`+itoa(w.ID)+`"`, "RTX 3090", `aria-current="page">Windows`)
	q := "gpu_name=RTX_4090 start>=" + start.Add(-time.Hour).Format(time.RFC3339) + " hours>=8"
	p = b.get("/windows?q=" + url.QueryEscape(q))
	if p.status != http.StatusOK || !strings.Contains(p.body, `data-window="`+itoa(w.ID)+`"`) || strings.Contains(p.body, "RTX 3090") {
		t.Errorf("search %q: %d, want window %d only\n%s", q, p.status, w.ID, p.body)
	}
	contains(t, p, "$2.00<span class=\"muted small\">/GPU-h", "2 of 2", "then 25% fee")
	p = b.get("/windows?q=" + url.QueryEscape("hours>=lots"))
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, `id="windows-error"`) || !marked(p.body, "q") {
		t.Errorf("a bad window query: %d, want 400 on the page with the query marked\n%s", p.status, p.body)
	}
	// ?book=ID preselects the window in the form.
	contains(t, b.get("/windows?book="+itoa(w.ID)), `<option value="`+itoa(w.ID)+`" selected>`)

	// Book through the form: 1 GPU for 3 hours from the window's start.
	bal := func() suanli.Money {
		bl, err := m.svc.Balance(as(m.renterID))
		if err != nil {
			t.Fatal(err)
		}
		return bl.Balance
	}
	before := bal()
	p = b.post("/windows/book", url.Values{"csrf": {tok}, "window_id": {itoa(w.ID)}, "hours": {"3"}, "gpus": {"1"}, "image": {"busybox"}, "cmd": {"sleep 60"}})
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/bookings/") || !strings.HasSuffix(p.location, "notice=booked") {
		t.Fatalf("book: %d %q\n%s", p.status, p.location, p.body)
	}
	if got := before - bal(); got != suanli.Dollars(6) {
		t.Errorf("booking moved %s from the balance, want $6.00 (3 h × 1 GPU × $2.00)", got)
	}
	p = b.get(p.location)
	contains(t, p, "Booked: the price is locked", `id="booking-price">$2.00 per GPU-hour, locked when booked`,
		`id="booking-escrow">$6.00 held in escrow`, `id="booking-status">booked`, "Cancel booking")

	// A booking by query carries a note saying why that window.
	byQuery, err := m.svc.CreateBooking(as(m.renterID), suanli.BookingCreate{Query: "gpu_name=RTX_4090", Hours: 2, GPUs: 1,
		Start: start.Add(4 * time.Hour), Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if byQuery.Note == "" {
		t.Fatal("a booking by query has no note")
	}
	p = b.get("/bookings")
	contains(t, p, `data-booking="`+itoa(byQuery.ID)+`"`, html.EscapeString(byQuery.Note), "booked by window id", "$10.00 is held now", "$4.00")
	if !strings.Contains(p.body, "is held now") {
		t.Errorf("bookings page does not say what escrow holds\n%s", p.body)
	}

	// Cancel asks first (JavaScript off), then refunds in full before the deadline.
	cancel := "/bookings/" + itoa(byQuery.ID) + "/cancel"
	p = b.post(cancel, url.Values{"csrf": {tok}})
	if p.status != http.StatusOK || !strings.Contains(p.body, `name="confirmed" value="yes"`) || !strings.Contains(p.body, "all $4.00 goes back from escrow") {
		t.Errorf("unconfirmed cancel: %d\n%s", p.status, p.body)
	}
	if bk, _ := m.svc.FindBookingByID(as(m.renterID), byQuery.ID); bk.Status != suanli.BookingBooked {
		t.Fatalf("an unconfirmed cancel cancelled: %s", bk.Status)
	}
	p = b.post(cancel, url.Values{"csrf": {tok}, "confirmed": {"yes"}})
	if p.status != http.StatusSeeOther || p.location != "/bookings?notice=bookingcancelled" {
		t.Fatalf("cancel: %d %q\n%s", p.status, p.location, p.body)
	}
	if bk, _ := m.svc.FindBookingByID(as(m.renterID), byQuery.ID); bk.Status != suanli.BookingCancelled || bk.Refund != suanli.Dollars(4) {
		t.Errorf("after cancel: %s, refund %s, want cancelled with $4.00 back", bk.Status, bk.Refund)
	}
	contains(t, b.get(p.location), "Booking cancelled", "$4.00 refunded")
	if p := b.post(cancel, url.Values{"csrf": {tok}, "confirmed": {"yes"}}); p.status != http.StatusConflict || !strings.Contains(p.body, "only a booking that has not started") {
		t.Errorf("cancel twice: %d\n%s", p.status, p.body)
	}

	// The provider's calendar: the window and the live booking on their day.
	pv := m.browser()
	pv.signIn(m.providerKey)
	contains(t, pv.get("/hosts"), `href="/hosts/`+itoa(mid)+`/calendar"`)
	p = pv.get("/hosts/" + itoa(mid) + "/calendar")
	if p.status != http.StatusOK {
		t.Fatalf("calendar: %d\n%s", p.status, p.body)
	}
	live, err := m.svc.FindBookings(as(m.renterID))
	if err != nil {
		t.Fatal(err)
	}
	day := `data-day="` + start.Format(time.DateOnly) + `"`
	contains(t, p, day, "window "+itoa(w.ID)+": 2 GPUs at $2.00/GPU-h, open", "booking "+itoa(live[0].ID)+": 1 GPU at $2.00/GPU-h, booked, renter "+itoa(m.renterID),
		`class="cal-window"`, `class="cal-booking"`, `<svg class="chart calendar"`)
	if strings.Contains(p.body, "booking "+itoa(byQuery.ID)+": 1 GPU at $2.00/GPU-h, booked") {
		t.Errorf("the calendar shows the cancelled booking as booked")
	}
	// Nobody else's: the renter does not own the machine; the provider does
	// not see the renter's booking list or cancel its bookings.
	if p := b.get("/hosts/" + itoa(mid) + "/calendar"); p.status != http.StatusNotFound {
		t.Errorf("the renter's view of the provider's calendar: %d, want 404", p.status)
	}
	if p := pv.get("/bookings"); strings.Contains(p.body, `data-booking="`) {
		t.Errorf("the provider's bookings page lists the renter's bookings")
	}
	ptok := csrfOf(t, pv.get("/bookings"))
	if p := pv.post("/bookings/"+itoa(live[0].ID)+"/cancel", url.Values{"csrf": {ptok}, "confirmed": {"yes"}}); p.status != http.StatusNotFound {
		t.Errorf("the provider cancelling the renter's booking: %d, want 404", p.status)
	}
	// Pages need a session.
	anon := m.browser()
	for _, path := range []string{"/windows", "/bookings", "/bookings/" + itoa(live[0].ID), "/hosts/" + itoa(mid) + "/calendar"} {
		if r := anon.get(path); r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, "/signin") {
			t.Errorf("GET %s without a session: %d %q, want 303 to sign-in", path, r.status, r.location)
		}
	}
}

// TestBookFormErrorsNameTheField: a refused booking comes back as the
// windows page with the message and the input marked, and books nothing.
func TestBookFormErrorsNameTheField(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	mid, _, _ := m.addMachine(machineSpec{host: "rig", gpus: "RTX 4090:2", price: 400_000, minBid: 200_000})
	start := time.Now().UTC().Add(72 * time.Hour).Truncate(time.Hour)
	w := m.mustWindow(t, mid, 2, suanli.Dollars(2), start, 8)
	b := m.browser()
	tok := b.signIn(m.renterKey)
	id := itoa(w.ID)
	for _, c := range []struct {
		form   url.Values
		status int
		msg    string
		field  string
	}{
		{url.Values{"image": {"busybox"}}, 400, "choose a window to book", "window_id"},
		{url.Values{"window_id": {id}, "image": {"busybox"}, "start": {"tomorrow"}}, 400, "start: &#34;tomorrow&#34; is not a time", "start"},
		{url.Values{"window_id": {id}, "image": {"busybox"}, "hours": {"lots"}}, 400, "hours: &#34;lots&#34; is not a whole number", "hours"},
		{url.Values{"window_id": {id}, "image": {"busybox"}, "gpus": {"3"}}, 400, "window " + id + " offers 2 GPUs", "gpus"},
		{url.Values{"window_id": {id}, "image": {"busybox"}, "bid": {"1.50"}}, 400, "has a fixed price of $2.00/GPU-h", "bid"},
		{url.Values{"window_id": {id}, "image": {" "}}, 400, "must not be empty", "image"},
		{url.Values{"window_id": {id}, "image": {"busybox"}, "start": {start.Add(-time.Hour).Format("2006-01-02T15:04")}}, 400, "is outside it", "start"},
		{url.Values{"window_id": {"999"}, "image": {"busybox"}}, 404, "not found", ""},
	} {
		c.form.Set("csrf", tok)
		p := b.post("/windows/book", c.form)
		if p.status != c.status || !strings.Contains(p.body, c.msg) {
			t.Errorf("book %v: %d, want %d with %q\n%s", c.form, p.status, c.status, c.msg, p.body)
			continue
		}
		if c.field != "" && !marked(p.body, c.field) {
			t.Errorf("book %v: input %s is not marked invalid", c.form, c.field)
		}
	}
	if bs, _ := m.svc.FindBookings(as(m.renterID)); len(bs) != 0 {
		t.Errorf("refused bookings booked %d", len(bs))
	}
	// The window chosen stays chosen on the form that comes back.
	p := b.post("/windows/book", url.Values{"csrf": {tok}, "window_id": {id}, "image": {"busybox"}, "gpus": {"3"}})
	contains(t, p, `<option value="`+id+`" selected>`, `value="3"`)
}
