package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// TestConsoleAudit checks that console forms are audited as API mutations
// are — a change, a refused token, a post without a session, a
// confirmation that changed nothing, a sign-in — and the audit page: each
// account sees its own entries, filters narrow them, and the operator
// verifies the chain.
func TestConsoleAudit(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	_, opKey, err := m.svc.CreateAccountWithKey(context.Background(), "op", suanli.RoleOperator, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := m.browser()
	tok := b.signIn(m.renterKey)
	ok := b.post("/billing/budgets", url.Values{"csrf": {tok}, "name": {"ml"}, "amount": {"50"}, "webhook_secret": {"hunter2-secret"}})
	if ok.status != http.StatusSeeOther {
		t.Fatalf("set budget: %d", ok.status)
	}
	b.post("/billing/budgets", url.Values{"csrf": {"forged"}, "name": {"evil"}, "amount": {"1"}})
	m.browser().post("/billing/budgets/delete", url.Values{"csrf": {tok}, "name": {"ml"}})
	b.post("/billing/budgets/delete", url.Values{"csrf": {tok}, "name": {"ml"}})

	op := suanli.NewContextWithPrincipal(context.Background(), &suanli.Principal{Role: suanli.RoleOperator, Scopes: []string{suanli.ScopeAll}})
	all, err := m.svc.FindAuditEvents(op, suanli.AuditFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	find := func(action, result string) *suanli.AuditEvent {
		for _, e := range all {
			if e.Action == action && e.Result == result {
				return e
			}
		}
		t.Errorf("no audit entry %s %s among:", action, result)
		for _, e := range all {
			t.Logf("  %d %s %s %s %q", e.Seq, e.Action, e.Target, e.Result, e.Detail)
		}
		return &suanli.AuditEvent{}
	}
	if e := find("POST /signin", "303"); e.AccountID != m.renterID || e.Detail != "web console" || e.Source == "" {
		t.Errorf("sign-in entry %+v", e)
	}
	e := find("POST /billing/budgets", "303")
	if e.AccountID != m.renterID || e.Target != "budget ml" || e.Detail != "web console" || e.RequestID != ok.header.Get("X-Request-Id") {
		t.Errorf("budget entry %+v (request %s)", e, ok.header.Get("X-Request-Id"))
	}
	if e := find("POST /billing/budgets", "403 forbidden"); e.AccountID != m.renterID || e.Target != "/billing/budgets" {
		t.Errorf("forged-token entry %+v", e)
	}
	if e := find("POST /billing/budgets/delete", "303 unauthorized"); e.AccountID != 0 {
		t.Errorf("no-session entry %+v", e)
	}
	if e := find("POST /billing/budgets/delete", "200"); !strings.Contains(e.Detail, "asked for confirmation, nothing changed") {
		t.Errorf("confirmation entry %+v", e)
	}
	for _, e := range all {
		if strings.Contains(e.Target+e.Detail, "hunter2") {
			t.Errorf("an audit entry holds the webhook secret: %+v", e)
		}
	}

	// The audit page: the renter's own entries, filtered.
	p := b.get("/audit")
	contains(t, p, "POST /billing/budgets", "budget ml", "403 forbidden", "The full report — entry counts and each problem", `id="chain-status"><span class="badge st-ok">intact`)
	if strings.Contains(p.body, `name="account"`) {
		t.Errorf("a renter may filter by account")
	}
	p = b.get("/audit?action=signin")
	if p.status != 200 || !strings.Contains(p.body, "POST /signin") || strings.Contains(p.body, "POST /billing/budgets") {
		t.Errorf("filtered by action: %d\n%s", p.status, p.body)
	}
	if p := b.get("/audit?verify=1"); p.status != http.StatusForbidden || !strings.Contains(p.body, "operator") {
		t.Errorf("a renter verifying: %d\n%s", p.status, p.body)
	}
	// The provider sees none of the renter's entries.
	pv := m.browser()
	pv.signIn(m.providerKey)
	if p := pv.get("/audit?account=1"); strings.Contains(p.body, "budget ml") {
		t.Errorf("the provider sees the renter's entries")
	}

	// The operator: every entry, by account, one per page, and verification.
	o := m.browser()
	o.signIn(opKey)
	p = o.get("/audit?account=" + itoa(m.renterID) + "&action=budgets")
	contains(t, p, `name="account"`, "budget ml", "403 forbidden")
	p = o.get("/audit?verify=1")
	contains(t, p, `id="verify-status">intact`, "checkpoint")
	if p := o.get("/audit?account=x"); p.status != http.StatusBadRequest || !marked(p.body[strings.Index(p.body, "audit-filter"):], "account") {
		t.Errorf("a bad account filter: %d", p.status)
	}
	// Paging: 60 entries of one kind are 50 and then 10.
	for range 60 {
		m.svc.RecordAudit(op, suanli.AuditEvent{AccountID: m.renterID, Action: "test.entry", Result: "ok"})
	}
	first := o.get("/audit?action=test.entry")
	if n := strings.Count(first.body, "<code>test.entry</code>"); n != 50 {
		t.Errorf("first page shows %d entries, want 50", n)
	}
	m2 := regexp.MustCompile(`href="(/audit\?[^"]*before=[^"]*)">Older`).FindStringSubmatch(first.body)
	if m2 == nil {
		t.Fatalf("no older page:\n%s", first.body)
	}
	second := o.get(html.UnescapeString(m2[1]))
	if n := strings.Count(second.body, "<code>test.entry</code>"); n != 10 || strings.Contains(second.body, ">Older") {
		t.Errorf("second page shows %d entries (want 10) or an older link", n)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestAuditChainStatusForUsers: every account sees whether the whole chain
// verified, when, and its newest checkpoint, without the operator's
// report; an altered chain shows as not intact once the minute's
// verification is redone, with no word of which entry (another account's).
func TestAuditChainStatusForUsers(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	m.svc.SetClock(m.clock.now)
	op := suanli.NewContextWithPrincipal(context.Background(), &suanli.Principal{Role: suanli.RoleOperator, Scopes: []string{suanli.ScopeAll}})
	m.svc.RecordAudit(op, suanli.AuditEvent{AccountID: m.providerID, Action: "test.secret", Target: "provider's own thing", Result: "ok"})
	if _, err := m.svc.Audit.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := m.browser()
	b.signIn(m.renterKey)
	p := b.get("/audit")
	contains(t, p, `id="chain-status"><span class="badge st-ok">intact`, "every account's entries, not only yours", "Newest checkpoint", "signed <time")
	if strings.Contains(p.body, "test.secret") || strings.Contains(p.body, "Full report") {
		t.Errorf("the renter's audit page shows another account's entry or the operator's report")
	}

	if _, err := m.svc.Store.SQL().Exec(`UPDATE audit_events SET target = 'rewritten' WHERE action = 'test.secret'`); err != nil {
		t.Fatal(err)
	}
	m.clock.advance(2 * control.AuditStatusTTL)
	p = b.get("/audit")
	contains(t, p, `id="chain-status"><span class="badge st-bad">not intact`, "The marketplace's operator sees which")
	if strings.Contains(p.body, "edited") || strings.Contains(p.body, "test.secret") {
		t.Errorf("the renter's audit page names the altered entry\n%s", p.body)
	}
}
