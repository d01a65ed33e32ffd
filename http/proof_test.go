package http_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
)

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Route kinds, for what a call by someone else may do.
const (
	kindPage   = "page"   // unauthenticated page: health, metrics, OpenAPI, overview
	kindPublic = "public" // takes its own token (agent join)
	kindSelf   = "self"   // acts on the caller's own account only
	kindMarket = "market" // the public market (offers)
	kindObject = "object" // names an object by id: another tenant's is not_found
	kindAdmin  = "admin"  // operators only
)

// routeCase is how the proof calls one route: with the victim's objects in
// its path and a body the victim could send.
type routeCase struct {
	kind  string
	scope string // the scope the route needs ("" none)
	path  func(w *world) string
	body  func(w *world) string
}

func p(s string) func(*world) string { return func(*world) string { return s } }

func instPath(suffix string) func(*world) string {
	return func(w *world) string { return fmt.Sprintf("/v1/instances/%d%s", w.instanceID, suffix) }
}

func machPath(suffix string) func(*world) string {
	return func(w *world) string { return fmt.Sprintf("/v1/machines/%d%s", w.machineID, suffix) }
}

func teamPath(suffix string) func(*world) string {
	return func(w *world) string {
		s := strings.ReplaceAll(suffix, "{account}", fmt.Sprint(w.mateID))
		s = strings.ReplaceAll(s, "{invitation}", fmt.Sprint(w.invitationID))
		return fmt.Sprintf("/v1/teams/%d%s", w.teamID, s)
	}
}

// routeCases has one entry per route the server registers;
// TestEveryRouteHasACase keeps it complete.
var routeCases = map[string]routeCase{
	"GET /healthz":            {kindPage, "", p("/healthz"), nil},
	"GET /metrics":            {kindPage, "", p("/metrics"), nil},
	"GET /v1/openapi.json":    {kindPage, "", p("/v1/openapi.json"), nil},
	"GET /v1/me":              {kindSelf, "", p("/v1/me"), nil},
	"PUT /v1/me/residency":    {kindSelf, suanli.ScopeAccountWrite, p("/v1/me/residency"), p(`{"allowed_countries":["DE"]}`)},
	"POST /v1/admin/accounts": {kindAdmin, suanli.ScopeAdmin, p("/v1/admin/accounts"), p(`{"name":"mallory2"}`)},
	"GET /v1/admin/accounts":  {kindAdmin, suanli.ScopeAdmin, p("/v1/admin/accounts"), nil},
	"GET /v1/keys":            {kindSelf, suanli.ScopeKeyRead, p("/v1/keys?all=true"), nil},
	"POST /v1/keys":           {kindSelf, suanli.ScopeKeyWrite, p("/v1/keys"), p(`{"name":"k","scopes":["instance:read"],"ttl_seconds":3600}`)},
	"DELETE /v1/keys/{id}":    {kindObject, suanli.ScopeKeyWrite, func(w *world) string { return fmt.Sprintf("/v1/keys/%d", w.keyID) }, nil},
	"POST /v1/keys/{id}/rotate": {kindObject, suanli.ScopeKeyWrite, func(w *world) string { return fmt.Sprintf("/v1/keys/%d/rotate", w.keyID) },
		p(`{"grace_seconds":0}`)},
	"POST /v1/auth/token":                            {kindSelf, "", p("/v1/auth/token"), p(`{"ttl_seconds":3600}`)},
	"GET /v1/teams":                                  {kindSelf, suanli.ScopeTeamRead, p("/v1/teams"), nil},
	"POST /v1/teams":                                 {kindSelf, suanli.ScopeTeamWrite, p("/v1/teams"), p(`{"name":"mallory-team"}`)},
	"GET /v1/teams/{id}/members":                     {kindObject, suanli.ScopeTeamRead, teamPath("/members"), nil},
	"PUT /v1/teams/{id}/members/{account}":           {kindObject, suanli.ScopeTeamWrite, teamPath("/members/{account}"), p(`{"role":"owner"}`)},
	"DELETE /v1/teams/{id}/members/{account}":        {kindObject, suanli.ScopeTeamWrite, teamPath("/members/{account}"), nil},
	"GET /v1/teams/{id}/invitations":                 {kindObject, suanli.ScopeTeamRead, teamPath("/invitations"), nil},
	"POST /v1/teams/{id}/invitations":                {kindObject, suanli.ScopeTeamWrite, teamPath("/invitations"), p(`{"role":"owner"}`)},
	"DELETE /v1/teams/{id}/invitations/{invitation}": {kindObject, suanli.ScopeTeamWrite, teamPath("/invitations/{invitation}"), nil},
	"POST /v1/invitations/accept": {kindSelf, suanli.ScopeTeamWrite, p("/v1/invitations/accept"),
		func(*world) string { return `{"token":"` + auth.NewSecret(auth.PrefixInvite) + `"}` }},
	"GET /v1/audit/events":   {kindSelf, suanli.ScopeAuditRead, p("/v1/audit/events?limit=1000"), nil},
	"GET /v1/audit/verify":   {kindAdmin, suanli.ScopeAdmin, p("/v1/audit/verify"), nil},
	"GET /v1/cluster":        {kindAdmin, suanli.ScopeAdmin, p("/v1/cluster"), nil},
	"POST /v1/offers/search": {kindMarket, suanli.ScopeInstanceRead, p("/v1/offers/search"), p(`{"q":"rentable=any"}`)},
	"GET /v1/offers":         {kindMarket, suanli.ScopeInstanceRead, p("/v1/offers?q=rentable%3Dany"), nil},
	"GET /v1/offers/{id}":    {kindMarket, suanli.ScopeInstanceRead, func(w *world) string { return fmt.Sprintf("/v1/offers/%d", w.machineID) }, nil},
	"POST /v1/instances": {kindSelf, suanli.ScopeInstanceWrite, p("/v1/instances"),
		func(w *world) string {
			return fmt.Sprintf(`{"offer_id":%d,"image":"x","num_gpus":1,"cmd":["true"]}`, w.machineID)
		}},
	"GET /v1/instances":                {kindSelf, suanli.ScopeInstanceRead, p("/v1/instances?all=true"), nil},
	"GET /v1/instances/{id}":           {kindObject, suanli.ScopeInstanceRead, instPath(""), nil},
	"POST /v1/instances/{id}/stop":     {kindObject, suanli.ScopeInstanceWrite, instPath("/stop"), nil},
	"POST /v1/instances/{id}/start":    {kindObject, suanli.ScopeInstanceWrite, instPath("/start"), nil},
	"DELETE /v1/instances/{id}":        {kindObject, suanli.ScopeInstanceWrite, instPath(""), nil},
	"GET /v1/instances/{id}/logs":      {kindObject, suanli.ScopeInstanceRead, instPath("/logs"), nil},
	"GET /v1/instances/{id}/events":    {kindObject, suanli.ScopeInstanceRead, instPath("/events"), nil},
	"POST /v1/instances/{id}/progress": {kindObject, suanli.ScopeInstanceWrite, instPath("/progress"), p(`{"message":"hi"}`)},
	"GET /v1/machines":                 {kindSelf, suanli.ScopeHostRead, p("/v1/machines"), nil},
	"GET /v1/machines/{id}":            {kindObject, suanli.ScopeHostRead, machPath(""), nil},
	"PUT /v1/machines/{id}/listing":    {kindObject, suanli.ScopeHostWrite, machPath("/listing"), p(`{"price_gpu":1}`)},
	"DELETE /v1/machines/{id}/listing": {kindObject, suanli.ScopeHostWrite, machPath("/listing"), nil},
	"POST /v1/join-tokens":             {kindSelf, suanli.ScopeHostWrite, p("/v1/join-tokens"), p(`{"ttl_seconds":60}`)},
	"GET /v1/billing/balance":          {kindSelf, suanli.ScopeBillingRead, p("/v1/billing/balance"), nil},
	"GET /v1/billing/charges":          {kindObject, suanli.ScopeBillingRead, func(w *world) string { return fmt.Sprintf("/v1/billing/charges?instance_id=%d", w.instanceID) }, nil},
	"POST /v1/admin/credit":            {kindAdmin, suanli.ScopeAdmin, p("/v1/admin/credit"), func(w *world) string { return fmt.Sprintf(`{"account_id":%d,"amount":1000000}`, w.victimID) }},
	"POST /v1/instances/{id}/exec":     {kindObject, suanli.ScopeInstanceWrite, instPath("/exec"), p(`{"cmd":["true"]}`)},
	"PUT /v1/admin/quota": {kindAdmin, suanli.ScopeAdmin, p("/v1/admin/quota"),
		func(w *world) string { return fmt.Sprintf(`{"account_id":%d,"gpus":100}`, w.victimID) }},
	"GET /v1/ssh/ca":                {kindPublic, "", p("/v1/ssh/ca"), nil},
	"GET /v1/ssh/keys":              {kindSelf, suanli.ScopeInstanceRead, p("/v1/ssh/keys"), nil},
	"POST /v1/ssh/keys":             {kindSelf, suanli.ScopeInstanceWrite, p("/v1/ssh/keys"), func(w *world) string { return `{"public_key":"` + w.sshPublicKey + `"}` }},
	"DELETE /v1/ssh/keys/{id}":      {kindObject, suanli.ScopeInstanceWrite, func(w *world) string { return fmt.Sprintf("/v1/ssh/keys/%d", w.sshKeyID) }, nil},
	"GET /v1/ssh/allowlist":         {kindSelf, suanli.ScopeInstanceRead, p("/v1/ssh/allowlist"), nil},
	"POST /v1/ssh/allowlist":        {kindSelf, suanli.ScopeInstanceWrite, p("/v1/ssh/allowlist"), p(`{"cidr":"198.51.100.0/24"}`)},
	"DELETE /v1/ssh/allowlist/{id}": {kindObject, suanli.ScopeInstanceWrite, func(w *world) string { return fmt.Sprintf("/v1/ssh/allowlist/%d", w.allowID) }, nil},
	"POST /v1/ssh/certificates": {kindObject, suanli.ScopeInstanceWrite, p("/v1/ssh/certificates"),
		func(w *world) string {
			return fmt.Sprintf(`{"instance_id":%d,"public_key":%q}`, w.instanceID, w.sshPublicKey)
		}},
	"POST /v1/quotes": {kindMarket, suanli.ScopeInstanceRead, p("/v1/quotes"), func(w *world) string { return fmt.Sprintf(`{"offer_id":%d}`, w.machineID) }},
	"GET /v1/budgets": {kindSelf, suanli.ScopeBillingRead, p("/v1/budgets"), nil},
	"PUT /v1/budgets/{name}": {kindSelf, suanli.ScopeInstanceWrite, p("/v1/budgets/my-budget"),
		p(`{"amount":1000000,"action":"stop"}`)},
	"DELETE /v1/budgets/{name}":        {kindObject, suanli.ScopeInstanceWrite, func(w *world) string { return "/v1/budgets/" + w.planted[len(w.planted)-1] }, nil},
	"GET /v1/alerts":                   {kindSelf, suanli.ScopeBillingRead, p("/v1/alerts"), nil},
	"GET /v1/billing/invoices/{month}": {kindSelf, suanli.ScopeBillingRead, func(w *world) string { return "/v1/billing/invoices/" + w.clock.Now().Format("2006-01") }, nil},
	"GET /v1/billing/report":           {kindSelf, suanli.ScopeBillingRead, p("/v1/billing/report?by=instance"), nil},
	"GET /v1/host/earnings":            {kindSelf, suanli.ScopeHostRead, p("/v1/host/earnings"), nil},
	"POST /v1/host/payouts":            {kindSelf, suanli.ScopeHostWrite, p("/v1/host/payouts"), p(`{"amount":0}`)},
	"POST /v1/volumes": {kindSelf, suanli.ScopeInstanceWrite, p("/v1/volumes"),
		func(w *world) string { return fmt.Sprintf(`{"machine_id":%d,"name":"mine","size_gb":1}`, w.machineID) }},
	"GET /v1/volumes":           {kindSelf, suanli.ScopeInstanceRead, p("/v1/volumes?all=true"), nil},
	"DELETE /v1/volumes/{name}": {kindObject, suanli.ScopeInstanceWrite, func(w *world) string { return "/v1/volumes/" + w.volumeName }, nil},
	"POST /v1/fleets": {kindSelf, suanli.ScopeInstanceWrite, p("/v1/fleets"),
		func(w *world) string {
			return fmt.Sprintf(`{"offer_id":%d,"image":"x","num_gpus":1,"cmd":["true"],"count":1}`, w.machineID)
		}},
	"POST /v1/instances/{id}/bid":           {kindObject, suanli.ScopeInstanceWrite, instPath("/bid"), p(`{"bid":500000}`)},
	"POST /v1/instances/{id}/recreate":      {kindObject, suanli.ScopeInstanceWrite, instPath("/recreate"), p(`{}`)},
	"GET /v1/instances/{id}/reservation":    {kindObject, suanli.ScopeInstanceRead, instPath("/reservation"), nil},
	"POST /v1/instances/{id}/reservation":   {kindObject, suanli.ScopeInstanceWrite, instPath("/reservation"), p(`{"days":30}`)},
	"DELETE /v1/instances/{id}/reservation": {kindObject, suanli.ScopeInstanceWrite, instPath("/reservation"), nil},
	"POST /v1/windows": {kindSelf, suanli.ScopeHostWrite, p("/v1/windows"), func(w *world) string {
		start := w.clock.Now().Add(48 * time.Hour).Format(time.RFC3339)
		end := w.clock.Now().Add(50 * time.Hour).Format(time.RFC3339)
		return fmt.Sprintf(`{"machine_id":%d,"gpus":1,"start":%q,"end":%q,"price_gpu":1000000}`, w.machineID, start, end)
	}},
	"GET /v1/windows":         {kindSelf, suanli.ScopeHostRead, p("/v1/windows"), nil},
	"DELETE /v1/windows/{id}": {kindObject, suanli.ScopeHostWrite, func(w *world) string { return fmt.Sprintf("/v1/windows/%d", w.windowID) }, nil},
	"GET /v1/windows/search":  {kindMarket, suanli.ScopeInstanceRead, p("/v1/windows/search?q=hours%3E%3D1"), nil},
	"POST /v1/bookings": {kindSelf, suanli.ScopeInstanceWrite, p("/v1/bookings"), func(w *world) string {
		return fmt.Sprintf(`{"window_id":%d,"hours":1,"gpus":1,"image":"x"}`, w.windowID)
	}},
	"GET /v1/bookings":         {kindSelf, suanli.ScopeInstanceRead, p("/v1/bookings"), nil},
	"GET /v1/bookings/{id}":    {kindObject, suanli.ScopeInstanceRead, func(w *world) string { return fmt.Sprintf("/v1/bookings/%d", w.bookingID) }, nil},
	"DELETE /v1/bookings/{id}": {kindObject, suanli.ScopeInstanceWrite, func(w *world) string { return fmt.Sprintf("/v1/bookings/%d", w.bookingID) }, nil},
	"POST /v1/deferred": {kindSelf, suanli.ScopeInstanceWrite, p("/v1/deferred"), func(w *world) string {
		return fmt.Sprintf(`{"gpus":1,"hours":1,"deadline":%q,"image":"x","cmd":["true"],"max_price":1}`, w.clock.Now().Add(48*time.Hour).Format(time.RFC3339))
	}},
	"POST /v1/schedules":             {kindSelf, suanli.ScopeInstanceWrite, p("/v1/schedules"), p(`{"cron":"0 3 * * *","gpus":1,"hours":1,"image":"x"}`)},
	"GET /v1/schedules":              {kindSelf, suanli.ScopeInstanceRead, p("/v1/schedules"), nil},
	"DELETE /v1/schedules/{id}":      {kindObject, suanli.ScopeInstanceWrite, func(w *world) string { return fmt.Sprintf("/v1/schedules/%d", w.scheduleID) }, nil},
	"GET /v1/machines/{id}/calendar": {kindObject, suanli.ScopeHostRead, machPath("/calendar"), nil},
	"GET /v1/market/prices":          {kindMarket, suanli.ScopeInstanceRead, p("/v1/market/prices?q=gpu_name%3DRTX_4090"), nil},
	"POST /v1/agent/join":            {kindPublic, "", p("/v1/agent/join"), func(*world) string { return `{"token":"` + auth.NewSecret(auth.PrefixJoin) + `"}` }},
	"POST /v1/agent/sync":            {kindObject, suanli.ScopeAgent, p("/v1/agent/sync"), func(w *world) string { return fmt.Sprintf(`{"machine_id":%d}`, w.machineID) }},
}

func (c routeCase) request(w *world) (path, body string) {
	path = c.path(w)
	if c.body != nil {
		body = c.body(w)
	}
	return path, body
}

func TestEveryRouteHasACase(t *testing.T) {
	w := newWorld(t)
	seen := map[string]bool{}
	for _, r := range w.api.Routes() {
		seen[r.Pattern()] = true
		if _, ok := routeCases[r.Pattern()]; !ok {
			t.Errorf("route %s has no case in routeCases: add one, so that the proof covers it", r.Pattern())
		}
		if r.Method != "GET" && !r.Audited && r.Pattern() != "POST /v1/agent/sync" && r.Pattern() != "POST /v1/offers/search" && r.Pattern() != "POST /v1/quotes" {
			t.Errorf("route %s mutates but is not audited", r.Pattern())
		}
	}
	for pat := range routeCases {
		if !seen[pat] {
			t.Errorf("routeCases has %s, which the server does not register", pat)
		}
	}
}

// leaks returns the victim's planted strings and secrets found in a reply,
// leaving out those the request itself carried (an error may echo a name
// from the path).
func (w *world) leaks(s string, request ...string) []string {
	var out []string
	for _, x := range append(slices.Clone(w.planted), w.secrets...) {
		if strings.Contains(s, x) && !strings.Contains(strings.Join(request, " "), x) {
			out = append(out, x)
		}
	}
	return out
}

// TestEveryRouteRefusesOtherTenants is the proof of tenant isolation and
// scopes: every route the server registers is called with the victim's
// objects by another tenant (plain, and claiming the victim's team), by
// the victim's own keys that lack the route's scope, and by an instance's
// token; none sees the victim's data or changes anything it should not.
func TestEveryRouteRefusesOtherTenants(t *testing.T) {
	w := newWorld(t)
	attackerKey := w.attacker.APIKey
	viewBefore := w.view()
	patterns := make([]string, 0, len(routeCases))
	for _, r := range w.api.Routes() {
		patterns = append(patterns, r.Pattern())
	}
	for _, pat := range patterns {
		c, ok := routeCases[pat]
		if !ok {
			continue // TestEveryRouteHasACase says so
		}
		method := strings.SplitN(pat, " ", 2)[0]
		path, body := c.request(w)

		// Another tenant.
		before := w.snapshot()
		r := w.do(attackerKey, "", method, path, body)
		if l := w.leaks(r.body, path, body); len(l) > 0 {
			t.Errorf("%s by another tenant: the reply holds the victim's %q", pat, l)
		}
		if r.status >= 500 {
			t.Errorf("%s by another tenant: %d %s", pat, r.status, r.body)
		}
		switch c.kind {
		case kindObject:
			if r.status != 404 && !(c.scope == suanli.ScopeAgent && r.status == 403) {
				t.Errorf("%s by another tenant: %d %s, want 404 not_found", pat, r.status, r.body)
			}
		case kindAdmin:
			if r.status != 403 {
				t.Errorf("%s by a user: %d %s, want 403 forbidden", pat, r.status, r.body)
			}
		}
		if c.kind == kindObject || c.kind == kindAdmin || c.kind == kindPublic {
			if after := w.snapshot(); after != before {
				t.Errorf("%s by another tenant changed the store:\n%s", pat, diff(before, after))
			}
		}

		// Another tenant claiming the victim's team: the team does not
		// exist for them.
		if c.kind != kindPage {
			before = w.snapshot()
			r = w.do(attackerKey, fmt.Sprint(w.teamID), method, path, body)
			if r.status != 404 || !strings.Contains(r.body, "not found") {
				t.Errorf("%s by another tenant with the victim's team: %d %s, want 404", pat, r.status, r.body)
			}
			if after := w.snapshot(); after != before {
				t.Errorf("%s with the victim's team changed the store:\n%s", pat, diff(before, after))
			}
		}

		// The victim's own key without the route's scope.
		if c.scope != "" {
			var key string
			if c.scope == suanli.ScopeAdmin {
				var rest []string
				for _, s := range suanli.Scopes {
					if s != suanli.ScopeAdmin {
						rest = append(rest, s)
					}
				}
				key = w.key(w.opID, rest...)
			} else {
				var rest []string
				for _, s := range suanli.Scopes {
					if s != c.scope && s != suanli.ScopeAdmin {
						rest = append(rest, s)
					}
				}
				key = w.key(w.victimID, rest...)
			}
			before = w.snapshot()
			r = w.do(key, "", method, path, body)
			if r.status != 403 {
				t.Errorf("%s with a key lacking %s: %d %s, want 403 forbidden", pat, c.scope, r.status, r.body)
			}
			if after := w.snapshot(); after != before {
				t.Errorf("%s with a key lacking %s changed the store:\n%s", pat, c.scope, diff(before, after))
			}
		}

		// The instance's own token: it reads, stops and reports on its
		// instance, nothing else (stop and progress are proven elsewhere).
		allowed := map[string]bool{"GET /v1/me": true, "GET /v1/instances": true, "GET /v1/instances/{id}": true,
			"GET /v1/instances/{id}/logs": true, "GET /v1/instances/{id}/events": true,
			"POST /v1/instances/{id}/stop": true, "POST /v1/instances/{id}/progress": true}
		if c.kind != kindPage && c.kind != kindPublic && !allowed[pat] {
			before = w.snapshot()
			r = w.do(w.instanceToken, "", method, path, body)
			if r.status != 401 && r.status != 403 && r.status != 404 {
				t.Errorf("%s with an instance token: %d %s, want it refused", pat, r.status, r.body)
			}
			if after := w.snapshot(); after != before {
				t.Errorf("%s with an instance token changed the store:\n%s", pat, diff(before, after))
			}
		}
	}
	if after := w.view(); after != viewBefore {
		t.Errorf("the victim's view changed:\nbefore %s\nafter  %s", viewBefore, after)
	}
	w.scanForSecrets()
}

// TestDeadCredentialsFailEverywhere: revoked and expired keys, temporary
// tokens whose parent was revoked or that expired, and instance tokens of a
// destroyed instance or past their expiry fail on every route, changing
// nothing.
func TestDeadCredentialsFailEverywhere(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	dead := map[string]string{}
	revoked := w.key(w.victimID, suanli.ScopeAll)
	k, err := w.client(revoked, "").FindAPIKeys(ctx, false)
	must(t, err)
	_, err = w.victim.RevokeAPIKey(ctx, k[0].ID)
	for _, kk := range k {
		if kk.Prefix == auth.DisplayPrefix(revoked) {
			_, err = w.victim.RevokeAPIKey(ctx, kk.ID)
		}
	}
	must(t, err)
	dead["revoked key"] = revoked

	parent, err := w.victim.CreateAPIKey(ctx, suanli.KeyCreate{Name: "parent", Scopes: []string{suanli.ScopeAll}, TTLSeconds: 86400})
	must(t, err)
	orphan, err := w.client(parent.Secret, "").CreateToken(ctx, suanli.TokenCreate{})
	must(t, err)
	_, err = w.victim.RevokeAPIKey(ctx, parent.ID)
	must(t, err)
	dead["token of a revoked key"] = orphan.Secret

	short, err := w.victim.CreateAPIKey(ctx, suanli.KeyCreate{Name: "short", Scopes: []string{suanli.ScopeAll}, TTLSeconds: 3600})
	must(t, err)
	dead["expired key"] = short.Secret
	tmp, err := w.victim.CreateToken(ctx, suanli.TokenCreate{TTLSeconds: 15 * 60})
	must(t, err)
	dead["expired token"] = tmp.Secret

	in2, err := w.victim.CreateInstance(ctx, suanli.InstanceCreate{OfferID: w.machineID, Image: "x", GPUCount: 1, Cmd: []string{"true"}})
	must(t, err)
	tok2 := w.tokenOf(in2.ID)
	_, err = w.victim.DestroyInstance(ctx, in2.ID)
	must(t, err)
	dead["token of a destroyed instance"] = tok2
	dead["expired instance token"] = w.instanceToken
	dead["forged instance token"] = auth.InstanceToken([]byte("not the server's key, 32 bytes!!"), w.instanceID, w.clock.Now().Add(time.Hour))
	dead["unknown key"] = auth.NewSecret(auth.PrefixKey)
	dead["malformed key"] = w.victimKey[:len(w.victimKey)-1] + "x"

	w.clock.Add(2 * time.Hour)
	for _, r := range w.api.Routes() {
		c, ok := routeCases[r.Pattern()]
		if !ok || c.kind == kindPage {
			continue
		}
		path, body := c.request(w)
		for what, secret := range dead {
			before := w.snapshot()
			rep := w.do(secret, "", r.Method, path, body)
			if rep.status != 401 {
				t.Errorf("%s with a %s: %d %s, want 401", r.Pattern(), what, rep.status, rep.body)
			}
			if after := w.snapshot(); after != before {
				t.Errorf("%s with a %s changed the store:\n%s", r.Pattern(), what, diff(before, after))
			}
		}
	}
}

// scanForSecrets reads the database files and every log line the server
// wrote: no planted secret may be there in the clear.
func (w *world) scanForSecrets() {
	w.t.Helper()
	var blobs []string
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if b, err := os.ReadFile(w.dbPath + suffix); err == nil {
			blobs = append(blobs, string(b))
		}
	}
	if w.db.Dialect().Name == "postgres" {
		blobs = append(blobs, w.snapshot()) // no file to read: every table's rows
	}
	blobs = append(blobs, w.logs.String())
	for _, s := range w.secrets {
		for i, b := range blobs {
			if strings.Contains(b, s) {
				where := []string{"database", "database WAL", "database SHM", "logs"}[min(i, 3)]
				if i == len(blobs)-1 {
					where = "logs"
				}
				w.t.Errorf("secret %.12s… found in the %s", s, where)
			}
		}
	}
	if len(w.logs.String()) == 0 {
		w.t.Errorf("no log lines were captured: the scan proves nothing")
	}
}

func diff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- "+l)
		}
	}
	return strings.Join(out, "\n")
}
