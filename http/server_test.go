package http_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
	shttp "github.com/suanli/suanli/http"
	"github.com/suanli/suanli/internal/pgtest"
	"github.com/suanli/suanli/sqlstore"
)

// env is a server on a real SQLite store with an operator, a renter and a
// second tenant, and one listed simulated machine owned by the renter.
type env struct {
	srv               *httptest.Server
	svc               *control.Service
	op, renter, other *shttp.Client
	machineID         int64
	renterID, otherID int64
	agent             *shttp.Client
	dbPath            string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	path := pgtest.StoreDSN(t, filepath.Join(t.TempDir(), "s.db"))
	db, err := sqlstore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := control.New(ctx, db, control.Config{HeartbeatInterval: 3 * time.Second}, logger)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(shttp.NewServer(svc, logger))
	t.Cleanup(srv.Close)
	e := &env{srv: srv, svc: svc, dbPath: path}
	_, opKey, err := svc.CreateAccountWithKey(ctx, "operator", suanli.RoleOperator, 0)
	if err != nil {
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
	e.renterID, e.otherID = r.ID, o.ID
	if err := db.SetAccountQuota(ctx, r.ID, suanli.Quota{GPUs: 8, Instances: 8}); err != nil {
		t.Fatal(err)
	}
	e.op, e.renter, e.other = shttp.NewClient(srv.URL, opKey), shttp.NewClient(srv.URL, rKey), shttp.NewClient(srv.URL, oKey)
	tok, err := e.renter.CreateJoinToken(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hw := suanli.Hardware{Hostname: "rig", CPUArch: "amd64", CPUCores: 8, RAMMB: 32 << 10, DiskFreeGB: 200,
		GPUs: []suanli.GPU{{Index: 0, UUID: "GPU-sim-0", Name: "RTX 4090", MemoryMB: 24564, Simulated: true},
			{Index: 1, UUID: "GPU-sim-1", Name: "RTX 4090", MemoryMB: 24564, Simulated: true}}}
	j, err := shttp.NewClient(srv.URL, "").Join(ctx, suanli.JoinRequest{Token: tok.Token, Hardware: hw, Runtime: "process"})
	if err != nil {
		t.Fatal(err)
	}
	e.machineID, e.agent = j.MachineID, shttp.NewClient(srv.URL, j.APIKey)
	p, minBid := suanli.Money(400_000), suanli.Money(200_000)
	if _, err := e.renter.ListMachine(ctx, j.MachineID, suanli.ListingUpdate{PriceGPU: &p, MinBid: &minBid}); err != nil {
		t.Fatal(err)
	}
	return e
}

func code(err error) string { return suanli.ErrorCode(err) }

func TestSearchErrorsNameTheField(t *testing.T) {
	e := newEnv(t)
	_, err := e.renter.SearchOffers(t.Context(), suanli.OfferQuery{Query: "gpu_nam=RTX_4090"})
	if code(err) != suanli.EINVALID || !strings.Contains(err.Error(), "gpu_nam") || !strings.Contains(err.Error(), "gpu_name") {
		t.Fatalf("unknown field: %v, want invalid naming gpu_nam and suggesting valid fields", err)
	}
	_, err = e.renter.SearchOffers(t.Context(), suanli.OfferQuery{Query: "num_gpus>=two"})
	if code(err) != suanli.EINVALID || !strings.Contains(err.Error(), "num_gpus") {
		t.Fatalf("bad value: %v", err)
	}
	res, err := e.renter.SearchOffers(t.Context(), suanli.OfferQuery{Query: "gpu_name=RTX_4090 num_gpus>=2"})
	if err != nil || len(res.Offers) != 1 || !res.Offers[0].Rentable {
		t.Fatalf("owner's search = %+v, %v; want its own simulated offer, rentable", res, err)
	}
	// Another tenant sees the simulated offer, but not as rentable.
	res, err = e.other.SearchOffers(t.Context(), suanli.OfferQuery{Query: "gpu_name=RTX_4090"})
	if err != nil || len(res.Offers) != 0 {
		t.Fatalf("other tenant's default search = %+v, %v; simulated offers are not rentable for them", res, err)
	}
}

func TestCreateBadInputChangesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	neg := suanli.Money(-1)
	cases := []struct {
		name  string
		c     suanli.InstanceCreate
		field string
	}{
		{"empty image", suanli.InstanceCreate{OfferID: e.machineID, Image: " "}, "image"},
		{"negative disk", suanli.InstanceCreate{OfferID: e.machineID, Image: "x", DiskGB: -5}, "disk_gb"},
		{"disk 0", suanli.InstanceCreate{OfferID: e.machineID, Image: "x", DiskGB: 0, DiskGiven: true}, "disk_gb"},
		{"bad env", suanli.InstanceCreate{OfferID: e.machineID, Image: "x", Env: map[string]string{"1A": "x"}}, "env"},
		{"no offer", suanli.InstanceCreate{Image: "x"}, "offer_id"},
		{"negative bid", suanli.InstanceCreate{OfferID: e.machineID, Image: "x", Bid: &neg}, "bid"},
		{"low bid", suanli.InstanceCreate{OfferID: e.machineID, Image: "x", Bid: new(suanli.Money(1))}, "bid"},
	}
	for _, tc := range cases {
		_, err := e.renter.CreateInstance(ctx, tc.c)
		var se *suanli.Error
		if code(err) != suanli.EINVALID || !asError(err, &se) || se.Field != tc.field {
			t.Errorf("%s: err = %v (field %q), want invalid naming %s", tc.name, err, fieldOf(err), tc.field)
		}
	}
	_, n, _ := e.renter.FindInstances(ctx, suanli.InstanceFilter{})
	if n != 0 {
		t.Errorf("%d instances after bad requests, want 0", n)
	}
	// A negative price is refused and the listing unchanged.
	p := suanli.Money(-400_000)
	if _, err := e.renter.ListMachine(ctx, e.machineID, suanli.ListingUpdate{PriceGPU: &p}); code(err) != suanli.EINVALID || fieldOf(err) != "price_gpu" {
		t.Errorf("negative price: %v", err)
	}
	m, _ := e.renter.FindMachineByID(ctx, e.machineID)
	if m.Listing.PriceGPU != 400_000 {
		t.Errorf("price after refused update = %s", m.Listing.PriceGPU)
	}
	// Unknown JSON fields are refused by name.
	// Programs get compact JSON; ?pretty and people's tools get it indented.
	resp := rawPost(t, e, "/v1/instances", `{"offer_id":1,"image":"x","gpus":2}`)
	if resp.StatusCode != 400 || !strings.Contains(resp.Body, `"field":"gpus"`) || strings.Contains(resp.Body, "\n ") {
		t.Errorf("unknown JSON field: %d %s", resp.StatusCode, resp.Body)
	}
	resp = rawPost(t, e, "/v1/instances?pretty", `{"offer_id":"one","image":"x"}`)
	if resp.StatusCode != 400 || !strings.Contains(resp.Body, `"field": "offer_id"`) {
		t.Errorf("wrong JSON type: %d %s", resp.StatusCode, resp.Body)
	}
	// An explicit disk of 0 is refused, in every request that rents.
	for _, path := range []string{"/v1/instances", "/v1/fleets", "/v1/quotes"} {
		resp = rawPost(t, e, path, fmt.Sprintf(`{"offer_id":%d,"image":"x","disk_gb":0}`, e.machineID))
		if resp.StatusCode != 400 || !strings.Contains(resp.Body, `"field":"disk_gb"`) {
			t.Errorf("POST %s with disk_gb 0: %d %s", path, resp.StatusCode, resp.Body)
		}
	}
	if _, n, _ := e.renter.FindInstances(ctx, suanli.InstanceFilter{}); n != 0 {
		t.Errorf("%d instances after refused disk_gb 0", n)
	}
	// Left out, the disk is the default.
	in, err := e.renter.CreateInstance(ctx, suanli.InstanceCreate{OfferID: e.machineID, Image: "x", GPUCount: 1, Cmd: []string{"true"}})
	if err != nil || in.DiskGB != suanli.DefaultDiskGB {
		t.Errorf("create without a disk size: %v, disk %d GB, want the default %d", err, in.DiskGB, suanli.DefaultDiskGB)
	}
}

func new[T any](v T) *T { return &v }

func asError(err error, target **suanli.Error) bool {
	e, ok := err.(*suanli.Error)
	*target = e
	return ok
}

func fieldOf(err error) string {
	if e, ok := err.(*suanli.Error); ok {
		return e.Field
	}
	return ""
}

type rawResp struct {
	StatusCode int
	Body       string
	Header     http.Header
}

func rawPost(t *testing.T, e *env, path, body string) rawResp {
	t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.renter.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResp{resp.StatusCode, string(b), resp.Header}
}

func TestTenantIsolationAndConflicts(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	in, err := e.renter.CreateInstance(ctx, suanli.InstanceCreate{OfferID: e.machineID, Image: "x", GPUCount: 1, Cmd: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"show":    func() error { _, err := e.other.FindInstanceByID(ctx, in.ID); return err },
		"stop":    func() error { _, err := e.other.StopInstance(ctx, in.ID); return err },
		"destroy": func() error { _, err := e.other.DestroyInstance(ctx, in.ID); return err },
		"logs":    func() error { _, err := e.other.InstanceLogs(ctx, in.ID, 0); return err },
		"machine": func() error { _, err := e.other.FindMachineByID(ctx, e.machineID); return err },
		"list":    func() error { _, err := e.other.UnlistMachine(ctx, e.machineID); return err },
		"charges": func() error { _, err := e.other.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &in.ID}); return err },
	} {
		if err := call(); code(err) != suanli.ENOTFOUND {
			t.Errorf("%s of another tenant's object: %v, want not_found", name, err)
		}
	}
	if got, _ := e.renter.FindInstanceByID(ctx, in.ID); got.Status != suanli.StatusPending {
		t.Errorf("instance changed by another tenant: %s", got.Status)
	}
	// Both GPUs asked while one is taken: conflict saying what is free.
	_, err = e.renter.CreateInstance(ctx, suanli.InstanceCreate{OfferID: e.machineID, Image: "x", GPUCount: 2, Cmd: []string{"true"}})
	if code(err) != suanli.ECONFLICT || !strings.Contains(err.Error(), "1 free GPUs, you asked for 2") {
		t.Errorf("over-asking: %v", err)
	}
	// Only operators grant credit.
	if _, err := e.renter.Credit(ctx, e.renterID, suanli.Dollars(5), ""); code(err) != suanli.EFORBIDDEN {
		t.Errorf("renter granting credit: %v, want forbidden", err)
	}
	if b, err := e.op.Credit(ctx, e.otherID, suanli.Dollars(5), "gift"); err != nil || b.Balance != suanli.Dollars(15) {
		t.Errorf("operator credit: %+v, %v", b, err)
	}
	// Bad and missing keys.
	bad := shttp.NewClient(e.srv.URL, "sl_live_notarealkey")
	if _, err := bad.Balance(ctx); code(err) != suanli.EUNAUTHORIZED {
		t.Errorf("malformed key: %v", err)
	}
	if _, err := shttp.NewClient(e.srv.URL, "").Balance(ctx); code(err) != suanli.EUNAUTHORIZED {
		t.Errorf("no key: %v", err)
	}
	// An agent credential cannot act as a renter, nor a renter as an agent.
	if _, err := e.agent.Balance(ctx); code(err) != suanli.EFORBIDDEN {
		t.Errorf("agent key reading billing: %v", err)
	}
	if _, err := e.renter.Sync(ctx, &suanli.SyncRequest{MachineID: e.machineID}); code(err) != suanli.EFORBIDDEN {
		t.Errorf("renter key syncing: %v", err)
	}
}

func TestPaymentRequired(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	p := suanli.Money(20_000_000) // $20 per GPU-hour; the renter has $10
	if _, err := e.renter.ListMachine(ctx, e.machineID, suanli.ListingUpdate{PriceGPU: &p}); err != nil {
		t.Fatal(err)
	}
	_, err := e.renter.CreateInstance(ctx, suanli.InstanceCreate{OfferID: e.machineID, Image: "x", GPUCount: 1, Cmd: []string{"true"}})
	if code(err) != suanli.EPAYMENTREQUIRED || !strings.Contains(err.Error(), "$10.00") || !strings.Contains(err.Error(), "$20.00") {
		t.Fatalf("err = %v, want payment_required with the numbers", err)
	}
}

func TestSyncLongPollWakesOnCreate(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	first, err := e.agent.Sync(ctx, &suanli.SyncRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *suanli.SyncResponse, 1)
	start := time.Now()
	go func() {
		r, err := e.agent.Sync(ctx, &suanli.SyncRequest{Wait: true, KnownVersion: first.Version})
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	time.Sleep(50 * time.Millisecond)
	cs := time.Now()
	in, err := e.renter.CreateInstance(ctx, suanli.InstanceCreate{OfferID: e.machineID, Image: "x", GPUCount: 1, Cmd: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	r := <-got
	t.Logf("create took %s; sync answered after %s", time.Since(cs), time.Since(start))
	if len(r.Instances) != 1 || r.Instances[0].ID != in.ID || r.Version == first.Version {
		t.Fatalf("woken sync = %+v, want the new instance", r)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("long poll answered after %s, want it woken by the create (interval 3s)", el)
	}
	// The agent reports it running: compute billing starts, status follows.
	_, err = e.agent.Sync(ctx, &suanli.SyncRequest{Instances: []suanli.InstanceReport{{ID: in.ID, Status: suanli.StatusRunning}}})
	if err != nil {
		t.Fatal(err)
	}
	got2, _ := e.renter.FindInstanceByID(ctx, in.ID)
	if got2.Status != suanli.StatusRunning || got2.BurnRate < 400_000 {
		t.Errorf("after running report: %s, burn %s", got2.Status, got2.BurnRate)
	}
}

func TestOpenAPIAndHealth(t *testing.T) {
	e := newEnv(t)
	resp, err := http.Get(e.srv.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || doc["openapi"] != "3.0.3" {
		t.Fatalf("openapi: %v %v", err, doc["openapi"])
	}
	paths := doc["paths"].(map[string]any)
	for _, p := range []string{"/v1/instances", "/v1/offers/search", "/v1/agent/sync"} {
		if paths[p] == nil {
			t.Errorf("openapi lacks %s", p)
		}
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	inst := schemas["Instance"].(map[string]any)["properties"].(map[string]any)
	if inst["id"] == nil || inst["status"] == nil || inst["cost_so_far"] == nil {
		t.Errorf("Instance schema lacks fields: %v", inst)
	}
	h, _ := http.Get(e.srv.URL + "/healthz")
	if h.StatusCode != 200 {
		t.Errorf("healthz %d", h.StatusCode)
	}
	m, _ := http.Get(e.srv.URL + "/metrics")
	mb, _ := io.ReadAll(m.Body)
	if !strings.Contains(string(mb), "suanli_offers 1") {
		t.Errorf("metrics lack suanli_offers 1")
	}
}

func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	post := func(key, body string) rawResp {
		req, _ := http.NewRequest("POST", e.srv.URL+"/v1/instances", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.renter.APIKey)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return rawResp{resp.StatusCode, string(b), resp.Header}
	}
	body := `{"offer_id":1,"image":"x","num_gpus":1,"cmd":["true"]}`
	first := post("k1", body)
	again := post("k1", body)
	if first.StatusCode != 201 || again.StatusCode != 201 || first.Body != again.Body || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %q / %d %q", first.StatusCode, first.Body, again.StatusCode, again.Body)
	}
	other := post("k1", `{"offer_id":1,"image":"y","num_gpus":1}`)
	if other.StatusCode != 409 || !strings.Contains(other.Body, "another request") {
		t.Errorf("same key, other body: %d %s", other.StatusCode, other.Body)
	}
	if _, n, _ := e.renter.FindInstances(t.Context(), suanli.InstanceFilter{}); n != 1 {
		t.Errorf("%d instances after a replayed create, want 1", n)
	}
	// Another tenant's identical key is theirs alone.
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/quotes", strings.NewReader(`{"offer_id":1,"num_gpus":1,"hours":2}`))
	req.Header.Set("Authorization", "Bearer "+e.other.APIKey)
	req.Header.Set("Idempotency-Key", "k1")
	resp, _ := http.DefaultClient.Do(req)
	if resp.StatusCode == 409 {
		t.Errorf("another account's key collided")
	}
	resp.Body.Close()
}

// TestIdempotencyKeyAcrossReplicas: a create retried with the same key on
// another replica (behind a load balancer) while the first still runs
// waits for the first's reply instead of renting twice.
func TestIdempotencyKeyAcrossReplicas(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	db2, err := sqlstore.Open(ctx, e.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db2.Close() })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc2, err := control.New(ctx, db2, control.Config{HeartbeatInterval: 3 * time.Second}, logger)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(shttp.NewServer(svc2, logger))
	t.Cleanup(srv2.Close)
	post := func(url, key string) rawResp {
		req, _ := http.NewRequest("POST", url+"/v1/instances", strings.NewReader(`{"offer_id":1,"image":"x","num_gpus":1,"cmd":["true"]}`))
		req.Header.Set("Authorization", "Bearer "+e.renter.APIKey)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return rawResp{}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return rawResp{resp.StatusCode, string(b), resp.Header}
	}
	// The same key sent to both replicas at once, twice over (the machine
	// has two GPUs).
	for i := 0; i < 2; i++ {
		key := fmt.Sprintf("both-%d", i)
		var a, b rawResp
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); a = post(e.srv.URL, key) }()
		go func() { defer wg.Done(); b = post(srv2.URL, key) }()
		wg.Wait()
		if a.StatusCode != 201 || b.StatusCode != 201 || a.Body != b.Body {
			t.Fatalf("key %s on two replicas: %d %s / %d %s", key, a.StatusCode, a.Body, b.StatusCode, b.Body)
		}
	}
	if _, n, _ := e.renter.FindInstances(ctx, suanli.InstanceFilter{}); n != 2 {
		t.Fatalf("%d instances after 2 keys sent twice each, want 2", n)
	}
	// A request still running on one replica (its claim in the store): the
	// other waits for its reply.
	this := sqlstore.Idempotent{Method: "POST", Path: "/v1/instances", BodyHash: ""}
	body := `{"offer_id":1,"image":"x","num_gpus":1,"cmd":["true"]}`
	sum := sha256.Sum256([]byte(body))
	this.BodyHash = hex.EncodeToString(sum[:])
	if _, claimed, err := db2.ClaimIdempotent(ctx, e.renterID, "slow", this, time.Now(), time.Minute); err != nil || !claimed {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	got := make(chan rawResp, 1)
	go func() { got <- post(e.srv.URL, "slow") }()
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("answered while the key's first request still runs: %d %s", r.StatusCode, r.Body)
	default:
	}
	this.Status, this.Response = 201, []byte(`{"id":999}`)
	if err := db2.PutIdempotent(ctx, e.renterID, "slow", this, time.Now()); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.StatusCode != 201 || r.Body != `{"id":999}` || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after the first request's reply: %d %s, want its reply replayed", r.StatusCode, r.Body)
	}
}

// TestIdempotencyKeyAfterCrash replays the crash between a create's commit
// and its recorded reply: a dead server process (another store handle)
// claimed the key and created the instance, then died. A restarted server
// that knows that process is dead takes the claim over at once, and the
// retry gets the instance the key created — not a second one.
func TestIdempotencyKeyAfterCrash(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	dead, err := sqlstore.Open(ctx, e.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	body := `{"offer_id":1,"image":"x","num_gpus":1,"cmd":["true"]}`
	sum := sha256.Sum256([]byte(body))
	claim := sqlstore.Idempotent{Method: "POST", Path: "/v1/instances", BodyHash: hex.EncodeToString(sum[:])}
	if _, claimed, err := dead.ClaimIdempotent(ctx, e.renterID, "k-crash", claim, time.Now(), time.Minute); err != nil || !claimed {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	p := &suanli.Principal{AccountID: e.renterID, Role: suanli.RoleUser, Scopes: []string{suanli.ScopeAll}}
	first, err := e.svc.CreateInstance(suanli.NewContextWithRequestKey(suanli.NewContextWithPrincipal(ctx, p), "k-crash"),
		suanli.InstanceCreate{OfferID: e.machineID, Image: "x", GPUCount: 1, Cmd: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	// … and the process dies before PutIdempotent. The restarted server
	// knows it (the home's replica file, in cmd/suanli).
	e.svc.Store.SetDead([]string{dead.Origin()})
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/instances", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.renter.APIKey)
	req.Header.Set("Idempotency-Key", "k-crash")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got suanli.Instance
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 201 || got.ID != first.ID {
		t.Fatalf("retry after the crash: %d, instance %d (%v), want 201 and the first try's instance %d", resp.StatusCode, got.ID, err, first.ID)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the retry waited %s: the dead process's claim should be taken over at once", d)
	}
	if _, n, _ := e.renter.FindInstances(ctx, suanli.InstanceFilter{}); n != 1 {
		t.Errorf("%d instances after one create and its retry, want 1", n)
	}
	// A fleet request carries the key the same way.
	fr, err := e.svc.CreateFleet(suanli.NewContextWithRequestKey(suanli.NewContextWithPrincipal(ctx, p), "k-crash"),
		suanli.FleetCreate{InstanceCreate: suanli.InstanceCreate{OfferID: e.machineID, Image: "x", GPUCount: 1, Cmd: []string{"true"}}, Count: 1})
	if err != nil || len(fr.Instances) != 1 || fr.Instances[0].ID != first.ID {
		t.Errorf("fleet retry with the same key: %+v, %v; want the first instance back", fr, err)
	}
}

// TestPrettyJSON checks who gets indented JSON: people's tools (curl, a
// browser) and ?pretty; programs get it compact, and both decode the same.
func TestPrettyJSON(t *testing.T) {
	e := newEnv(t)
	get := func(path, ua string) string {
		req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+e.renter.APIKey)
		if ua != "" {
			req.Header.Set("User-Agent", ua)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	compact := get("/v1/me", "")
	for _, c := range []struct{ path, ua string }{{"/v1/me", "curl/8.5.0"}, {"/v1/me", "Mozilla/5.0"}, {"/v1/me?pretty", ""}, {"/v1/me?pretty=true", ""}} {
		body := get(c.path, c.ua)
		if !strings.Contains(body, "\n  \"") {
			t.Errorf("%s (%q): not indented:\n%s", c.path, c.ua, body)
		}
		var a, b any
		if json.Unmarshal([]byte(body), &a) != nil || json.Unmarshal([]byte(compact), &b) != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("%s (%q): indented and compact replies differ", c.path, c.ua)
		}
	}
	if strings.Contains(compact, "\n ") || strings.Contains(get("/v1/me?pretty=false", ""), "\n ") {
		t.Errorf("a program's reply is indented:\n%s", compact)
	}
}
