package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// TestSignInWithTemporaryToken: a temporary token (`suanli auth token`)
// signs in like an API key and the session reads pages with it; the
// sign-in's audit entry says it was a temporary token. Once the token
// expires the session ends with the reason on the sign-in page, and signing
// in again with it is refused, saying it expired.
func TestSignInWithTemporaryToken(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	m.svc.SetClock(m.clock.now) // the token expires on the test's clock
	p, err := m.svc.Authenticate(context.Background(), m.renterKey, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := m.svc.CreateToken(suanli.NewContextWithPrincipal(context.Background(), p), suanli.TokenCreate{TTLSeconds: int64((15 * time.Minute).Seconds())})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.Secret, "sl_tmp_") {
		t.Fatalf("token secret %q is not a temporary token", tok.Secret)
	}

	b := m.browser()
	b.signIn(tok.Secret)
	page := b.get("/billing")
	if page.status != http.StatusOK || !strings.Contains(page.body, ">renter<") || strings.Contains(page.body, tok.Secret) {
		t.Fatalf("billing signed in with a temporary token: %d (or the token is on the page)\n%s", page.status, page.body)
	}
	op := suanli.NewContextWithPrincipal(context.Background(), &suanli.Principal{Role: suanli.RoleOperator, Scopes: []string{suanli.ScopeAll}})
	es, err := m.svc.FindAuditEvents(op, suanli.AuditFilter{Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range es {
		found = found || (e.Action == "POST /signin" && e.Result == "303" && e.AccountID == m.renterID && strings.Contains(e.Detail, "temporary token"))
	}
	if !found {
		t.Errorf("no sign-in audit entry that names the temporary token among %d entries", len(es))
	}

	m.clock.advance(16 * time.Minute) // past the token's 15 minutes, within the session's idle timeout
	page = b.get("/billing")
	if page.status != http.StatusUnauthorized || !strings.Contains(page.body, "Signed out: temporary token") || !strings.Contains(page.body, "expired at") {
		t.Errorf("a session on an expired token: %d, want 401 on the sign-in page saying the token expired\n%s", page.status, page.body)
	}
	if r := b.get("/billing"); r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, "/signin") {
		t.Errorf("after the token expired /billing is %d %q, want a redirect to sign-in", r.status, r.location)
	}

	fresh := m.browser()
	form := fresh.get("/signin")
	r := fresh.post("/signin", url.Values{"csrf": {csrfOf(t, form)}, "api_key": {tok.Secret}, "next": {"/billing"}})
	if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "temporary token "+tok.Prefix+" expired at") || !strings.Contains(r.body, "create a new one") {
		t.Errorf("sign in with an expired token: %d, want 401 that says it expired\n%s", r.status, r.body)
	}
	for _, c := range r.header.Values("Set-Cookie") {
		if strings.Contains(c, "suanli_session=") && !strings.Contains(c, "Max-Age=0") {
			t.Errorf("a refused sign-in set a session cookie: %s", c)
		}
	}
}
