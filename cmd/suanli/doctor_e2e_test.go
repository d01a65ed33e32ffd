package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli/agent/docker"
)

// doctorCheck is one check of `suanli doctor --json`.
type doctorCheck struct {
	Name, Status, Detail, Fix string
}

// runDoctor runs `suanli doctor` with args on home and returns its stdout
// and exit status.
func runDoctor(t *testing.T, home string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"doctor", "--home", home}, args...)...)
	cmd.Env = append(os.Environ(), "SUANLI_HOME="+home)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("suanli doctor %v: %v", args, err)
	}
	if err != nil && !strings.Contains(errb.String(), "checks failed") {
		t.Errorf("suanli doctor %v: exit %v, stderr %q, want it to say how many checks failed", args, err, errb.String())
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// doctorJSON runs `suanli doctor --json` and returns its checks by name
// (the gpu check may come twice; the last is kept) and its exit status.
func doctorJSON(t *testing.T, home string, args ...string) (map[string]doctorCheck, []doctorCheck, int) {
	t.Helper()
	out, code := runDoctor(t, home, append([]string{"--json"}, args...)...)
	var checks []doctorCheck
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	byName := map[string]doctorCheck{}
	for _, c := range checks {
		if c.Status != "ok" && c.Status != "warn" && c.Status != "fail" {
			t.Errorf("check %s: status %q, want ok, warn or fail", c.Name, c.Status)
		}
		if c.Detail == "" || c.Status != "ok" && c.Fix == "" {
			t.Errorf("check %+v: want a detail, and a fix unless ok", c)
		}
		byName[c.Name] = c
	}
	return byName, checks, code
}

// TestDoctor runs `suanli doctor` on this machine against a running
// control plane, then against a URL where nothing listens and one where
// something else answers: each check reports what this machine has, the
// skew against a server on the same clock is small, and a server that
// cannot be reached fails with the address, the cause and the fix.
func TestDoctor(t *testing.T) {
	home := t.TempDir()
	m, _ := startUp(t, home)

	checks, list, code := doctorJSON(t, home, "--server", m.url)
	for _, name := range []string{"docker", "gpu", "disk", "server", "clock"} {
		if _, ok := checks[name]; !ok {
			t.Errorf("doctor --json has no %s check: %+v", name, list)
		}
	}
	failed := false
	for _, c := range list {
		failed = failed || c.Status == "fail"
	}
	if failed != (code != 0) {
		t.Errorf("doctor --json exit status %d with checks %+v: want non-zero exactly when one fails", code, list)
	}

	// Docker: what the daemon in this environment says.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	dockerHere := docker.Available(ctx)
	cancel()
	if c := checks["docker"]; dockerHere && (c.Status != "ok" || !strings.Contains(c.Detail, "the Docker Engine answers")) ||
		!dockerHere && (c.Status != "warn" || !strings.Contains(c.Fix, "DOCKER_HOST")) {
		t.Errorf("docker check = %+v, want ok exactly when a daemon answers here (it does: %v)", c, dockerHere)
	}
	// GPU: a machine without nvidia-smi is a CPU-only host, not a failure.
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		if c := checks["gpu"]; c.Status != "ok" || !strings.Contains(c.Detail, "no nvidia-smi") {
			t.Errorf("gpu check without nvidia-smi = %+v, want ok: a CPU-only machine", c)
		}
	}
	// Disk: free GB under the home, a warning below 50 GB.
	disk := checks["disk"]
	if mm := regexp.MustCompile(`^(\d+) GB free under (.+)$`).FindStringSubmatch(disk.Detail); mm == nil || mm[2] != home {
		t.Errorf("disk check = %+v, want \"N GB free under %s\"", disk, home)
	} else if gb, _ := strconv.Atoi(mm[1]); (gb < 50) != (disk.Status == "warn") {
		t.Errorf("disk check = %+v, want warn exactly below 50 GB", disk)
	}
	// Server and clock: the server runs on this machine's clock.
	if c := checks["server"]; c.Status != "ok" || !regexp.MustCompile(`^`+regexp.QuoteMeta(m.url)+` answers in \S+$`).MatchString(c.Detail) {
		t.Errorf("server check = %+v, want ok: %s answers in …", c, m.url)
	}
	if c := checks["clock"]; c.Status != "ok" {
		t.Errorf("clock check = %+v, want ok against a server on the same clock", c)
	} else if s, ok := strings.CutSuffix(c.Detail, " off the control plane"); !ok {
		t.Errorf("clock check detail %q, want \"<skew> off the control plane\"", c.Detail)
	} else if skew, err := time.ParseDuration(s); err != nil || skew.Abs() > 2*time.Second {
		t.Errorf("clock check detail %q: skew %v (%v), want within 2s of a server on the same clock", c.Detail, skew, err)
	}

	// The text form says the same checks, one line each, a fix under each
	// that is not ok.
	text, textCode := runDoctor(t, home, "--server", m.url)
	if textCode != code {
		t.Errorf("doctor exit status %d, doctor --json %d", textCode, code)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	i := 0
	for _, c := range list {
		prefix := fmt.Sprintf("%-5s %-10s ", c.Status, c.Name)
		if i >= len(lines) || !strings.HasPrefix(lines[i], prefix) {
			t.Errorf("doctor text line %d: want it to begin %q, got:\n%s", i, prefix, text)
			break
		}
		if c.Name != "server" && c.Name != "clock" && lines[i] != prefix+c.Detail { // timings differ between runs
			t.Errorf("doctor text line %q, want %q", lines[i], prefix+c.Detail)
		}
		i++
		if c.Fix != "" {
			if want := fmt.Sprintf("      %-10s fix: %s", "", c.Fix); i >= len(lines) || lines[i] != want {
				t.Errorf("doctor text: want %q after the %s check, got:\n%s", want, c.Name, text)
			}
			i++
		}
	}

	// Nothing listens: the server check fails with the address, the cause
	// and the fix; no clock is read; the exit status says so.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	checks, _, code = doctorJSON(t, home, "--server", dead)
	if c := checks["server"]; c.Status != "fail" || !strings.HasPrefix(c.Detail, "cannot reach "+dead+": ") ||
		!strings.Contains(c.Detail, "connection refused") || !strings.Contains(c.Fix, "--server") {
		t.Errorf("server check against %s = %+v, want fail: cannot reach it (connection refused), fix names --server", dead, c)
	}
	if c, ok := checks["clock"]; ok {
		t.Errorf("clock check without a server = %+v, want none", c)
	}
	if code == 0 {
		t.Errorf("doctor --json against %s: exit status 0, want non-zero", dead)
	}
	text, code = runDoctor(t, home, "--server", dead)
	if code == 0 || !regexp.MustCompile(`(?m)^fail  server     cannot reach `+regexp.QuoteMeta(dead)+`: .*connection refused`).MatchString(text) {
		t.Errorf("doctor against %s: exit %d, output:\n%s\nwant a fail line for the server and a non-zero exit", dead, code, text)
	}

	// Something that is not a Suanli server answers: a failure, not ok.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	checks, _, _ = doctorJSON(t, home, "--server", other.URL)
	if c := checks["server"]; c.Status != "fail" || !strings.Contains(c.Detail, "answers HTTP 404 to GET /healthz") {
		t.Errorf("server check against a non-Suanli server = %+v, want fail: answers HTTP 404", c)
	}
}
