package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
	"github.com/suanli/suanli/internal/testreq"
	"github.com/suanli/suanli/sqlstore"
)

// runIn runs the binary with a home, a user HOME of its own (so no key of
// the machine's user is picked up), extra env, and returns stdout, stderr
// and the exit code.
func runIn(t *testing.T, home string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), append([]string{"SUANLI_HOME=" + home, "HOME=" + filepath.Join(home, "user")}, env...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// createTenant adds a second account with an API key straight in the store
// (there is no sign-up command yet) and returns the key.
func createTenant(t *testing.T, home, name string) string {
	t.Helper()
	db, err := sqlstore.Open(t.Context(), filepath.Join(home, "suanli.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc, err := control.New(t.Context(), db, control.Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := svc.CreateAccountWithKey(t.Context(), name, suanli.RoleUser, suanli.Dollars(10))
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestSSHEndToEnd: `suanli ssh` with the real OpenSSH client against the
// agent of `suanli up`: the exit code comes back, another tenant gets
// nothing, the allowlist binds the certificate, scp round-trips a file.
func TestSSHEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		testreq.Missing(t, "openssh", "no ssh binary in PATH (apt-get install openssh-client)")
	}
	home := t.TempDir()
	m, _ := startUp(t, home)
	var in suanli.Instance
	m.mustJSON(&in, "create", "1", "--image", "busybox", "--", "sh", "-c", "echo started; sleep 600")
	id := strconv.FormatInt(in.ID, 10)
	waitStatus(t, m, id, suanli.StatusRunning, 20*time.Second)

	out, errOut, code := runIn(t, home, nil, "ssh", id, "--", "sh", "-c", `echo "in $SUANLI_INSTANCE_ID at $(pwd)"; exit 7`)
	if code != 7 || !strings.Contains(out, "in "+id+" at ") || !strings.Contains(out, filepath.Join("instances", id, "work")) {
		t.Fatalf("suanli ssh: exit %d, stdout %q, stderr %q; want exit 7 in the instance", code, out, errOut)
	}
	if !strings.Contains(errOut, "added SSH key") {
		t.Errorf("the generated key was not registered visibly: stderr %q", errOut)
	}
	if fi, err := os.Stat(filepath.Join(home, "ssh", "id_ed25519")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("generated key: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(home, "ssh_ca_ed25519")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("SSH CA key in the server's home: %v", err)
	}

	// Another tenant: the API does not even admit the instance exists.
	other := createTenant(t, home, "mallory")
	_, errOut, code = runIn(t, home, []string{"SUANLI_API_KEY=" + other}, "ssh", id, "--", "true")
	if code != 3 || !strings.Contains(errOut, "instance "+id+" not found") {
		t.Errorf("another tenant's suanli ssh: exit %d, stderr %q; want not found (3)", code, errOut)
	}

	// Allowlist: only 127.0.0.2 may connect.
	if _, errOut, code := runIn(t, home, nil, "allowlist", "add", "127.0.0.2"); code != 0 {
		t.Fatalf("allowlist add: %s", errOut)
	}
	if out, errOut, code := runIn(t, home, nil, "ssh", id, "--", "echo", "in"); code != 255 || out != "" {
		t.Errorf("from 127.0.0.1 with allowlist 127.0.0.2/32: exit %d, stdout %q, stderr %q; want refused", code, out, errOut)
	}
	if out, errOut, code := runIn(t, home, nil, "ssh", id, "-o", "BindAddress=127.0.0.2", "--", "echo", "in"); code != 0 || out != "in\n" {
		t.Errorf("from 127.0.0.2: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, _ = runIn(t, home, nil, "allowlist", "ls")
	if !strings.Contains(out, "127.0.0.2/32") {
		t.Errorf("allowlist ls = %q", out)
	}
	if _, errOut, code := runIn(t, home, nil, "allowlist", "rm", "127.0.0.2"); code != 0 {
		t.Fatalf("allowlist rm: %s", errOut)
	}

	// scp round trip through the ssh_config --config writes.
	cfg, errOut, code := runIn(t, home, nil, "ssh", id, "--config")
	if code != 0 {
		t.Fatalf("ssh --config: %s", errOut)
	}
	cfg = strings.TrimSpace(cfg)
	src := filepath.Join(home, "up.bin")
	data := bytes.Repeat([]byte("suanli\x00\xff"), 40000)
	os.WriteFile(src, data, 0o600)
	back := filepath.Join(home, "down.bin")
	for _, args := range [][]string{{"-F", cfg, src, "suanli-" + id + ":up.bin"}, {"-F", cfg, "suanli-" + id + ":up.bin", back}} {
		if b, err := exec.Command("scp", args...).CombinedOutput(); err != nil {
			t.Fatalf("scp %v: %v: %s", args, err, b)
		}
	}
	if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, data) {
		t.Errorf("scp round trip: %d bytes back (%v), want %d", len(got), err, len(data))
	}

	// A removed key gets no more certificates.
	out, _, _ = runIn(t, home, nil, "ssh-keys", "ls")
	if !strings.Contains(out, "SHA256:") {
		t.Fatalf("ssh-keys ls = %q", out)
	}
	fp := regexp.MustCompile(`SHA256:\S+`).FindString(out)
	if _, errOut, code := runIn(t, home, nil, "ssh-keys", "rm", fp); code != 0 {
		t.Fatalf("ssh-keys rm: %s", errOut)
	}
	m.stop()
}

// TestTLSAuto: `suanli server --tls auto` serves HTTPS with its own CA; the
// operator's config pins it; a client without the CA is refused, one with
// --ca-file works; an agent joins by the CA fingerprint the join-token
// command prints, and a wrong fingerprint is refused.
func TestTLSAuto(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(binary, "server", "--home", home, "--addr", "127.0.0.1:0", "--tls", "auto", "--heartbeat", "2s")
	stdout, _ := cmd.StdoutPipe()
	var logs strings.Builder
	cmd.Stderr = &syncWriter{b: &logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	urlc, fpc := make(chan string, 1), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := regexp.MustCompile(`control plane at (https://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
			if m := regexp.MustCompile(`TLS CA (sha256:[0-9a-f]+)`).FindStringSubmatch(sc.Text()); m != nil {
				fpc <- m[1]
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	var url, fp string
	for url == "" || fp == "" {
		select {
		case url = <-urlc:
		case fp = <-fpc:
		case <-time.After(30 * time.Second):
			t.Fatal("server did not print its https URL and CA fingerprint")
		}
	}
	if out, errOut, code := runIn(t, home, nil, "billing", "balance"); code != 0 {
		t.Fatalf("client with the pinned CA: exit %d: %s %s", code, out, errOut)
	}
	var cfg struct {
		APIKey string `json:"api_key"`
		CAPEM  string `json:"ca_pem"`
	}
	b, _ := os.ReadFile(filepath.Join(home, "config.json"))
	if err := json.Unmarshal(b, &cfg); err != nil || !strings.Contains(cfg.CAPEM, "BEGIN CERTIFICATE") {
		t.Fatalf("config does not pin the CA: %v", err)
	}
	elsewhere := t.TempDir()
	_, errOut, code := runIn(t, elsewhere, nil, "--server", url, "--api-key", cfg.APIKey, "billing", "balance")
	if code == 0 || !strings.Contains(errOut, "certificate") {
		t.Errorf("client without the CA: exit %d, stderr %q; want a certificate error", code, errOut)
	}
	caFile := filepath.Join(home, "tls", "ca.pem")
	if _, errOut, code := runIn(t, elsewhere, nil, "--server", url, "--api-key", cfg.APIKey, "--ca-file", caFile, "billing", "balance"); code != 0 {
		t.Errorf("client with --ca-file: exit %d: %s", code, errOut)
	}

	out, errOut, code := runIn(t, home, nil, "host", "join-token")
	if code != 0 || !strings.Contains(out, "--ca-fingerprint "+fp) {
		t.Fatalf("join-token: exit %d, %q %q; want the CA fingerprint", code, out, errOut)
	}
	token := strings.Fields(out)[0]

	wrong := "sha256:" + strings.Repeat("0", 64)
	_, errOut, code = runIn(t, t.TempDir(), nil, "agent", "--server", url, "--join-token", token, "--ca-fingerprint", wrong,
		"--runtime", "process", "--fake-gpus", "RTX 4090:1", "--ssh-addr", "off")
	if code == 0 || !strings.Contains(errOut, "fingerprint") {
		t.Errorf("agent with a wrong fingerprint: exit %d, stderr %q", code, errOut)
	}

	agentHome := t.TempDir()
	ag := exec.Command(binary, "agent", "--home", agentHome, "--server", url, "--join-token", token, "--ca-fingerprint", fp,
		"--runtime", "process", "--fake-gpus", "RTX 4090:1", "--ssh-addr", "127.0.0.1:0")
	ag.Env = append(os.Environ(), "HOME="+agentHome)
	var agentLog strings.Builder
	ag.Stderr, ag.Stdout = &syncWriter{b: &agentLog}, io.Discard
	if err := ag.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ag.Process.Kill()
		ag.Wait()
		if t.Failed() {
			t.Logf("agent log:\n%s", agentLog.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, _ := runIn(t, home, nil, "host", "machines", "--json")
		if strings.Contains(out, `"status": "online"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not come online over pinned TLS: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	st, _ := os.ReadFile(filepath.Join(agentHome, "agent.json"))
	if !strings.Contains(string(st), "BEGIN CERTIFICATE") {
		t.Errorf("the agent did not keep the pinned CA in agent.json")
	}
}
