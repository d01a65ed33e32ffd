package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "suanli-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "suanli")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build suanli: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// marketplace is a running `suanli up`.
type marketplace struct {
	t    *testing.T
	home string
	url  string
	cmd  *exec.Cmd
	logs *strings.Builder
}

// startUp starts `suanli up` on a temp home and a free port, and waits until
// it prints its URL.
func startUp(t *testing.T, home string, extra ...string) (*marketplace, time.Duration) {
	t.Helper()
	args := append([]string{"up", "--home", home, "--addr", "127.0.0.1:0", "--fake-gpus", "RTX 4090:2", "--runtime", "process",
		"--settle-every", "1s", "--heartbeat", "2s"}, extra...)
	cmd := exec.Command(binary, args...)
	stdout, _ := cmd.StdoutPipe()
	logs := &strings.Builder{}
	cmd.Stderr = &syncWriter{b: logs}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &marketplace{t: t, home: home, cmd: cmd, logs: logs}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("suanli up log:\n%s", logs.String())
		}
	})
	urlRe := regexp.MustCompile(`Suanli is up at (http://\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := urlRe.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case m.url = <-found:
	case <-time.After(30 * time.Second):
		t.Fatalf("suanli up did not start in 30s:\n%s", logs.String())
	}
	for {
		resp, err := http.Get(m.url + "/healthz")
		if err == nil && resp.StatusCode == 200 {
			resp.Body.Close()
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("not healthy in 30s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return m, time.Since(start)
}

type syncWriter struct {
	b *strings.Builder
}

var logMu = make(chan struct{}, 1)

func (w *syncWriter) Write(p []byte) (int, error) {
	logMu <- struct{}{}
	defer func() { <-logMu }()
	return w.b.Write(p)
}

// run runs a client command against the marketplace and returns stdout.
func (m *marketplace) run(args ...string) (string, error) {
	m.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "SUANLI_HOME="+m.home)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("suanli %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func (m *marketplace) mustJSON(v any, args ...string) {
	m.t.Helper()
	withJSON := append([]string{}, args...)
	at := len(withJSON)
	for i, a := range withJSON {
		if a == "--" {
			at = i
			break
		}
	}
	withJSON = append(withJSON[:at], append([]string{"--json"}, args[at:]...)...)
	out, err := m.run(withJSON...)
	if err != nil {
		m.t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		m.t.Fatalf("suanli %v --json: %v\n%s", args, err, out)
	}
}

func (m *marketplace) stop() {
	m.t.Helper()
	m.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- m.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			m.t.Fatalf("up exited with %v after Ctrl-C", err)
		}
	case <-time.After(20 * time.Second):
		m.t.Fatal("up did not stop within 20s of Ctrl-C")
	}
}

// TestEndToEnd rents a simulated GPU through the real binary, runs a
// command, reads its logs, lets it run, destroys it, and checks the bill
// against the running time and the ledger's balance.
func TestEndToEnd(t *testing.T) {
	home := t.TempDir()
	m, healthy := startUp(t, home)
	t.Logf("up → healthy: %s", healthy)

	var res suanli.OfferResult
	m.mustJSON(&res, "search", "gpu_name=RTX_4090 num_gpus>=2")
	if len(res.Offers) != 1 || !res.Offers[0].Simulated || res.Offers[0].NumGPUs != 2 {
		t.Fatalf("search = %+v, want the one simulated 2-GPU offer", res.Offers)
	}
	offer := res.Offers[0]

	// Bad input changes nothing.
	if _, err := m.run("search", "gpu_nam=RTX_4090"); err == nil || !strings.Contains(err.Error(), "gpu_nam") {
		t.Errorf("search with an unknown field: err = %v, want it to name the field", err)
	}
	if _, err := m.run("create", fmt.Sprint(offer.ID), "--image", "", "--", "true"); err == nil || !strings.Contains(err.Error(), "image") {
		t.Errorf("create without image: err = %v", err)
	}
	if _, err := m.run("create", fmt.Sprint(offer.ID), "--image", "x", "--disk", "-1", "--", "true"); err == nil || !strings.Contains(err.Error(), "disk_gb") {
		t.Errorf("create with disk -1: err = %v", err)
	}
	if _, err := m.run("create", fmt.Sprint(offer.ID), "--image", "x", "--disk", "0", "--", "true"); err == nil || !strings.Contains(err.Error(), "disk_gb") {
		t.Errorf("create with disk 0: err = %v", err)
	}
	if _, err := m.run("quote", fmt.Sprint(offer.ID), "--disk", "0"); err == nil || !strings.Contains(err.Error(), "disk_gb") {
		t.Errorf("quote with disk 0: err = %v", err)
	}

	createStart := time.Now()
	var in suanli.Instance
	m.mustJSON(&in, "create", fmt.Sprint(offer.ID), "--image", "busybox", "--gpus", "1", "--env", "GREETING=hello from suanli",
		"--", "sh", "-c", `echo "$GREETING $SUANLI_INSTANCE_ID"; trap 'echo got SIGTERM; exit 0' TERM; while true; do sleep 0.1; done`)
	if in.ID == 0 || in.Status != suanli.StatusPending || in.GPUCount != 1 || in.RentalType != suanli.RentalOnDemand {
		t.Fatalf("create = %+v", in)
	}
	id := fmt.Sprint(in.ID)
	waitStatus(t, m, id, suanli.StatusRunning, 20*time.Second)
	t.Logf("create → running: %s", time.Since(createStart))

	// The second GPU is free; asking for two is a conflict that says so.
	_, err := m.run("create", fmt.Sprint(offer.ID), "--image", "x", "--gpus", "2", "--", "true")
	if err == nil || !strings.Contains(err.Error(), "1 free GPUs, you asked for 2") {
		t.Errorf("create 2 GPUs with 1 free: err = %v", err)
	}

	want := fmt.Sprintf("hello from suanli %d\n", in.ID)
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := m.run("logs", id)
		if err == nil && strings.HasPrefix(out, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs = %q (%v), want %q", out, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// exec runs inside the instance, with its env; the exit code comes back.
	cmd := exec.Command(binary, "exec", id, "--", "sh", "-c", `echo "in $SUANLI_INSTANCE_ID: $GREETING"; exit 7`)
	cmd.Env = append(os.Environ(), "SUANLI_HOME="+m.home)
	out, err := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); code != 7 || string(out) != fmt.Sprintf("in %d: hello from suanli\n", in.ID) {
		t.Errorf("exec: exit %d (%v), output %q", code, err, out)
	}
	time.Sleep(3 * time.Second) // let time pass: compute accrues
	var stopped suanli.Instance
	m.mustJSON(&stopped, "stop", id)
	if stopped.Status != suanli.StatusStopping && stopped.Status != suanli.StatusStopped {
		t.Fatalf("stop: status %s", stopped.Status)
	}
	waitStatus(t, m, id, suanli.StatusStopped, 20*time.Second)
	// The workload got SIGTERM (its trap wrote to the log) before it stopped.
	deadline = time.Now().Add(10 * time.Second)
	for {
		out, _ := m.run("logs", id)
		if strings.Contains(out, "got SIGTERM") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs after stop = %q, want the SIGTERM line", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // stopped: only storage accrues
	var destroyed suanli.Instance
	m.mustJSON(&destroyed, "destroy", id)
	if destroyed.Status != suanli.StatusDestroyed {
		t.Fatalf("destroy: status %s", destroyed.Status)
	}
	var runningAt, stoppingAt, destroyedAt time.Time
	events := showEvents(t, m, in.ID)
	for _, e := range events {
		switch e.Status {
		case suanli.StatusRunning:
			runningAt = e.At
		case suanli.StatusStopping:
			stoppingAt = e.At
		case suanli.StatusDestroyed:
			destroyedAt = e.At
		}
	}
	if runningAt.IsZero() || stoppingAt.IsZero() || destroyedAt.IsZero() {
		t.Fatalf("events lack running/stopping/destroyed: %+v", events)
	}
	ran := stoppingAt.Sub(runningAt)
	var charges suanli.ChargeSummary
	m.mustJSON(&charges, "billing", "charges", "--instance", id)
	compute := charges.ByKind[suanli.MeterCompute]
	expect := suanli.MulDiv(in.Rates.ComputePerHour, ran.Microseconds(), suanli.MicrosPerHour)
	oneSecond := suanli.MulDiv(in.Rates.ComputePerHour, 1, 3600)
	if d := compute - expect; d > oneSecond || d < -oneSecond || compute == 0 {
		t.Errorf("compute charged %s for %s running at %s/h; expected %s ± %s", compute, ran, in.Rates.ComputePerHour, expect, oneSecond)
	}
	t.Logf("ran %s, charged %s compute (expected %s)", ran, compute, expect)
	life := destroyedAt.Sub(in.CreatedAt)
	storage := charges.ByKind[suanli.MeterStorage]
	expectStorage := suanli.MulDiv(in.Rates.StoragePerMonth*suanli.Money(in.DiskGB), life.Microseconds(), suanli.MicrosPerMonth)
	if d := storage - expectStorage; d > 1 || d < -1 {
		t.Errorf("storage charged %d µ$ for %s of life (stopped time included); expected %d", storage, life, expectStorage)
	}

	// Storage billing stopped at destroy: nothing more accrues.
	before := charges.Total
	time.Sleep(2500 * time.Millisecond)
	m.mustJSON(&charges, "billing", "charges", "--instance", id)
	if charges.Total != before {
		t.Errorf("charges grew after destroy: %s → %s", before, charges.Total)
	}

	// Its directory is gone.
	if _, err := os.Stat(filepath.Join(home, "agent", "instances", id)); !os.IsNotExist(err) {
		t.Errorf("instance directory still exists after destroy (stat err %v)", err)
	}

	// Destroying a running instance stops it gracefully first, and the
	// log's tail (its goodbye) still reaches the control plane.
	var bye suanli.Instance
	m.mustJSON(&bye, "create", fmt.Sprint(offer.ID), "--image", "busybox", "--gpus", "1",
		"--", "sh", "-c", `trap 'echo goodbye; exit 0' TERM; echo hi; while true; do sleep 0.1; done`)
	waitStatus(t, m, fmt.Sprint(bye.ID), suanli.StatusRunning, 20*time.Second)
	if _, err := m.run("destroy", fmt.Sprint(bye.ID)); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(15 * time.Second)
	for {
		out, _ := m.run("logs", fmt.Sprint(bye.ID))
		if strings.Contains(out, "goodbye") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs after destroy = %q, want the workload's goodbye", out)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// One /metrics serves the control plane and the local agent.
	resp, err := http.Get(m.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"suanli_ledger_postings_total", "suanli_spend_rate_dollars_per_hour", "suanli_api_request_duration_seconds_bucket", "suanli_offers 1"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// Ctrl-C stops cleanly; the ledger balances.
	m.stop()
	db, err := sqlstore.Open(context.Background(), filepath.Join(home, "suanli.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	chk, err := db.CheckLedger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if chk.PostingSum != 0 || chk.BalanceSum != 0 || len(chk.Mismatched) > 0 || len(chk.UnbalancedTxn) > 0 || chk.Postings == 0 {
		t.Errorf("ledger: %+v", chk)
	}
}

func waitStatus(t *testing.T, m *marketplace, id, status string, within time.Duration) suanli.Instance {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var in suanli.Instance
		m.mustJSON(&in, "show", id)
		if in.Status == status {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s is %s (%s), want %s", id, in.Status, in.StatusMessage, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type event struct {
	At      time.Time `json:"at"`
	Status  string    `json:"status"`
	Message string    `json:"message"`
}

func showEvents(t *testing.T, m *marketplace, id int64) []event {
	t.Helper()
	var cfg struct {
		APIKey string `json:"api_key"`
	}
	b, _ := os.ReadFile(filepath.Join(m.home, "config.json"))
	json.Unmarshal(b, &cfg)
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/instances/%d/events", m.url, id), nil)
	req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Events []event `json:"events"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("events: %v: %s", err, body)
	}
	return r.Events
}

// TestUpTwiceOnOneHome checks that a second `up` on a home in use fails
// clearly, and that a restart reuses the data.
func TestUpTwiceOnOneHome(t *testing.T) {
	home := t.TempDir()
	m, _ := startUp(t, home)
	cmd := exec.Command(binary, "up", "--home", home, "--addr", "127.0.0.1:0", "--runtime", "process")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already running on home") {
		t.Fatalf("second up: err %v, output %q", err, out)
	}
	if fi, err := os.Stat(filepath.Join(home, "config.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config.json mode = %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	m.stop()
	m2, _ := startUp(t, home)
	var ms []suanli.Machine
	m2.mustJSON(&ms, "host", "machines")
	if len(ms) != 1 || ms[0].ID != 1 {
		t.Fatalf("after restart: machines %+v, want the same single machine", ms)
	}
	m2.stop()
}
