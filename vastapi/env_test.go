package vastapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
	"github.com/suanli/suanli/agent/process"
	"github.com/suanli/suanli/auth"
	"github.com/suanli/suanli/control"
	shttp "github.com/suanli/suanli/http"
	"github.com/suanli/suanli/internal/pgtest"
	"github.com/suanli/suanli/sqlstore"
	"github.com/suanli/suanli/vastapi"
	"golang.org/x/crypto/ssh"
)

// env is a real control plane on a real SQLite file, serving the native API
// and the Vast layer on one mux, with a real agent (process runtime) on a
// machine with two simulated RTX 4090s, owned and listed by the renter.
type env struct {
	t                       *testing.T
	url                     string
	svc                     *control.Service
	db                      *sqlstore.DB
	vast                    *vastapi.Handler
	opKey, renterKey, other string
	renterID, otherID       int64
	machineID               int64
	logs                    *syncBuffer
}

// syncBuffer collects log output from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sshPort is the SSH endpoint the test agent reports.
const sshPort = 2222

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, pgtest.StoreDSN(t, filepath.Join(t.TempDir(), "s.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc, err := control.New(ctx, db, control.Config{HeartbeatInterval: time.Second}, logger)
	if err != nil {
		t.Fatal(err)
	}
	api := shttp.NewServer(svc, logger)
	api.Limiter = &auth.RateLimiter{Rate: 100, Burst: 100} // the tests make many key requests in a row
	vast := vastapi.New(svc, logger, vastapi.Config{PollInterval: 20 * time.Millisecond, Lockout: api.Lockout, Limiter: api.Limiter})
	vast.Register(api.Mux())
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	t.Cleanup(vast.Close)
	e := &env{t: t, url: srv.URL, svc: svc, db: db, vast: vast, logs: logs}
	if _, e.opKey, err = svc.CreateAccountWithKey(ctx, "operator", suanli.RoleOperator, 0); err != nil {
		t.Fatal(err)
	}
	r, rKey, err := svc.CreateAccountWithKey(ctx, "renter", suanli.RoleUser, suanli.Dollars(10))
	if err != nil {
		t.Fatal(err)
	}
	o, oKey, err := svc.CreateAccountWithKey(ctx, "other", suanli.RoleUser, suanli.Dollars(10))
	if err != nil {
		t.Fatal(err)
	}
	e.renterKey, e.other, e.renterID, e.otherID = rKey, oKey, r.ID, o.ID
	if err := db.SetAccountQuota(ctx, r.ID, suanli.Quota{GPUs: 8, Instances: 8}); err != nil {
		t.Fatal(err)
	}
	renter := shttp.NewClient(srv.URL, rKey)
	tok, err := renter.CreateJoinToken(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hw := suanli.Hardware{Hostname: "rig", OS: "linux", CPUArch: "amd64", CPUModel: "Test CPU", CPUCores: 8, RAMMB: 32 << 10, DiskFreeGB: 200,
		GPUs: []suanli.GPU{
			{Index: 0, UUID: "GPU-sim-0", Name: "RTX 4090", MemoryMB: 24564, DriverVersion: "550.54.14", CUDAVersion: "12.4", ComputeCap: "8.9", Simulated: true},
			{Index: 1, UUID: "GPU-sim-1", Name: "RTX 4090", MemoryMB: 24564, DriverVersion: "550.54.14", CUDAVersion: "12.4", ComputeCap: "8.9", Simulated: true}}}
	j, err := shttp.NewClient(srv.URL, "").Join(ctx, suanli.JoinRequest{Token: tok.Token, Hardware: hw, Runtime: "process"})
	if err != nil {
		t.Fatal(err)
	}
	e.machineID = j.MachineID
	a, err := agent.New(agent.Config{Server: shttp.NewClient(srv.URL, j.APIKey), Runtime: process.New(t.TempDir(), nil),
		MachineID: j.MachineID, Hardware: hw, Version: "test", HeartbeatInterval: time.Second,
		SSH: &suanli.SSHEndpoint{Host: "127.0.0.1", Port: sshPort, HostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRlc3Q="}})
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(actx) }()
	t.Cleanup(func() { cancel(); <-done })
	// The first sync reports the SSH endpoint; list once it is in.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := db.FindMachineSSH(ctx, j.MachineID); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent did not sync within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p, disk, inet, minBid := suanli.Money(400_000), suanli.Money(100_000), suanli.Money(10_000), suanli.Money(200_000)
	if _, err := renter.ListMachine(ctx, j.MachineID, suanli.ListingUpdate{PriceGPU: &p, PriceDisk: &disk, PriceInetUp: &inet,
		PriceInetDown: &inet, MinBid: &minBid}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, secret := range []string{e.opKey, e.renterKey, e.other} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("an API key appears in the log")
			}
		}
	})
	return e
}

// reply is an HTTP response, read.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with the key as a Bearer header ("" for none). body is
// raw JSON text, sent exactly as given.
func (e *env) do(method, path, key, body string) *reply {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return e.send(req)
}

func (e *env) send(req *http.Request) *reply {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// json decodes the reply; it must be status 200 with Content-Type exactly
// application/json.
func (r *reply) json(t *testing.T, v any) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want exactly application/json", ct)
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// obj decodes a 200 reply's object.
func (r *reply) obj(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	r.json(t, &m)
	return m
}

// vastError checks a Vast-shaped error reply and returns it.
func (r *reply) vastError(t *testing.T, status int, code string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type %q", ct)
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("error body %s: %v", r.body, err)
	}
	if m["success"] != false || m["error"] != code || m["msg"] == "" || m["msg"] == nil {
		t.Fatalf("error body %s, want success false, error %q and a msg", r.body, code)
	}
	return m
}

// num reads a JSON number (decoded with UseNumber).
func num(t *testing.T, v any) float64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	f, err := n.Float64()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// path walks a decoded value: path(m, "ports", "22/tcp", 0, "HostPort").
func path(t *testing.T, v any, keys ...any) any {
	t.Helper()
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not an object at %q", v, k)
			}
			if _, found := m[k]; !found {
				t.Fatalf("no key %q in %v", k, m)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: no element %d", v, k)
			}
			v = l[k]
		}
	}
	return v
}

// createInstance rents the machine through PUT /api/v0/asks/{id}/ and
// returns the new instance id.
func (e *env) createInstance(body string) int64 {
	e.t.Helper()
	m := e.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", e.machineID), e.renterKey, body).obj(e.t)
	if m["success"] != true {
		e.t.Fatalf("create: %v", m)
	}
	id, err := m["new_contract"].(json.Number).Int64()
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// show returns GET /api/v0/instances/{id}/?owner=me's instance.
func (e *env) show(id int64) map[string]any {
	e.t.Helper()
	m := e.do("GET", fmt.Sprintf("/api/v0/instances/%d/?owner=me", id), e.renterKey, "").obj(e.t)
	in, ok := m["instances"].(map[string]any)
	if !ok {
		e.t.Fatalf("show: %v, want {\"instances\": {…}}", m)
	}
	return in
}

// waitStatus waits until the instance's actual_status is want.
func (e *env) waitStatus(id int64, want string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		in := e.show(id)
		if in["actual_status"] == want {
			return in
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("instance %d is %v (%v), want %s", id, in["actual_status"], in["status_msg"], want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fetch polls a result URL without credentials until it answers 200, as
// the CLI does (here for up to 10 s).
func (e *env) fetch(url string) *reply {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequest("GET", url, nil)
		r := e.send(req)
		if r.status == http.StatusOK {
			return r
		}
		if r.status != http.StatusNotFound {
			e.t.Fatalf("result URL answered %d: %s", r.status, r.body)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("result URL not ready after 10s: %s", r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testKey returns a fresh ed25519 public key line with a comment.
func testKey(t *testing.T, comment string) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " " + comment
}
