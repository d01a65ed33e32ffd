package auth_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
)

func TestCheckScopesOnlyNarrow(t *testing.T) {
	user := &suanli.Principal{Role: suanli.RoleUser, Scopes: []string{suanli.ScopeAll}}
	narrow := &suanli.Principal{Role: suanli.RoleUser, Scopes: []string{suanli.ScopeInstanceRead, suanli.ScopeBillingRead}}
	op := &suanli.Principal{Role: suanli.RoleOperator, Scopes: []string{suanli.ScopeAll}}
	cases := []struct {
		caller *suanli.Principal
		scopes []string
		ok     bool
	}{
		{user, []string{suanli.ScopeInstanceRead}, true},
		{user, []string{suanli.ScopeAll}, true},
		{user, []string{suanli.ScopeAdmin}, false},
		{op, []string{suanli.ScopeAdmin}, true},
		{user, []string{"instance:delete"}, false},
		{user, nil, false},
		{narrow, []string{suanli.ScopeInstanceRead}, true},
		{narrow, []string{suanli.ScopeInstanceWrite}, false},
		{narrow, []string{suanli.ScopeAll}, false},
		{user, []string{suanli.ScopeAgent}, false},
		{user, []string{suanli.ScopeInstanceSelf}, false},
	}
	for _, c := range cases {
		err := auth.CheckScopes(c.caller, c.scopes)
		if (err == nil) != c.ok {
			t.Errorf("CheckScopes(%v, %v) = %v, want ok=%v", c.caller.Scopes, c.scopes, err, c.ok)
		}
		if err != nil && suanli.ErrorCode(err) != suanli.EINVALID {
			t.Errorf("CheckScopes error code %q, want invalid", suanli.ErrorCode(err))
		}
	}
}

func TestRoleScopes(t *testing.T) {
	member := &suanli.Principal{Role: suanli.RoleUser, Scopes: auth.Intersect([]string{suanli.ScopeAll}, auth.RoleScopes(suanli.TeamRoleMember))}
	if !member.Can(suanli.ScopeInstanceWrite) || member.Can(suanli.ScopeBillingRead) || member.Can(suanli.ScopeTeamWrite) {
		t.Errorf("member scopes %v: want instance write, no billing, no team management", member.Scopes)
	}
	viewer := &suanli.Principal{Scopes: auth.Intersect([]string{suanli.ScopeAll}, auth.RoleScopes(suanli.TeamRoleBillingViewer))}
	if !viewer.Can(suanli.ScopeBillingRead) || viewer.Can(suanli.ScopeInstanceRead) || viewer.Can(suanli.ScopeInstanceWrite) {
		t.Errorf("billing viewer scopes %v: want billing read only", viewer.Scopes)
	}
	// A narrow key stays narrow inside a team; admin never survives a team.
	got := auth.Intersect([]string{suanli.ScopeInstanceRead, suanli.ScopeAdmin}, auth.RoleScopes(suanli.TeamRoleOwner))
	if !slices.Equal(got, []string{suanli.ScopeInstanceRead}) {
		t.Errorf("Intersect(read+admin, owner) = %v, want [instance:read]", got)
	}
	if auth.RoleRank(suanli.TeamRoleOwner) <= auth.RoleRank(suanli.TeamRoleManager) || auth.ValidTeamRole("admin") {
		t.Errorf("role ranks or validity wrong")
	}
}

func TestInstanceToken(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	now := time.Date(2026, 5, 1, 10, 20, 0, 0, time.UTC)
	exp := auth.InstanceTokenExpiry(now)
	if exp.Sub(now) < auth.InstanceTokenTTL/2 || exp.Sub(now) > auth.InstanceTokenTTL {
		t.Fatalf("expiry %s is %s after issue, want between half and one TTL", exp, exp.Sub(now))
	}
	if auth.InstanceTokenExpiry(now.Add(time.Minute)) != exp {
		t.Errorf("token expiry changed within one window: the agent would see a new token every sync")
	}
	tok := auth.InstanceToken(key, 42, exp)
	if !strings.HasPrefix(tok, auth.PrefixInstance) {
		t.Fatalf("token %q lacks its prefix", tok)
	}
	id, got, ok := auth.ParseInstanceToken(key, tok)
	if !ok || id != 42 || !got.Equal(exp) {
		t.Fatalf("ParseInstanceToken = %d, %s, %v; want 42, %s, true", id, got, ok, exp)
	}
	if _, _, ok := auth.ParseInstanceToken(bytes.Repeat([]byte{8}, 32), tok); ok {
		t.Errorf("token verified under another key")
	}
	// Changing the id (or expiry) without the key breaks the MAC.
	forged := auth.PrefixInstance + "000000000000002b" + tok[len(auth.PrefixInstance)+16:]
	forged = forged[:len(auth.PrefixInstance)+15] + "3" + forged[len(auth.PrefixInstance)+16:]
	if _, _, ok := auth.ParseInstanceToken(key, forged); ok {
		t.Errorf("forged token %q verified", forged)
	}
	if _, _, ok := auth.ParseInstanceToken(key, tok[:len(tok)-1]); ok {
		t.Errorf("truncated token verified")
	}
}

func TestSealer(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	s, err := auth.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("hunter2-registry-password")
	sealed := s.Seal(plain, "instance 1")
	if bytes.Contains(sealed, plain) {
		t.Fatalf("sealed value contains the plain text")
	}
	got, err := s.Open(sealed, "instance 1")
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := s.Open(sealed, "instance 2"); err == nil {
		t.Errorf("a secret sealed for instance 1 opened as instance 2's")
	}
	other, _ := auth.NewSealer(bytes.Repeat([]byte{2}, 32))
	if _, err := other.Open(sealed, "instance 1"); err == nil {
		t.Errorf("opened under another key")
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := s.Open(sealed, "instance 1"); err == nil {
		t.Errorf("opened after a bit flip")
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "home", "secret.key")
	k1, err := auth.LoadOrCreateKey(path)
	if err != nil || len(k1) != 32 {
		t.Fatalf("create: %v", err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	k2, err := auth.LoadOrCreateKey(path)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("reload: %v", err)
	}
	os.Chmod(path, 0o644)
	if _, err := auth.LoadOrCreateKey(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable key accepted: %v", err)
	}
}

func TestRateLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &auth.RateLimiter{Rate: 1, Burst: 3, Now: func() time.Time { return now }}
	for i := 0; i < 3; i++ {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("request %d refused within the burst", i)
		}
	}
	ok, wait := l.Allow("a")
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("4th request: ok=%v wait=%s, want refused for up to 1s", ok, wait)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Errorf("another key was limited too")
	}
	now = now.Add(time.Second)
	if ok, _ := l.Allow("a"); !ok {
		t.Errorf("refused after the bucket refilled")
	}
}

func TestLockout(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &auth.Lockout{MaxFailures: 3, Window: time.Minute, LockFor: 5 * time.Minute, Now: func() time.Time { return now }}
	for i := 0; i < 2; i++ {
		if locked, _ := l.Fail("1.2.3.4"); locked {
			t.Fatalf("locked after %d failures", i+1)
		}
	}
	if locked, d := l.Fail("1.2.3.4"); !locked || d != 5*time.Minute {
		t.Fatalf("3rd failure: locked=%v for %s, want locked 5m", locked, d)
	}
	if locked, d := l.Locked("1.2.3.4"); !locked || d != 5*time.Minute {
		t.Errorf("Locked = %v, %s", locked, d)
	}
	if locked, _ := l.Locked("5.6.7.8"); locked {
		t.Errorf("another address locked")
	}
	now = now.Add(5 * time.Minute)
	if locked, _ := l.Locked("1.2.3.4"); locked {
		t.Errorf("still locked after the lockout")
	}
	// Failures spread beyond the window do not add up.
	for i := 0; i < 4; i++ {
		now = now.Add(2 * time.Minute)
		if locked, _ := l.Fail("9.9.9.9"); locked {
			t.Fatalf("locked by failures %s apart", 2*time.Minute)
		}
	}
}
