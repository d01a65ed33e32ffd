package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
)

// runAs runs a client command with another API key (and optionally a team).
func (m *marketplace) runAs(key string, args ...string) (string, error) {
	m.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "SUANLI_HOME="+m.home, "SUANLI_API_KEY="+key)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("suanli %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// TestSecurityEndToEnd drives the access commands through the real binary:
// an operator-created account, a narrow key, a temporary token, a team, a
// rental with a secret whose workload reports progress with its own
// instance token, and an audit log that verifies.
func TestSecurityEndToEnd(t *testing.T) {
	home := t.TempDir()
	m, _ := startUp(t, home)
	for _, f := range []string{"secret.key", "audit.key", "config.json"} {
		if fi, err := os.Stat(filepath.Join(home, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", f, fi.Mode().Perm(), err)
		}
	}

	// Accounts are made by the operator.
	var ak suanli.AccountWithKey
	m.mustJSON(&ak, "admin", "accounts", "create", "alice", "--credit", "5", "--ttl", "30d")
	alice := ak.Key.Secret
	if !strings.HasPrefix(alice, "sl_live_") || ak.Account.Kind != suanli.KindUser {
		t.Fatalf("admin accounts create: %+v", ak)
	}
	if _, err := m.runAs(alice, "admin", "accounts", "create", "mallory"); err == nil || !strings.Contains(err.Error(), "admin") {
		t.Errorf("a user creating accounts: %v", err)
	}
	// Keys: mandatory expiry, narrowing, listing with last use.
	if _, err := m.runAs(alice, "keys", "create", "ci", "--scope", "instance:read"); err == nil || !strings.Contains(err.Error(), "--ttl") {
		t.Errorf("key without --ttl: %v", err)
	}
	out, err := m.runAs(alice, "keys", "create", "ci", "--scope", "instance:read", "--ttl", "7d")
	if err != nil || !strings.HasPrefix(out, "sl_live_") {
		t.Fatalf("keys create: %q %v", out, err)
	}
	ci := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	if _, err := m.runAs(ci, "billing", "balance"); err == nil || !strings.Contains(err.Error(), "billing:read") {
		t.Errorf("narrow key reading billing: %v", err)
	}
	tok, err := m.runAs(alice, "auth", "token", "--ttl", "15m", "--scope", "billing:read")
	if err != nil || !strings.HasPrefix(tok, "sl_tmp_") {
		t.Fatalf("auth token: %q %v", tok, err)
	}
	if out, err := m.runAs(strings.TrimSpace(tok), "billing", "balance"); err != nil || !strings.Contains(out, "$5.00") {
		t.Errorf("temporary token reading billing: %q %v", out, err)
	}
	if out, err := m.runAs(alice, "keys", "ls"); err != nil || !strings.Contains(out, "ci") || !strings.Contains(out, "127.0.0.1") {
		t.Errorf("keys ls: %q %v", out, err)
	}

	// A team with its own balance.
	if _, err := m.runAs(alice, "teams", "create", "lab"); err != nil {
		t.Fatal(err)
	}
	var teams []suanli.Team
	if out, err := m.runAs(alice, "teams", "ls", "--json"); err != nil || fromJSON(out, &teams) != nil || len(teams) != 1 || teams[0].Role != "owner" {
		t.Fatalf("teams ls: %q %v", out, err)
	}
	if _, err := m.run("admin", "credit", fmt.Sprint(teams[0].ID), "3"); err != nil {
		t.Fatal(err)
	}
	if out, err := m.runAs(alice, "--team", "lab", "billing", "balance"); err != nil || !strings.Contains(out, "$3.00") {
		t.Errorf("team balance: %q %v", out, err)
	}

	// A rental with a secret; the workload reports progress with its own
	// token, which it reads from SUANLI_TOKEN_FILE.
	var res suanli.OfferResult
	m.mustJSON(&res, "search", "gpu_name=RTX_4090")
	secret := fmt.Sprintf("planted-e2e-secret-%d", time.Now().UnixNano())
	var in suanli.Instance
	os.Setenv("E2E_SECRET", secret)
	defer os.Unsetenv("E2E_SECRET")
	m.mustJSON(&in, "create", fmt.Sprint(res.Offers[0].ID), "--image", "busybox", "--gpus", "1", "--secret-env", "E2E_SECRET",
		"--", "sh", "-c", fmt.Sprintf(`test "${#E2E_SECRET}" = %d && case "$E2E_SECRET" in planted-e2e-secret-*) echo secret-ok;; esac; %s --server %s progress --percent 50 halfway && echo progress-ok; sleep 600`,
			len(secret), binary, m.url))
	if in.SecretEnv["E2E_SECRET"] != "***" {
		t.Errorf("create shows secret env %v, want ***", in.SecretEnv)
	}
	id := fmt.Sprint(in.ID)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := m.run("logs", id)
		if strings.Contains(out, "secret-ok") && strings.Contains(out, "progress-ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workload log %q: want the secret seen and progress reported", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := m.run("show", id); err != nil || !strings.Contains(out, "progress 50%: halfway") || !strings.Contains(out, "E2E_SECRET=***") {
		t.Errorf("show: %q %v", out, err)
	}
	if _, err := m.run("destroy", id); err != nil {
		t.Fatal(err)
	}

	// The audit log has it all and verifies.
	out, err = m.run("audit", "ls", "--limit", "200")
	for _, want := range []string{"POST /v1/admin/accounts", "POST /v1/keys", "POST /v1/teams", "POST /v1/instances/{id}/progress", "DELETE /v1/instances/{id}"} {
		if !strings.Contains(out, want) {
			t.Errorf("audit ls lacks %s: %v\n%s", want, err, out)
		}
	}
	if out, err := m.run("audit", "verify"); err != nil || !strings.Contains(out, "OK") {
		t.Errorf("audit verify: %q %v", out, err)
	}
	m.stop()
	for _, f := range []string{"suanli.db", "suanli.db-wal"} {
		if b, err := os.ReadFile(filepath.Join(home, f)); err == nil && strings.Contains(string(b), secret) {
			t.Errorf("the secret is in %s in the clear", f)
		}
	}
	if strings.Contains(m.logs.String(), secret) {
		t.Errorf("the secret is in the server's log")
	}
}

func fromJSON(s string, v any) error { return json.Unmarshal([]byte(s), v) }
