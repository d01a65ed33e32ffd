package control_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
	"github.com/suanli/suanli/sqlstore"
)

// TestKeyCache: verified keys are remembered for a moment, but a key
// revoked on this replica stops at once, one revoked through another
// replica of the same database stops within two seconds, and expiry is
// exact.
func TestKeyCache(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	open := func() *control.Service {
		db, err := sqlstore.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		svc, err := control.New(ctx, db, control.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	a, b := open(), open()
	clk := &clock{t: time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)}
	a.SetClock(clk.Now)
	b.SetClock(clk.Now)
	acct, secret, err := a.CreateAccountWithKey(ctx, "renter", suanli.RoleUser, 0)
	if err != nil {
		t.Fatal(err)
	}
	me := principalCtx(acct.ID, suanli.RoleUser, suanli.ScopeAll)
	auth := func(s *control.Service, secret string) error {
		_, err := s.Authenticate(ctx, secret, "127.0.0.1")
		return err
	}
	newKey := func(ttl int64) *suanli.APIKey {
		k, err := a.CreateAPIKey(me, suanli.KeyCreate{Name: "k" + time.Now().Format("150405.000000"), Scopes: []string{suanli.ScopeInstanceRead}, TTLSeconds: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if err := auth(a, secret); err != nil {
		t.Fatal(err)
	}

	// Revoked here: refused at once, though it was just verified.
	k := newKey(3600)
	if err := auth(a, k.Secret); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RevokeAPIKey(me, k.ID); err != nil {
		t.Fatal(err)
	}
	if err := auth(a, k.Secret); suanli.ErrorCode(err) != suanli.EUNAUTHORIZED {
		t.Errorf("revoked on this replica, then used here: %v, want EUNAUTHORIZED", err)
	}

	// Revoked through replica b: a may still accept it for under 2 s, then not.
	k = newKey(3600)
	if err := auth(a, k.Secret); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RevokeAPIKey(me, k.ID); err != nil {
		t.Fatal(err)
	}
	if err := auth(b, k.Secret); suanli.ErrorCode(err) != suanli.EUNAUTHORIZED {
		t.Errorf("revoked on b, used on b: %v", err)
	}
	clk.Add(2 * time.Second)
	if err := auth(a, k.Secret); suanli.ErrorCode(err) != suanli.EUNAUTHORIZED {
		t.Errorf("revoked on b 2 s ago, used on a: %v, want EUNAUTHORIZED", err)
	}

	// Expiry is checked on every call, cached or not.
	k = newKey(60)
	clk.Add(59*time.Second + 500*time.Millisecond)
	if err := auth(a, k.Secret); err != nil {
		t.Fatalf("half a second before expiry: %v", err)
	}
	clk.Add(time.Second)
	if err := auth(a, k.Secret); suanli.ErrorCode(err) != suanli.EUNAUTHORIZED {
		t.Errorf("expired half a second ago (entry cached): %v, want EUNAUTHORIZED", err)
	}
}
