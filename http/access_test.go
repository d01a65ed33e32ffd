package http_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
)

func wantCode(t *testing.T, what string, err error, code string, msg ...string) {
	t.Helper()
	if suanli.ErrorCode(err) != code {
		t.Errorf("%s: %v, want %s", what, err, code)
		return
	}
	for _, m := range msg {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("%s: %q, want it to say %q", what, err, m)
		}
	}
}

func TestKeys(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	c := w.victim
	// Expiry is mandatory and bounded; scopes only narrow.
	_, err := c.CreateAPIKey(ctx, suanli.KeyCreate{Name: "ci", Scopes: []string{suanli.ScopeInstanceRead}})
	wantCode(t, "no ttl", err, suanli.EINVALID, "expires")
	_, err = c.CreateAPIKey(ctx, suanli.KeyCreate{Name: "ci", Scopes: []string{suanli.ScopeInstanceRead}, TTLSeconds: 367 * 86400})
	wantCode(t, "ttl over 366 days", err, suanli.EINVALID, "366 days")
	_, err = c.CreateAPIKey(ctx, suanli.KeyCreate{Name: "ci", Scopes: []string{suanli.ScopeAdmin}, TTLSeconds: 3600})
	wantCode(t, "admin for a user", err, suanli.EINVALID, "operators")
	narrow, err := c.CreateAPIKey(ctx, suanli.KeyCreate{Name: "ci", Scopes: []string{suanli.ScopeInstanceRead, suanli.ScopeKeyWrite}, TTLSeconds: 3600})
	must(t, err)
	if !strings.HasPrefix(narrow.Secret, "sl_live_") || !narrow.ExpiresAt.Equal(w.clock.Now().Add(time.Hour)) {
		t.Fatalf("new key %+v", narrow)
	}
	_, err = w.client(narrow.Secret, "").CreateAPIKey(ctx, suanli.KeyCreate{Name: "wider", Scopes: []string{suanli.ScopeInstanceWrite}, TTLSeconds: 3600})
	wantCode(t, "widening", err, suanli.EINVALID, "only narrow")
	_, err = w.client(narrow.Secret, "").CreateAPIKey(ctx, suanli.KeyCreate{Name: "all", Scopes: []string{"*"}, TTLSeconds: 3600})
	wantCode(t, "* from a narrow key", err, suanli.EINVALID, "widen")
	_, err = w.client(narrow.Secret, "").Balance(ctx)
	wantCode(t, "narrow key reading billing", err, suanli.EFORBIDDEN, "billing:read")

	// Two active keys per name, then rotation.
	_, err = c.CreateAPIKey(ctx, suanli.KeyCreate{Name: "ci", Scopes: []string{suanli.ScopeInstanceRead}, TTLSeconds: 3600})
	must(t, err)
	_, err = c.CreateAPIKey(ctx, suanli.KeyCreate{Name: "ci", Scopes: []string{suanli.ScopeInstanceRead}, TTLSeconds: 3600})
	wantCode(t, "third key named ci", err, suanli.ECONFLICT, `2 keys named "ci" are active`)
	_, err = c.RotateAPIKey(ctx, narrow.ID, suanli.KeyRotate{GraceSeconds: 600})
	wantCode(t, "rotate with a sibling active", err, suanli.ECONFLICT, "sibling")

	solo, err := c.CreateAPIKey(ctx, suanli.KeyCreate{Name: "deploy", Scopes: []string{suanli.ScopeInstanceRead}, TTLSeconds: 7 * 86400})
	must(t, err)
	next, err := c.RotateAPIKey(ctx, solo.ID, suanli.KeyRotate{GraceSeconds: 600})
	must(t, err)
	if next.Name != "deploy" || next.ExpiresAt.Sub(next.CreatedAt) != 7*24*time.Hour || next.Secret == "" {
		t.Errorf("successor %+v: want the same name and lifetime, and a secret", next)
	}
	for _, s := range []string{solo.Secret, next.Secret} {
		if _, _, err := w.client(s, "").FindInstances(ctx, suanli.InstanceFilter{}); err != nil {
			t.Errorf("within the grace both keys work: %v", err)
		}
	}
	w.clock.Add(11 * time.Minute)
	_, _, err = w.client(solo.Secret, "").FindInstances(ctx, suanli.InstanceFilter{})
	wantCode(t, "old key after the grace", err, suanli.EUNAUTHORIZED, "expired")
	// A narrow key cannot rotate a wider one into its own hands.
	wide, err := c.CreateAPIKey(ctx, suanli.KeyCreate{Name: "wide", Scopes: []string{"*"}, TTLSeconds: 3600})
	must(t, err)
	nk, err := c.CreateAPIKey(ctx, suanli.KeyCreate{Name: "nk", Scopes: []string{suanli.ScopeKeyWrite}, TTLSeconds: 3600})
	must(t, err)
	_, err = w.client(nk.Secret, "").RotateAPIKey(ctx, wide.ID, suanli.KeyRotate{})
	wantCode(t, "narrow key rotating a wide one", err, suanli.EFORBIDDEN, "lacks")

	// Last use: time and address; revocation is immediate.
	ks, err := c.FindAPIKeys(ctx, false)
	must(t, err)
	for _, k := range ks {
		if k.ID == narrow.ID && (k.LastUsedAt == nil || k.LastUsedAddr != "127.0.0.1") {
			t.Errorf("key %d last used %v from %q, want now from 127.0.0.1", k.ID, k.LastUsedAt, k.LastUsedAddr)
		}
		if k.Secret != "" {
			t.Errorf("list shows key %d's secret", k.ID)
		}
	}
	_, err = c.RevokeAPIKey(ctx, narrow.ID)
	must(t, err)
	_, _, err = w.client(narrow.Secret, "").FindInstances(ctx, suanli.InstanceFilter{})
	wantCode(t, "revoked key", err, suanli.EUNAUTHORIZED, "revoked")
	_, err = w.attacker.RevokeAPIKey(ctx, wide.ID)
	wantCode(t, "revoking another user's key", err, suanli.ENOTFOUND)
}

func TestTemporaryTokens(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	parent, err := w.victim.CreateAPIKey(ctx, suanli.KeyCreate{Name: "p", Scopes: []string{suanli.ScopeInstanceRead, suanli.ScopeBillingRead}, TTLSeconds: 2 * 3600})
	must(t, err)
	pc := w.client(parent.Secret, "")
	tok, err := pc.CreateToken(ctx, suanli.TokenCreate{Scopes: []string{suanli.ScopeInstanceRead}})
	must(t, err)
	if !strings.HasPrefix(tok.Secret, auth.PrefixTemp) || tok.ExpiresAt.Sub(w.clock.Now()) != time.Hour || tok.ParentID != parent.ID {
		t.Fatalf("token %+v: want sl_tmp_, 1h by default, cut from the parent", tok)
	}
	tc := w.client(tok.Secret, "")
	if _, err := tc.FindInstanceByID(ctx, w.instanceID); err != nil {
		t.Errorf("token reading an instance: %v", err)
	}
	_, err = tc.Balance(ctx)
	wantCode(t, "token beyond its scopes", err, suanli.EFORBIDDEN)
	_, err = pc.CreateToken(ctx, suanli.TokenCreate{Scopes: []string{suanli.ScopeInstanceWrite}})
	wantCode(t, "token wider than its key", err, suanli.EINVALID, "only narrow")
	for _, ttl := range []time.Duration{14 * time.Minute, 13 * time.Hour} {
		_, err = pc.CreateToken(ctx, suanli.TokenCreate{TTLSeconds: int64(ttl / time.Second)})
		wantCode(t, fmt.Sprintf("ttl %s", ttl), err, suanli.EINVALID, "15m to 12h")
	}
	long, err := pc.CreateToken(ctx, suanli.TokenCreate{TTLSeconds: 12 * 3600})
	must(t, err)
	if !long.ExpiresAt.Equal(parent.ExpiresAt) {
		t.Errorf("a 12h token from a key with 2h left expires %s, want the key's expiry %s", long.ExpiresAt, parent.ExpiresAt)
	}
	_, err = tc.CreateToken(ctx, suanli.TokenCreate{})
	wantCode(t, "token from a token", err, suanli.EFORBIDDEN, "temporary token")
	all, err := w.victim.CreateToken(ctx, suanli.TokenCreate{})
	must(t, err)
	_, err = w.client(all.Secret, "").CreateAPIKey(ctx, suanli.KeyCreate{Name: "x", Scopes: []string{"*"}, TTLSeconds: 3600})
	wantCode(t, "key from a token", err, suanli.EFORBIDDEN, "temporary token")

	// Revoking the parent kills its tokens.
	_, err = w.victim.RevokeAPIKey(ctx, parent.ID)
	must(t, err)
	_, err = tc.FindInstanceByID(ctx, w.instanceID)
	wantCode(t, "token after its parent's revocation", err, suanli.EUNAUTHORIZED, "revoked")
	// Expiry.
	w.clock.Add(13 * time.Hour)
	_, err = w.client(all.Secret, "").FindInstanceByID(ctx, w.instanceID)
	wantCode(t, "expired token", err, suanli.EUNAUTHORIZED, "expired")
}

func TestTeamsAndRoles(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	owner := w.victim
	team := fmt.Sprint(w.teamID)
	// Invitations: one per role; bound to an account name; single use.
	invite := func(role, account string) string {
		inv, err := owner.CreateInvitation(ctx, w.teamID, suanli.InvitationCreate{Role: role, Account: account})
		must(t, err)
		if !strings.HasPrefix(inv.Token, auth.PrefixInvite) {
			t.Fatalf("invitation token %q", inv.Token)
		}
		return inv.Token
	}
	viewerC, viewerID, _ := w.account("viewer")
	managerC, managerID, _ := w.account("boss")
	tv := invite(suanli.TeamRoleBillingViewer, "viewer")
	_, err := w.attacker.AcceptInvitation(ctx, suanli.InvitationAccept{Token: tv})
	wantCode(t, "invitation for another account", err, suanli.EUNAUTHORIZED, "another account")
	_, err = viewerC.AcceptInvitation(ctx, suanli.InvitationAccept{Token: tv})
	must(t, err)
	_, err = viewerC.AcceptInvitation(ctx, suanli.InvitationAccept{Token: tv})
	wantCode(t, "invitation used twice", err, suanli.EUNAUTHORIZED, "already used")
	_, err = managerC.AcceptInvitation(ctx, suanli.InvitationAccept{Token: invite(suanli.TeamRoleManager, "")})
	must(t, err)

	// The team owns a machine (joined with a token made as the team) and
	// has its own balance; a member rents on it.
	mateT, viewerT, managerT := w.client(w.mate.APIKey, team), w.client(viewerC.APIKey, team), w.client(managerC.APIKey, team)
	jt, err := managerT.CreateJoinToken(ctx, time.Hour)
	must(t, err)
	j, err := w.client("", "").Join(ctx, suanli.JoinRequest{Token: jt.Token, Runtime: "process", Hardware: suanli.Hardware{CPUArch: "amd64",
		CPUCores: 4, RAMMB: 8192, DiskFreeGB: 100, GPUs: []suanli.GPU{{Index: 0, Name: "RTX 4090", MemoryMB: 24564, Simulated: true}}}})
	must(t, err)
	price := suanli.Money(100_000)
	_, err = managerT.ListMachine(ctx, j.MachineID, suanli.ListingUpdate{PriceGPU: &price})
	must(t, err)
	_, err = w.victim.FindMachineByID(ctx, j.MachineID)
	wantCode(t, "the team's machine seen by its owner without --team", err, suanli.ENOTFOUND)
	_, err = mateT.CreateInstance(ctx, suanli.InstanceCreate{OfferID: j.MachineID, Image: "x", GPUCount: 1, Cmd: []string{"true"}})
	wantCode(t, "renting with an empty team balance", err, suanli.EPAYMENTREQUIRED)
	_, err = w.op.Credit(ctx, w.teamID, suanli.Dollars(20), "team budget")
	must(t, err)
	in, err := mateT.CreateInstance(ctx, suanli.InstanceCreate{OfferID: j.MachineID, Image: "x", GPUCount: 1, Cmd: []string{"true"}})
	must(t, err)
	if in.AccountID != w.teamID {
		t.Fatalf("team rental belongs to account %d, want the team %d", in.AccountID, w.teamID)
	}
	if _, err := mateT.StopInstance(ctx, in.ID); err != nil {
		t.Errorf("member stopping a team instance: %v", err)
	}
	_, err = w.mate.FindInstanceByID(ctx, in.ID)
	wantCode(t, "member without --team", err, suanli.ENOTFOUND)
	_, err = mateT.Balance(ctx)
	wantCode(t, "member reading billing", err, suanli.EFORBIDDEN)
	b, err := viewerT.Balance(ctx)
	must(t, err)
	if b.AccountID != w.teamID || b.Balance != suanli.Dollars(20) {
		t.Errorf("team balance %+v, want the team's $20", b)
	}
	_, _, err = viewerT.FindInstances(ctx, suanli.InstanceFilter{})
	wantCode(t, "billing viewer listing instances", err, suanli.EFORBIDDEN)
	_, err = viewerT.StopInstance(ctx, in.ID)
	wantCode(t, "billing viewer stopping", err, suanli.EFORBIDDEN)
	_, err = mateT.CreateInvitation(ctx, w.teamID, suanli.InvitationCreate{Role: suanli.TeamRoleMember})
	wantCode(t, "member inviting", err, suanli.EFORBIDDEN)
	_, err = managerT.CreateInvitation(ctx, w.teamID, suanli.InvitationCreate{Role: suanli.TeamRoleOwner})
	wantCode(t, "manager inviting an owner", err, suanli.EFORBIDDEN, "only an owner")
	if _, err := managerC.UpdateTeamMember(ctx, w.teamID, viewerID, suanli.MemberUpdate{Role: suanli.TeamRoleMember}); err != nil {
		t.Errorf("manager changing a viewer to member: %v", err)
	}
	_, err = managerC.UpdateTeamMember(ctx, w.teamID, w.victimID, suanli.MemberUpdate{Role: suanli.TeamRoleMember})
	wantCode(t, "manager demoting the owner", err, suanli.EFORBIDDEN)
	_, err = managerC.SetResidency(ctx, suanli.ResidencyUpdate{AllowedCountries: []string{"DE"}})
	if err != nil { // managerC without --team sets its own residency: allowed
		t.Errorf("own residency: %v", err)
	}
	_, err = managerT.SetResidency(ctx, suanli.ResidencyUpdate{AllowedCountries: []string{"DE"}})
	wantCode(t, "manager setting the team's residency", err, suanli.EFORBIDDEN)
	if err := owner.RemoveTeamMember(ctx, w.teamID, w.victimID); suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Errorf("last owner leaving: %v, want conflict", err)
	}
	if err := managerC.RemoveTeamMember(ctx, w.teamID, managerID); err != nil {
		t.Errorf("manager leaving: %v", err)
	}
	_, err = managerT.Balance(ctx)
	wantCode(t, "former manager", err, suanli.ENOTFOUND)
	// The team cannot be acted on as a team by non-members, by name either.
	_, err = w.client(w.attacker.APIKey, "victimteam").Me(ctx)
	wantCode(t, "unknown team name", err, suanli.ENOTFOUND)
	ts, err := w.mate.FindTeams(ctx)
	must(t, err)
	if len(ts) != 1 || ts[0].ID != w.teamID || ts[0].Role != suanli.TeamRoleMember {
		t.Errorf("mate's teams %+v", ts)
	}
}

func TestInstanceToken(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	other, err := w.victim.CreateInstance(ctx, suanli.InstanceCreate{OfferID: w.machineID, Image: "x", GPUCount: 1, Cmd: []string{"true"}})
	must(t, err)
	tc := w.client(w.instanceToken, "")
	if in, err := tc.FindInstanceByID(ctx, w.instanceID); err != nil || in.ID != w.instanceID {
		t.Fatalf("instance reading itself: %v", err)
	}
	_, err = tc.FindInstanceByID(ctx, other.ID)
	wantCode(t, "instance reading its sibling", err, suanli.ENOTFOUND)
	ins, n, err := tc.FindInstances(ctx, suanli.InstanceFilter{})
	if err != nil || n != 1 || ins[0].ID != w.instanceID {
		t.Errorf("instance listing: %d instances (%v), want only itself", n, err)
	}
	pct := 40.0
	if _, err := tc.ReportProgress(ctx, w.instanceID, suanli.Progress{Message: "epoch 4 of 10", Percent: &pct}); err != nil {
		t.Fatalf("progress: %v", err)
	}
	ev, err := w.victim.InstanceEvents(ctx, w.instanceID)
	must(t, err)
	if last := ev[len(ev)-1]; last.Message != "progress 40%: epoch 4 of 10" {
		t.Errorf("last event %+v, want the progress note", last)
	}
	_, err = tc.DestroyInstance(ctx, w.instanceID)
	wantCode(t, "instance destroying itself", err, suanli.EFORBIDDEN)
	_, err = tc.CreateToken(ctx, suanli.TokenCreate{})
	wantCode(t, "instance cutting a token", err, suanli.EFORBIDDEN)
	if in, err := tc.StopInstance(ctx, w.instanceID); err != nil || in.Desired != suanli.DesiredStopped {
		t.Errorf("instance stopping itself: %v", err)
	}
	// A fresh token comes every half hour; the old one stays valid until
	// it expires. Step to one minute into the next half-hour window, so the
	// test reads the same whatever the wall clock said when it began.
	now := w.clock.Now()
	w.clock.Add(now.Truncate(auth.InstanceTokenTTL / 2).Add(auth.InstanceTokenTTL/2 + time.Minute).Sub(now))
	if fresh := w.tokenOf(w.instanceID); fresh == w.instanceToken {
		t.Errorf("the token did not change after half its life")
	}
	if _, err := tc.FindInstanceByID(ctx, w.instanceID); err != nil {
		t.Errorf("old token within its life: %v", err)
	}
	_, err = w.victim.DestroyInstance(ctx, w.instanceID)
	must(t, err)
	_, err = tc.FindInstanceByID(ctx, w.instanceID)
	wantCode(t, "token of a destroyed instance", err, suanli.EUNAUTHORIZED, "destroyed")
}

func TestResidency(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	us := "US"
	_, err := w.victim.ListMachine(ctx, w.machineID, suanli.ListingUpdate{Country: &us})
	must(t, err)
	_, err = w.victim.SetResidency(ctx, suanli.ResidencyUpdate{AllowedCountries: []string{"de", "FR"}})
	must(t, err)
	_, err = w.victim.CreateInstance(ctx, suanli.InstanceCreate{OfferID: w.machineID, Image: "x", GPUCount: 1, Cmd: []string{"true"}})
	wantCode(t, "renting in the US", err, suanli.EFORBIDDEN, fmt.Sprintf("offer %d is in US; your account allows only DE, FR", w.machineID))
	_, err = w.victim.CreateInstance(ctx, suanli.InstanceCreate{OfferID: w.machineID, Image: "x", AllowedCountries: []string{"US"}})
	wantCode(t, "a rental wider than the account", err, suanli.EINVALID, "outside what your account allows")
	_, err = w.victim.SetResidency(ctx, suanli.ResidencyUpdate{AllowedCountries: []string{"Germany"}})
	wantCode(t, "a malformed entry", err, suanli.EINVALID, "neither a country code")
	de := "DE"
	_, err = w.victim.ListMachine(ctx, w.machineID, suanli.ListingUpdate{Country: &de})
	must(t, err)
	_, err = w.victim.CreateInstance(ctx, suanli.InstanceCreate{OfferID: w.machineID, Image: "x", GPUCount: 1, AllowedCountries: []string{"FR"}, Cmd: []string{"true"}})
	wantCode(t, "rental narrowed to FR on a DE offer", err, suanli.EFORBIDDEN, "this rental allows only FR")
	in, err := w.victim.CreateInstance(ctx, suanli.InstanceCreate{OfferID: w.machineID, Image: "x", GPUCount: 1, Cmd: []string{"true"}})
	must(t, err)
	if strings.Join(in.Allowed, ",") != "DE,FR" {
		t.Errorf("instance records residency %v", in.Allowed)
	}
}

func TestSecretsGoToTheAgentOnly(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	in, err := w.victim.FindInstanceByID(ctx, w.instanceID)
	must(t, err)
	if in.SecretEnv["VICTIM_SECRET_NAME"] != suanli.SecretMask || in.RegistryAuth.Password != suanli.SecretMask || in.Env["VICTIM_SECRET_NAME"] != "" {
		t.Errorf("the API shows %+v %+v, want names with ***", in.SecretEnv, in.RegistryAuth)
	}
	r, err := w.agent.Sync(ctx, &suanli.SyncRequest{})
	must(t, err)
	var spec suanli.InstanceSpec
	for _, s := range r.Instances {
		if s.ID == w.instanceID {
			spec = s
		}
	}
	if !strings.HasPrefix(spec.Env["VICTIM_SECRET_NAME"], "planted-secret-") || spec.RegistryAuth == nil ||
		!strings.HasPrefix(spec.RegistryAuth.Password, "planted-registry-password-") {
		t.Errorf("the agent's spec lacks the secrets: env %v, registry %+v", spec.Env, spec.RegistryAuth)
	}
	_, err = w.victim.CreateInstance(ctx, suanli.InstanceCreate{OfferID: w.machineID, Image: "x", SecretEnv: map[string]string{"SUANLI_X": "y"}})
	wantCode(t, "reserved secret name", err, suanli.EINVALID, "reserved")
	w.scanForSecrets()
}

func TestLockoutAndRateLimits(t *testing.T) {
	w := newWorld(t)
	w.api.Lockout.MaxFailures, w.api.Lockout.LockFor = 5, 10*time.Minute
	w.api.Limiter.Rate, w.api.Limiter.Burst = 1.0/6, 3
	bad := auth.NewSecret(auth.PrefixKey)
	for i := 0; i < 5; i++ {
		if r := w.do(bad, "", "GET", "/v1/me", ""); r.status != 401 {
			t.Fatalf("bad key attempt %d: %d", i, r.status)
		}
	}
	r := w.do(w.victimKey, "", "GET", "/v1/me", "")
	if r.status != 429 || r.header.Get("Retry-After") != "600" || !strings.Contains(r.body, "rate_limited") {
		t.Fatalf("after 5 failures even a good key gets %d (Retry-After %q) %s, want 429 with Retry-After 600", r.status, r.header.Get("Retry-After"), r.body)
	}
	w.clock.Add(10 * time.Minute)
	if r := w.do(w.victimKey, "", "GET", "/v1/me", ""); r.status != 200 {
		t.Fatalf("after the lockout: %d %s", r.status, r.body)
	}
	// Join tokens guessed count as failures too.
	for i := 0; i < 5; i++ {
		w.clock.Add(7 * time.Second)
		w.do("", "", "POST", "/v1/agent/join", `{"token":"`+auth.NewSecret(auth.PrefixJoin)+`"}`)
	}
	if r := w.do(w.victimKey, "", "GET", "/v1/me", ""); r.status != 429 {
		t.Fatalf("after 5 bad join tokens: %d, want 429", r.status)
	}
	w.clock.Add(10 * time.Minute)
	// Key routes: a burst of 3, then one per 6 s.
	for i := 0; i < 3; i++ {
		if r := w.do(w.victimKey, "", "POST", "/v1/auth/token", ""); r.status != 201 {
			t.Fatalf("token %d: %d %s", i, r.status, r.body)
		}
	}
	r = w.do(w.victimKey, "", "POST", "/v1/auth/token", "")
	if r.status != 429 || r.header.Get("Retry-After") != "6" {
		t.Fatalf("4th token at once: %d Retry-After %q, want 429 after 6s", r.status, r.header.Get("Retry-After"))
	}
	_, err := w.victim.CreateToken(t.Context(), suanli.TokenCreate{})
	var se *suanli.Error
	if !asError(err, &se) || se.Code != suanli.ERATELIMITED || se.RetryAfterS != 6 {
		t.Errorf("client sees %#v, want rate_limited with retry_after_s 6", err)
	}
	if r := w.do(w.victimKey, "", "GET", "/v1/instances", ""); r.status != 200 {
		t.Errorf("other routes are not limited: %d", r.status)
	}
	w.clock.Add(6 * time.Second)
	if r := w.do(w.victimKey, "", "POST", "/v1/auth/token", ""); r.status != 201 {
		t.Errorf("after 6s: %d", r.status)
	}
}

func TestAuditRecordsMutations(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	r := w.do(w.victimKey, "", "POST", "/v1/instances/"+fmt.Sprint(w.instanceID)+"/stop", "")
	if r.status != 200 {
		t.Fatal(r.body)
	}
	rid := r.header.Get("X-Request-Id")
	w.do(w.attacker.APIKey, "", "DELETE", "/v1/instances/"+fmt.Sprint(w.instanceID), "")
	w.do(w.victimKey, "", "GET", "/v1/instances", "")

	es, err := w.victim.FindAuditEvents(ctx, suanli.AuditFilter{})
	must(t, err)
	var stop *suanli.AuditEvent
	for _, e := range es {
		if e.RequestID == rid {
			stop = e
		}
		if strings.HasPrefix(e.Action, "GET ") {
			t.Errorf("a read was audited: %+v", e)
		}
		if e.ActorID == w.attackerID {
			t.Errorf("the victim sees the attacker's entry %+v", e)
		}
	}
	if stop == nil || stop.ActorID != w.victimID || stop.AccountID != w.victimID || stop.Action != "POST /v1/instances/{id}/stop" ||
		stop.Target != fmt.Sprintf("/v1/instances/%d/stop", w.instanceID) || stop.Source != "127.0.0.1" || stop.Result != "200" || stop.KeyID == 0 {
		t.Errorf("stop entry %+v", stop)
	}
	all, err := w.op.FindAuditEvents(ctx, suanli.AuditFilter{Limit: 1000})
	must(t, err)
	var refused, created, teamCreated bool
	for _, e := range all {
		refused = refused || (e.ActorID == w.attackerID && e.Action == "DELETE /v1/instances/{id}" && e.Result == "404 not_found")
		created = created || (e.Action == "POST /v1/instances" && e.Target == fmt.Sprintf("instance %d", w.instanceID) && e.Result == "201")
		teamCreated = teamCreated || (e.Action == "POST /v1/teams" && e.Target == fmt.Sprintf("team %d", w.teamID))
	}
	if !refused || !created || !teamCreated {
		t.Errorf("operator's audit view: refused=%v created=%v team=%v in %d entries", refused, created, teamCreated, len(all))
	}
	_, err = w.victim.VerifyAudit(ctx)
	wantCode(t, "user verifying", err, suanli.EFORBIDDEN)
	if _, err := w.svc.Audit.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := w.op.VerifyAudit(ctx)
	must(t, err)
	if !rep.OK || rep.Checkpoints != 1 || rep.Entries < 10 {
		t.Fatalf("verify: %+v", rep)
	}
	if _, err := w.db.SQL().Exec(`UPDATE audit_events SET result = '200' WHERE result = '404 not_found'`); err != nil {
		t.Fatal(err)
	}
	rep, err = w.op.VerifyAudit(ctx)
	must(t, err)
	if rep.OK || !strings.Contains(strings.Join(rep.Problems, "\n"), "edited") {
		t.Errorf("verify after editing an entry: %+v", rep)
	}
}

func TestLeaseLossIsAudited(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.clock.Add(10 * time.Minute) // past lost_after and the failover grace
	must(t, w.svc.CheckLeases(ctx))
	es, err := w.victim.FindAuditEvents(ctx, suanli.AuditFilter{})
	must(t, err)
	var machine, instance bool
	for _, e := range es {
		machine = machine || (e.Action == "machine.lease_lost" && e.Target == fmt.Sprintf("machine %d", w.machineID))
		instance = instance || (e.Action == "instance.lost" && e.Target == fmt.Sprintf("instance %d", w.instanceID))
	}
	if !machine || !instance {
		t.Errorf("lease loss not audited: machine=%v instance=%v", machine, instance)
	}
}
