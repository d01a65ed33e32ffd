package vastapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/suanli/suanli"
)

// TestAPIKeys creates a scoped key from Vast's permission categories, uses
// it, lists it, and deletes it.
func TestAPIKeys(t *testing.T) {
	e := newEnv(t)
	k := e.do("POST", "/api/v0/auth/apikeys/", e.renterKey,
		`{"name": "ci", "permissions": {"api": {"instance_read": {}, "misc": {}, "billing_write": {}}}, "key_params": null}`).obj(t)
	secret, _ := k["key"].(string)
	if k["success"] != true || !strings.HasPrefix(secret, "sl_live_") || k["id"] == nil {
		t.Fatalf("create = %v", k)
	}
	if un := k["unmapped_permissions"].([]any); len(un) != 1 || un[0] != "billing_write" {
		t.Errorf("unmapped = %v, want billing_write (Suanli has no credit transfers)", un)
	}
	perms := path(t, k, "permissions", "api").(map[string]any)
	if _, ok := perms["instance_read"]; !ok || len(perms) != 2 { // instance_read and misc: both instance:read
		t.Errorf("permissions = %v", perms)
	}
	// The new key searches and reads, and may not rent.
	e.do("POST", "/api/v0/bundles/", secret, `{}`).obj(t)
	e.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", e.machineID), secret, `{"image": "busybox", "onstart": "true"}`).vastError(t, http.StatusForbidden, "permission_denied")

	var list struct {
		APIKeys []map[string]any `json:"apikeys"`
	}
	e.do("GET", "/api/v0/auth/apikeys", e.renterKey, "").json(t, &list)
	found := false
	for _, row := range list.APIKeys {
		if row["name"] == "ci" {
			found = true
			if row["key"] == secret || !strings.HasPrefix(secret, row["key"].(string)) {
				t.Errorf("listed key = %v: want the prefix, never the secret", row["key"])
			}
		}
	}
	if !found {
		t.Fatalf("list = %v", list.APIKeys)
	}
	id := k["id"].(interface{ String() string }).String()
	one := e.do("GET", "/api/v0/auth/apikeys/"+id+"/", e.renterKey, "").obj(t)
	if one["name"] != "ci" || one["rights"] != "custom" {
		t.Errorf("show = %v", one)
	}
	// A scoped key cannot make a wider one.
	e.do("POST", "/api/v0/auth/apikeys/", secret, `{"name": "wider", "permissions": {"api": {"instance_write": {}}}}`).
		vastError(t, http.StatusForbidden, "permission_denied")
	for _, c := range []struct{ body, field string }{
		{`{"name": "x", "permissions": {"api": {"root": {}}}}`, "permissions"},
		{`{"name": "x", "permissions": {"api": {"billing_write": {}}}}`, "permissions"},
		{`{"name": "x", "permissions": {"api": {"instance_read": {"constraints": {"id": {"eq": 1}}}}}}`, "permissions"},
		{`{"name": "x", "key_params": {"ip_whitelist": ["1.2.3.4"]}}`, "key_params"},
	} {
		m := e.do("POST", "/api/v0/auth/apikeys/", e.renterKey, c.body).vastError(t, http.StatusBadRequest, "invalid_args")
		if m["field"] != c.field {
			t.Errorf("create %s: %v, want field %s", c.body, m, c.field)
		}
	}
	e.do("DELETE", "/api/v0/auth/apikeys/"+id+"/", e.other, "").vastError(t, http.StatusNotFound, "not_found")
	e.do("DELETE", "/api/v0/auth/apikeys/"+id+"/", e.renterKey, "").obj(t)
	e.do("POST", "/api/v0/bundles/", secret, `{}`).vastError(t, http.StatusUnauthorized, "invalid_api_key")

	// Every category is a key with every scope.
	all := e.do("POST", "/api/v0/auth/apikeys/", e.renterKey, `{"permissions": {"api": {"instance_read": {}, "instance_write": {},
		"user_read": {}, "user_write": {}, "billing_read": {}, "billing_write": {}, "machine_read": {}, "machine_write": {},
		"misc": {}, "team_read": {}, "team_write": {}}}}`).obj(t)
	if all["rights"] != "full" {
		t.Errorf("all categories = %v", all)
	}
}

// TestAuditAndLockout checks that Vast-API mutations reach the audit log
// (path only: no query string, no key), and that failed authentications
// lock an address out of both APIs.
func TestAuditAndLockout(t *testing.T) {
	e := newEnv(t)
	id := e.createInstance(`{"image": "busybox", "onstart": "true", "label": "audited"}`)
	e.do("PUT", fmt.Sprintf("/api/v0/instances/%d/?api_key=%s", id, e.renterKey), "", `{"label": "again"}`).obj(t)
	e.do("POST", "/api/v0/bundles/", e.renterKey, `{}`).obj(t) // a read: not audited
	evs, err := e.svc.FindAuditEvents(e.ctx(e.renterID), suanli.AuditFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, ev := range evs {
		actions = append(actions, ev.Action+" "+ev.Target+" "+ev.Result)
		if strings.Contains(ev.Target, "api_key") || strings.Contains(ev.Target, e.renterKey) {
			t.Errorf("audit target %q holds the query string", ev.Target)
		}
	}
	all := strings.Join(actions, "\n")
	for _, want := range []string{
		fmt.Sprintf("PUT /api/v0/asks/{id} /api/v0/asks/%d/ 200", e.machineID),
		fmt.Sprintf("PUT /api/v0/instances/{id} /api/v0/instances/%d/ 200", id),
	} {
		if !strings.Contains(all, want) {
			t.Errorf("audit lacks %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "bundles") {
		t.Errorf("a search was audited:\n%s", all)
	}

	// Ten wrong keys lock the address out, here and on the native API.
	for i := 0; i < 10; i++ {
		e.do("GET", "/api/v0/users/current", "sl_live_wrong", "").vastError(t, http.StatusUnauthorized, "invalid_api_key")
	}
	r := e.do("GET", "/api/v0/users/current", e.renterKey, "")
	r.vastError(t, http.StatusTooManyRequests, "rate_limited")
	if r.header.Get("Retry-After") == "" {
		t.Error("no Retry-After on a lockout")
	}
	if n := e.do("GET", "/v1/me", e.renterKey, ""); n.status != http.StatusTooManyRequests {
		t.Errorf("native API after a Vast-API lockout: %d", n.status)
	}
	// Result URLs need no key and are not locked out.
	req, _ := http.NewRequest("GET", e.url+"/api/v0/gpu_names/unique/", nil)
	if g := e.send(req); g.status != http.StatusOK {
		t.Errorf("gpu names during a lockout: %d", g.status)
	}
}

// TestRegistryLogin passes Vast's image_login on as the native registry
// credential, whose password is never shown.
func TestRegistryLogin(t *testing.T) {
	e := newEnv(t)
	id := e.createInstance(`{"image": "registry.example/private:1", "onstart": "true", "image_login": "-u bob -p s3cret registry.example"}`)
	in, err := e.svc.FindInstanceByID(e.ctx(e.renterID), id)
	if err != nil {
		t.Fatal(err)
	}
	if ra := in.RegistryAuth; ra == nil || ra.Username != "bob" || ra.Server != "registry.example" || ra.Password == "s3cret" {
		t.Errorf("registry auth = %+v, want bob at registry.example with the password masked", ra)
	}
	if b := e.do("GET", fmt.Sprintf("/api/v0/instances/%d/", id), e.renterKey, "").body; strings.Contains(string(b), "s3cret") {
		t.Error("the registry password appears in the instance row")
	}
}

// TestOtherTenant calls every route that names an object of the renter's
// with another tenant's key: each answers not_found, and nothing changes.
func TestOtherTenant(t *testing.T) {
	e := newEnv(t)
	id := e.createInstance(`{"image": "busybox", "onstart": "sleep 600", "label": "mine"}`)
	e.waitStatus(id, "running")
	k := e.do("POST", "/api/v0/ssh/", e.renterKey, fmt.Sprintf(`{"ssh_key": %q}`, testKey(t, "mine"))).obj(t)
	key := e.do("POST", "/api/v0/auth/apikeys/", e.renterKey, `{"name": "mine", "permissions": {"api": {"instance_read": {}}}}`).obj(t)
	before := e.show(id)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v0/instances/%d/", ""},
		{"PUT", "/api/v0/instances/%d/", `{"state": "stopped"}`},
		{"PUT", "/api/v0/instances/%d/", `{"label": "theirs"}`},
		{"DELETE", "/api/v0/instances/%d/", ""},
		{"PUT", "/api/v0/instances/reboot/%d/", ""},
		{"PUT", "/api/v0/instances/request_logs/%d/", `{"tail": "10"}`},
		{"PUT", "/api/v0/instances/command/%d/", `{"command": "true"}`},
		{"GET", "/api/v0/machines/%d", ""},
		{"DELETE", "/api/v0/machines/%d/asks/", ""},
		{"PUT", "/api/v0/machines/%d/minbid/", `{"price": 0.01}`},
	} {
		target := id
		if strings.Contains(c.path, "machines") {
			target = e.machineID
		}
		p := fmt.Sprintf(c.path, target)
		e.do(c.method, p, e.other, c.body).vastError(t, http.StatusNotFound, "not_found")
	}
	e.do("PUT", "/api/v0/instances/", e.other, fmt.Sprintf(`{"ids": [%d], "state": "stopped"}`, id)).vastError(t, http.StatusNotFound, "not_found")
	e.do("DELETE", fmt.Sprintf("/api/v0/ssh/%s/", k["id"]), e.other, "").vastError(t, http.StatusNotFound, "not_found")
	e.do("DELETE", fmt.Sprintf("/api/v0/auth/apikeys/%s/", key["id"]), e.other, "").vastError(t, http.StatusNotFound, "not_found")
	after := e.show(id)
	for _, f := range []string{"actual_status", "intended_status", "label"} {
		if before[f] != after[f] {
			t.Errorf("%s changed from %v to %v by another tenant", f, before[f], after[f])
		}
	}
	m, err := e.svc.FindMachineByID(e.ctx(e.renterID), e.machineID)
	if err != nil || !m.Listing.Listed || m.Listing.MinBid != 200_000 {
		t.Errorf("machine changed by another tenant: %+v (%v)", m.Listing, err)
	}
	var list []map[string]any
	e.do("GET", "/api/v0/ssh/", e.other, "").json(t, &list)
	if len(list) != 0 {
		t.Errorf("other tenant's ssh keys = %v", list)
	}
	var ms struct {
		Machines []map[string]any `json:"machines"`
	}
	e.do("GET", "/api/v0/machines?owner=me", e.other, "").json(t, &ms)
	if len(ms.Machines) != 0 {
		t.Errorf("other tenant's machines = %v", ms.Machines)
	}
}
