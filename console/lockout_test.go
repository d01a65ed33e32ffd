package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Sign-in is a login endpoint: repeated failures from one address lock it
// out (429 with Retry-After), as on the API; instance tokens cannot sign in.
func TestSignInLockout(t *testing.T) {
	m := newMarket(t, marketOptions{})
	b := m.browser()
	token := csrfOf(t, b.get("/signin"))
	for i := 0; i < 5; i++ {
		if p := b.post("/signin", url.Values{"csrf": {token}, "api_key": {"sl_live_nope"}}); p.status != http.StatusUnauthorized {
			t.Fatalf("bad key %d: %d", i, p.status)
		}
		token = csrfOf(t, b.get("/signin"))
	}
	p := b.post("/signin", url.Values{"csrf": {token}, "api_key": {m.renterKey}})
	if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" || !strings.Contains(p.body, "too many failed sign-ins") {
		t.Fatalf("after 5 failures: %d (Retry-After %q), want 429", p.status, p.header.Get("Retry-After"))
	}
	m.clock.advance(16 * time.Minute)
	b.signIn(m.renterKey)
}
