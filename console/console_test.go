package console_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// newPublicKey returns a new ed25519 public key in authorized_keys form.
func newPublicKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " test@suanli"
}

// formCase is one form of the console: who submits it, where it posts,
// what a valid submission sends, and whether anything changed.
type formCase struct {
	name    string
	who     string // "renter" or "provider"
	path    string
	form    url.Values
	okCode  int
	changed func(t *testing.T, p page) bool
}

// mustInstance creates an instance of the renter's with one GPU.
func mustInstance(t *testing.T, m *market, offer int64) *suanli.Instance {
	t.Helper()
	in, err := m.svc.CreateInstance(as(m.renterID), suanli.InstanceCreate{OfferID: offer, Image: "busybox", GPUCount: 1, Cmd: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func (m *market) instance(t *testing.T, id int64) *suanli.Instance {
	t.Helper()
	in, err := m.svc.FindInstanceByID(as(m.renterID), id)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func (m *market) machine(t *testing.T, id int64) *suanli.Machine {
	t.Helper()
	mc, err := m.svc.FindMachineByID(as(m.providerID), id)
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// TestFormsNeedSessionAndCSRF posts every console form four ways: without
// a session (a redirect to sign-in), without a token and with another
// session's token (403 with the reason), all three changing nothing; then
// validly, which must change what the form is for, so that the "nothing
// changed" checks can fail.
func TestFormsNeedSessionAndCSRF(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	mid, _, _ := m.addMachine(machineSpec{host: "rig", gpus: "RTX 4090:4", region: "eu-west", price: 400_000, minBid: 200_000})
	a := mustInstance(t, m, mid)
	b := mustInstance(t, m, mid)
	if _, err := m.svc.StopInstance(as(m.renterID), b.ID); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := m.svc.Store.UpdateInstance(context.Background(), b.ID, now, now, func(in *suanli.Instance) error {
		in.Status = suanli.StatusStopped // as its agent would report
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ids := func(path string, id int64) string { return strings.Replace(path, "ID", strconv.FormatInt(id, 10), 1) }
	// The provider has earnings to pay out: instance a ran an hour, settled.
	if _, err := m.svc.Store.UpdateInstance(context.Background(), a.ID, now.Add(-time.Hour), now, func(in *suanli.Instance) error {
		in.Status = suanli.StatusRunning
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.svc.Store.Settle(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	// A key and a network to remove.
	oldKey, err := m.svc.AddSSHKey(as(m.renterID), "old", newPublicKey(t))
	if err != nil {
		t.Fatal(err)
	}
	oldNet, err := m.svc.AddAllowedNetwork(as(m.renterID), "198.51.100.0/24", "old office")
	if err != nil {
		t.Fatal(err)
	}
	budget := func(name string) *suanli.Budget {
		bs, err := m.svc.FindBudgets(as(m.renterID))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.Name == name {
				return b
			}
		}
		return nil
	}
	volume := func(name string) *suanli.Volume {
		vs, err := m.svc.FindVolumes(as(m.renterID), false)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if v.Name == name {
				return v
			}
		}
		return nil
	}
	hasKey := func(id int64) bool {
		ks, err := m.svc.FindSSHKeys(as(m.renterID))
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(ks, func(k *suanli.SSHKey) bool { return k.ID == id })
	}
	keys := func() int {
		ks, err := m.svc.FindSSHKeys(as(m.renterID))
		if err != nil {
			t.Fatal(err)
		}
		return len(ks)
	}
	hasNet := func(cidr string) bool {
		ns, err := m.svc.FindAllowedNetworks(as(m.renterID))
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(ns, func(n *suanli.AllowedNetwork) bool { return n.CIDR == cidr })
	}

	// A window to book, and a booking to cancel.
	win := m.mustWindow(t, mid, 2, suanli.Dollars(1), time.Now().UTC().Add(72*time.Hour).Truncate(time.Hour), 8)
	booked, err := m.svc.CreateBooking(as(m.renterID), suanli.BookingCreate{WindowID: win.ID, GPUs: 1, Hours: 2, Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	bookings := func() []*suanli.Booking {
		bs, err := m.svc.FindBookings(as(m.renterID))
		if err != nil {
			t.Fatal(err)
		}
		return bs
	}

	renter, provider := m.browser(), m.browser()
	tokens := map[string]string{"renter": renter.signIn(m.renterKey), "provider": provider.signIn(m.providerKey)}
	browsers := map[string]*browser{"renter": renter, "provider": provider}
	other := map[string]string{"renter": "provider", "provider": "renter"}

	// start comes first: once b runs again it holds its GPU, which a rental
	// would otherwise be given.
	cases := []formCase{
		{name: "start", who: "renter", path: ids("/instances/ID/start", b.ID), okCode: http.StatusSeeOther,
			form:    url.Values{"confirmed": {"yes"}},
			changed: func(t *testing.T, p page) bool { return m.instance(t, b.ID).Desired != suanli.DesiredStopped }},
		{name: "rent", who: "renter", path: ids("/offers/ID/rent", mid), okCode: http.StatusSeeOther,
			form: url.Values{"image": {"busybox"}, "cmd": {"sleep 600"}, "num_gpus": {"1"}, "disk_gb": {"10"}, "rental_type": {"on-demand"}},
			changed: func(t *testing.T, p page) bool {
				all, _, err := m.svc.FindInstances(as(m.renterID), suanli.InstanceFilter{})
				if err != nil {
					t.Fatal(err)
				}
				return len(all) != 2
			}},
		{name: "stop", who: "renter", path: ids("/instances/ID/stop", a.ID), okCode: http.StatusSeeOther,
			form:    url.Values{"confirmed": {"yes"}},
			changed: func(t *testing.T, p page) bool { return m.instance(t, a.ID).Desired != suanli.DesiredRunning }},
		{name: "destroy", who: "renter", path: ids("/instances/ID/destroy", a.ID), okCode: http.StatusSeeOther,
			form:    url.Values{"confirmed": {"yes"}},
			changed: func(t *testing.T, p page) bool { return m.instance(t, a.ID).Status == suanli.StatusDestroyed }},
		{name: "volume-create", who: "renter", path: "/volumes", okCode: http.StatusSeeOther,
			form:    url.Values{"name": {"data"}, "machine_id": {strconv.FormatInt(mid, 10)}, "size_gb": {"5"}, "project": {"ml"}},
			changed: func(t *testing.T, p page) bool { return volume("data") != nil }},
		{name: "volume-delete", who: "renter", path: "/volumes/delete", okCode: http.StatusSeeOther,
			form:    url.Values{"name": {"data"}, "confirmed": {"yes"}},
			changed: func(t *testing.T, p page) bool { return volume("data") == nil }},
		{name: "listing", who: "provider", path: ids("/hosts/ID/listing", mid), okCode: http.StatusSeeOther,
			form:    url.Values{"price_gpu": {"0.55"}},
			changed: func(t *testing.T, p page) bool { return m.machine(t, mid).Listing.PriceGPU != 400_000 }},
		{name: "unlist", who: "provider", path: ids("/hosts/ID/unlist", mid), okCode: http.StatusSeeOther,
			changed: func(t *testing.T, p page) bool { return !m.machine(t, mid).Listing.Listed }},
		{name: "join-token", who: "provider", path: "/hosts/join-token", okCode: http.StatusOK,
			changed: func(t *testing.T, p page) bool { return strings.Contains(p.body, "sl_join_") }},
		{name: "payout", who: "provider", path: "/hosts/payout", okCode: http.StatusSeeOther,
			changed: func(t *testing.T, p page) bool {
				e, err := m.svc.Earnings(as(m.providerID), now.AddDate(0, 0, -1), now.Add(time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				return e.PaidOut != 0
			}},
		{name: "budget-set", who: "renter", path: "/billing/budgets", okCode: http.StatusSeeOther,
			form: url.Values{"name": {"ml"}, "scope": {"project:ml"}, "amount": {"50"}, "period": {"monthly"}, "thresholds": {"50, 90"},
				"action": {"block"}, "webhook_url": {"https://hooks.example/x"}, "webhook_secret": {"s3cret"}},
			changed: func(t *testing.T, p page) bool {
				b := budget("ml")
				return b != nil && b.Amount == suanli.Dollars(50) && b.Action == suanli.BudgetBlock && b.Scope == "project:ml" && slices.Equal(b.Thresholds, []int{50, 90})
			}},
		{name: "budget-delete", who: "renter", path: "/billing/budgets/delete", okCode: http.StatusSeeOther,
			form:    url.Values{"name": {"ml"}, "confirmed": {"yes"}},
			changed: func(t *testing.T, p page) bool { return budget("ml") == nil }},
		{name: "ssh-key-add", who: "renter", path: "/account/ssh-keys", okCode: http.StatusSeeOther,
			form:    url.Values{"name": {"laptop"}, "public_key": {newPublicKey(t)}},
			changed: func(t *testing.T, p page) bool { return keys() != 1 }},
		{name: "ssh-key-remove", who: "renter", path: ids("/account/ssh-keys/ID/delete", oldKey.ID), okCode: http.StatusSeeOther,
			form:    url.Values{"confirmed": {"yes"}},
			changed: func(t *testing.T, p page) bool { return !hasKey(oldKey.ID) }},
		{name: "allowlist-add", who: "renter", path: "/account/allowlist", okCode: http.StatusSeeOther,
			form:    url.Values{"cidr": {"203.0.113.7"}, "note": {"home"}},
			changed: func(t *testing.T, p page) bool { return hasNet("203.0.113.7/32") }},
		{name: "allowlist-remove", who: "renter", path: ids("/account/allowlist/ID/delete", oldNet.ID), okCode: http.StatusSeeOther,
			form:    url.Values{"confirmed": {"yes"}},
			changed: func(t *testing.T, p page) bool { return !hasNet(oldNet.CIDR) }},
		{name: "book", who: "renter", path: "/windows/book", okCode: http.StatusSeeOther,
			form:    url.Values{"window_id": {strconv.FormatInt(win.ID, 10)}, "gpus": {"1"}, "hours": {"2"}, "image": {"busybox"}},
			changed: func(t *testing.T, p page) bool { return len(bookings()) != 1 }},
		{name: "booking-cancel", who: "renter", path: ids("/bookings/ID/cancel", booked.ID), okCode: http.StatusSeeOther,
			form: url.Values{"confirmed": {"yes"}},
			changed: func(t *testing.T, p page) bool {
				b, err := m.svc.FindBookingByID(as(m.renterID), booked.ID)
				if err != nil {
					t.Fatal(err)
				}
				return b.Status != suanli.BookingBooked
			}},
		{name: "signout", who: "renter", path: "/signout", okCode: http.StatusSeeOther,
			changed: func(t *testing.T, p page) bool { return renter.get("/billing").status != http.StatusOK }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			with := func(token string) url.Values {
				v := url.Values{}
				for k, vs := range c.form {
					v[k] = vs
				}
				if token != "" {
					v.Set("csrf", token)
				}
				return v
			}
			anon := m.browser()
			p := anon.post(c.path, with(tokens[c.who]))
			if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/signin") {
				t.Errorf("no session: %d %q, want 303 to /signin", p.status, p.location)
			}
			if c.changed(t, p) {
				t.Fatalf("no session: the form changed something")
			}
			br := browsers[c.who]
			for _, bad := range []struct{ what, token string }{
				{"no token", ""}, {"another session's token", tokens[other[c.who]]}, {"a made-up token", madeUp(tokens[c.who])},
			} {
				p := br.post(c.path, with(bad.token))
				if p.status != http.StatusForbidden || !strings.Contains(p.body, "did not come from this console") {
					t.Errorf("%s: %d, want 403 that says why\n%s", bad.what, p.status, p.body)
				}
				if c.changed(t, p) {
					t.Fatalf("%s: the form changed something", bad.what)
				}
			}
			p = br.post(c.path, with(tokens[c.who]))
			if p.status != c.okCode {
				t.Errorf("valid: %d %q, want %d\n%s", p.status, p.location, c.okCode, p.body)
			}
			if !c.changed(t, p) {
				t.Errorf("valid: nothing changed")
			}
		})
	}
}

// TestSignInForm checks the sign-in form's own CSRF token (a signed
// double-submit cookie), the cookie's attributes, and that the key never
// reaches the browser.
func TestSignInForm(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tls], func(t *testing.T) {
			m := newMarket(t, marketOptions{tls: tls})
			b := m.browser()
			form := b.get("/signin")
			token := csrfOf(t, form)
			for _, bad := range []string{"", token + "x"} {
				p := b.post("/signin", url.Values{"csrf": {bad}, "api_key": {m.renterKey}})
				if p.status != http.StatusForbidden {
					t.Errorf("sign in with token %q: %d, want 403", bad, p.status)
				}
				if strings.Contains(p.header.Get("Set-Cookie"), "suanli_session") {
					t.Errorf("a refused sign-in set a session cookie: %s", p.header.Get("Set-Cookie"))
				}
			}
			// Another browser's token does not fit this browser's cookie.
			if p := m.browser().post("/signin", url.Values{"csrf": {token}, "api_key": {m.renterKey}}); p.status != http.StatusForbidden {
				t.Errorf("sign in with a token but no cookie: %d, want 403", p.status)
			}
			if p := b.get("/billing"); p.status != http.StatusSeeOther {
				t.Fatalf("after refused sign-ins /billing is %d, want a redirect", p.status)
			}

			p := b.post("/signin", url.Values{"csrf": {token}, "api_key": {"sl_live_nope"}})
			if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "API key is malformed") {
				t.Errorf("bad key: %d, want 401 with the control plane's message\n%s", p.status, p.body)
			}

			p = b.post("/signin", url.Values{"csrf": {token}, "api_key": {m.renterKey}, "next": {"//evil.example/x"}})
			if p.status != http.StatusSeeOther || p.location != "/" {
				t.Fatalf("sign in: %d %q, want 303 to / (an off-site next is dropped)", p.status, p.location)
			}
			var cookie string
			for _, c := range p.header.Values("Set-Cookie") {
				if strings.Contains(c, "suanli_session=") {
					cookie = c
				}
			}
			for _, attr := range []string{"HttpOnly", "SameSite=Strict", "Path=/"} {
				if !strings.Contains(cookie, attr) {
					t.Errorf("session cookie %q lacks %s", cookie, attr)
				}
			}
			if strings.Contains(cookie, "Secure") != tls {
				t.Errorf("session cookie %q: Secure should be set exactly over TLS", cookie)
			}
			if tls && !strings.HasPrefix(cookie, "__Host-") {
				t.Errorf("session cookie over TLS %q lacks the __Host- prefix", cookie)
			}
			if strings.Contains(cookie, m.renterKey) || strings.Contains(cookie, m.renterKey[8:20]) {
				t.Errorf("session cookie carries the API key: %q", cookie)
			}
			home := b.get("/")
			if home.status != http.StatusOK || strings.Contains(home.body, m.renterKey) {
				t.Errorf("home after sign-in: %d (or the key is on the page)", home.status)
			}
			csp := home.header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("Content-Security-Policy = %q", csp)
			}
		})
	}
}

// TestPagesNeedSession checks that every page redirects to sign-in (and
// back afterwards), that the script's JSON answers 401, and that a session
// ends after its idle timeout and when its key is no longer valid.
func TestPagesNeedSession(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	mid, _, _ := m.addMachine(machineSpec{host: "rig", gpus: "RTX 4090:2", price: 400_000, minBid: 200_000})
	in := mustInstance(t, m, mid)
	id := strconv.FormatInt(in.ID, 10)
	pages := []string{"/", "/?gpu=RTX+4090", "/offers/" + strconv.FormatInt(mid, 10), "/offers/" + strconv.FormatInt(mid, 10) + "/rent",
		"/instances", "/instances/" + id, "/billing", "/billing/charges.csv", "/billing?edit=x", "/hosts", "/volumes", "/account", "/advisor",
		"/advisor/rent-vs-buy", "/audit", "/windows", "/bookings"}
	anon := m.browser()
	for _, p := range pages {
		r := anon.get(p)
		if r.status != http.StatusSeeOther || r.location != "/signin?next="+url.QueryEscape(p) {
			t.Errorf("GET %s without a session: %d %q, want 303 to sign-in and back", p, r.status, r.location)
		}
	}
	for _, p := range []string{"/console/api/instances", "/console/api/instances/" + id, "/console/api/instances/" + id + "/logs?offset=0"} {
		if r := anon.get(p); r.status != http.StatusUnauthorized {
			t.Errorf("GET %s without a session: %d, want 401", p, r.status)
		}
	}

	b := m.browser()
	b.signIn(m.renterKey)
	for _, p := range pages {
		if r := b.get(p); r.status != http.StatusOK {
			t.Errorf("GET %s signed in: %d\n%s", p, r.status, r.body)
		}
	}
	if r := b.get("/console/api/instances/" + id); r.status != http.StatusOK || !strings.Contains(r.body, `"status":"pending"`) {
		t.Errorf("instance JSON: %d %s", r.status, r.body)
	}
	// Another tenant's instance is not found, as in the API.
	p := m.browser()
	p.signIn(m.providerKey)
	if r := p.get("/instances/" + id); r.status != http.StatusNotFound || !strings.Contains(r.body, "instance "+id+" not found") {
		t.Errorf("another tenant's instance: %d\n%s", r.status, r.body)
	}

	m.clock.advance(3 * time.Hour) // past the idle timeout
	if r := b.get("/billing"); r.status != http.StatusSeeOther {
		t.Errorf("after 3 idle hours /billing is %d, want a redirect to sign-in", r.status)
	}
}

// TestFormErrorsNameTheField checks that a refused rental comes back as the
// form, with the service's message and the field marked, and changes nothing.
func TestFormErrorsNameTheField(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	mid, _, _ := m.addMachine(machineSpec{host: "rig", gpus: "RTX 4090:2", price: 400_000, minBid: 200_000})
	b := m.browser()
	tok := b.signIn(m.renterKey)
	path := "/offers/" + strconv.FormatInt(mid, 10) + "/rent"
	for _, c := range []struct {
		form   url.Values
		status int
		msg    string
		field  string
	}{
		{url.Values{"image": {" "}}, 400, "image: must not be empty", "image"},
		{url.Values{"image": {"x"}, "disk_gb": {"lots"}}, 400, "disk_gb: &#34;lots&#34; is not a whole number", "disk_gb"},
		{url.Values{"image": {"x"}, "env": {"JUST_A_NAME"}}, 400, "env: line 1", "env"},
		{url.Values{"image": {"x"}, "env": {"SUANLI_X=1"}}, 400, "names starting with SUANLI_ are reserved", "env"},
		{url.Values{"image": {"x"}, "cmd": {"true"}, "rental_type": {"interruptible"}, "bid": {"0.01"}}, 400, "below this offer&#39;s minimum bid of $0.40/h", "bid"},
		{url.Values{"image": {"x"}, "cmd": {"true"}, "num_gpus": {"3"}}, 409, "has 2 free GPUs, you asked for 3", ""},
		{url.Values{"image": {"x"}}, 400, "runs instances as processes", "cmd"},
		{url.Values{"image": {"x"}, "cmd": {"true"}, "ports": {"8888, http"}}, 400, "ports: &#34;http&#34; is not a port", "ports"},
		{url.Values{"template": {"nope"}, "cmd": {"true"}}, 400, "nope", "template"},
	} {
		c.form.Set("csrf", tok)
		p := b.post(path, c.form)
		if p.status != c.status || !strings.Contains(p.body, c.msg) {
			t.Errorf("rent %v: %d, want %d with %q\n%s", c.form, p.status, c.status, c.msg, p.body)
		}
		if c.field != "" && !strings.Contains(p.body, `name="`+c.field+`"`) {
			t.Errorf("rent %v: the form is not shown again", c.form)
		}
	}
	if all, _, _ := m.svc.FindInstances(as(m.renterID), suanli.InstanceFilter{}); len(all) != 0 {
		t.Errorf("refused rentals created %d instances", len(all))
	}
	// Without confirmed=yes, destroy asks on a page of its own and changes nothing.
	in := mustInstance(t, m, mid)
	p := b.post("/instances/"+strconv.FormatInt(in.ID, 10)+"/destroy", url.Values{"csrf": {tok}})
	if p.status != 200 || !strings.Contains(p.body, `name="confirmed" value="yes"`) || !strings.Contains(p.body, "cannot be undone") {
		t.Errorf("unconfirmed destroy: %d\n%s", p.status, p.body)
	}
	if m.instance(t, in.ID).Status == suanli.StatusDestroyed {
		t.Errorf("an unconfirmed destroy destroyed the instance")
	}
	// Query errors name the field and keep the page.
	r := b.get("/?q=" + url.QueryEscape("gpu_nam=RTX_4090"))
	if r.status != 400 || !strings.Contains(r.body, "unknown field &#34;gpu_nam&#34;") || !strings.Contains(r.body, "did you mean gpu_name") {
		t.Errorf("bad query: %d\n%s", r.status, r.body)
	}
	r = b.get("/?vram=lots")
	if r.status != 400 || !strings.Contains(r.body, "vram: &#34;lots&#34; is not a size") {
		t.Errorf("bad filter: %d\n%s", r.status, r.body)
	}
}

// TestOfferShowsCO2: an offer's page shows its estimated emissions
// (co2_g_per_hour) with the grid they assume, or says the grid is unknown;
// the search language filters on them. RTX 4090 (450 W) and 16 cores (5 W
// each) in Sweden (41 g/kWh): 530 W × 0.041 = 21.7 g/h.
func TestOfferShowsCO2(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	se, _, _ := m.addMachine(machineSpec{host: "nordic", gpus: "RTX 4090:1", price: 400_000, minBid: 200_000})
	unknown, _, _ := m.addMachine(machineSpec{host: "nowhere", gpus: "RTX 4090:1", price: 400_000, minBid: 200_000})
	country := "SE"
	if _, err := m.svc.ListMachine(as(m.providerID), se, suanli.ListingUpdate{Country: &country}); err != nil {
		t.Fatal(err)
	}
	b := m.browser()
	b.signIn(m.renterKey)
	contains(t, b.get("/offers/"+strconv.FormatInt(se, 10)), `id="offer-co2">21.7 g an hour at full load, on a 41 gCO2/kWh grid (green)`)
	contains(t, b.get("/offers/"+strconv.FormatInt(unknown, 10)), `id="offer-co2">unknown: the host's grid is not known`)
	r := b.get("/?q=" + url.QueryEscape("co2_g_per_hour>0 co2_g_per_hour<500"))
	if !strings.Contains(r.body, "1–1 of 1 offers") || !strings.Contains(r.body, "/offers/"+strconv.FormatInt(se, 10)) {
		t.Errorf("co2_g_per_hour>0 co2_g_per_hour<500 does not keep only the Swedish machine\n%s", r.body)
	}
}

// madeUp returns a token that differs from token in its first character
// (a token that happens to start with the replacement letter must still
// come out different).
func madeUp(token string) string {
	first := "x"
	if strings.HasPrefix(token, first) {
		first = "y"
	}
	return first + token[1:]
}

// TestEncryptedDiskShown: renters see which offers encrypt disks (and can
// filter on it); providers see how their machines release data.
func TestEncryptedDiskShown(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	m.addMachine(machineSpec{host: "vaulted", gpus: "RTX 4090:1", price: 400_000, minBid: 200_000, diskEncryption: "fscrypt v2 AES-256-XTS (test)"})
	m.addMachine(machineSpec{host: "plain", gpus: "RTX 4090:1", price: 400_000, minBid: 200_000})
	b := m.browser()
	b.signIn(m.renterKey)
	r := b.get("/")
	if n := strings.Count(r.body, ">encrypted disk</span>"); n != 1 {
		t.Errorf("offers page shows %d encrypted-disk tags, want 1 (one of two machines encrypts)\n%s", n, r.body)
	}
	r = b.get("/?q=" + url.QueryEscape("encrypted_disk=true"))
	if !strings.Contains(r.body, "1–1 of 1 offers") || !strings.Contains(r.body, ">encrypted disk</span>") {
		t.Errorf("encrypted_disk=true does not keep only the encrypting machine\n%s", r.body)
	}
	p := m.browser()
	p.signIn(m.providerKey)
	contains(t, p.get("/hosts"), "disks encrypted (fscrypt v2 AES-256-XTS (test))", "disks not encrypted (release overwrites)")
}
