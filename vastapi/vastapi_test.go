package vastapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
)

// TestGPUNames replays the CLI's start-up call: no credential, with and
// without the trailing slash.
func TestGPUNames(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"/api/v0/gpu_names/unique/", "/api/v0/gpu_names/unique"} {
		var got struct {
			GPUNames []string `json:"gpu_names"`
		}
		e.do("GET", p, "", "").json(t, &got)
		if len(got.GPUNames) != 1 || got.GPUNames[0] != "RTX 4090" {
			t.Errorf("GET %s = %v, want [RTX 4090]", p, got.GPUNames)
		}
	}
}

// cliSearch is the body `vastai search offers 'gpu_ram>=20 num_gpus=2
// gpu_name=RTX_4090 dph<1 duration>=1'` sends: the CLI's default filters,
// GB × 1000 for gpu_ram as a float, days × 86400 for duration, everything
// else as JSON strings, and its order, type, storage and limit.
const cliSearch = `{"verified": {"eq": true}, "external": {"eq": false}, "rentable": {"eq": true}, "rented": {"eq": false},
 "gpu_ram": {"gte": 20000.0}, "num_gpus": {"eq": "2"}, "gpu_name": {"eq": "RTX 4090"}, "dph_total": {"lt": "1"},
 "duration": {"gte": 86400.0}, "order": [["score", "desc"]], "type": "on-demand", "allocated_storage": 5.0, "limit": 10}`

// TestSearchOffers replays search bodies and checks every field the CLI's
// table reads, in Vast's units, with Content-Type exactly application/json.
func TestSearchOffers(t *testing.T) {
	e := newEnv(t)
	var res struct {
		Offers []map[string]any `json:"offers"`
	}
	e.do("POST", "/api/v0/bundles/", e.renterKey, cliSearch).json(t, &res)
	if len(res.Offers) != 1 {
		t.Fatalf("offers = %v, want the one machine", res.Offers)
	}
	o := res.Offers[0]
	for _, f := range []string{"id", "cuda_max_good", "num_gpus", "gpu_name", "pcie_bw", "cpu_ghz", "cpu_cores_effective", "cpu_ram",
		"gpu_ram", "disk_space", "dph_total", "dlperf", "dlperf_per_dphtotal", "score", "driver_version", "inet_up", "inet_down",
		"reliability", "duration", "machine_id", "verification", "host_id", "direct_port_count", "geolocation", "min_bid", "rented"} {
		if _, ok := o[f]; !ok {
			t.Errorf("offer lacks %s", f)
		}
	}
	checks := []struct {
		field string
		want  float64
	}{
		{"id", float64(e.machineID)}, {"machine_id", float64(e.machineID)}, {"host_id", float64(e.renterID)},
		{"num_gpus", 2}, {"gpu_ram", 24564}, {"cpu_ram", 32 << 10}, {"cpu_cores_effective", 8}, {"disk_space", 200},
		{"cuda_max_good", 12.4},
		// 2 GPUs × $0.40 + 5 GB × $0.10/GB-month over 730 h.
		{"dph_total", 0.8 + float64(suanli.MulDiv(100_000, 5*suanli.MicrosPerHour, suanli.MicrosPerMonth))/1e6},
		{"min_bid", 0.4}, {"duration", 3650 * 86400},
	}
	for _, c := range checks {
		if got := num(t, o[c.field]); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.field, got, c.want)
		}
	}
	if o["gpu_name"] != "RTX 4090" || o["driver_version"] != "550.54.14" || o["rented"] != false || o["verification"] != "unverified" {
		t.Errorf("offer = %v", o)
	}
	if o["pcie_bw"] != nil || o["cpu_ghz"] != nil {
		t.Errorf("unknown figures should be null (the CLI prints -): pcie_bw %v, cpu_ghz %v", o["pcie_bw"], o["cpu_ghz"])
	}

	// The same search through each path spelling, and numbers as numbers.
	for _, p := range []string{"/api/v0/bundles", "/api/v0/bundles/"} {
		body := strings.ReplaceAll(cliSearch, `{"eq": "2"}`, `{"eq": 2}`)
		e.do("POST", p, e.renterKey, body).json(t, &res)
		if len(res.Offers) != 1 {
			t.Errorf("POST %s: %d offers, want 1", p, len(res.Offers))
		}
	}

	// Conditions that remove the offer, in Vast's units: a field in MB, a
	// duration in seconds, a price in dollars, a country code.
	for _, c := range []string{
		`{"gpu_ram": {"gte": "25000"}}`,                // 25 GB in MB: more than 24564 MB
		`{"cpu_ram": {"gt": 33000}}`,                   // MB
		`{"gpu_total_ram": {"gte": 50000.0}}`,          // two GPUs hold 49128 MB
		`{"duration": {"gt": "315360001"}}`,            // seconds past the 3650 days of an open listing
		`{"dph_total": {"lte": "0.5"}}`,                // dollars
		`{"num_gpus": {"in": ["1", "4"]}}`,             // list of strings
		`{"gpu_name": {"notin": ["RTX 4090"]}}`,        // list
		`{"geolocation": {"in": ["TW", "SE"]}}`,        // country codes
		`{"rented": {"eq": true}}`,                     // Vast's own filter: never true here
		`{"external": {"eq": true}}`,                   // no external offers here
		`{"cpu_cores_effective": {"gte": 8.5}}`,        // a fraction against whole cores
		`{"driver_version": {"gte": "555000000"}}`,     // the CLI's numeric 555.0.0
		`{"verified": {"eq": false}, "id": {"eq": 0}}`, // two fields
	} {
		e.do("POST", "/api/v0/bundles/", e.renterKey, c).json(t, &res)
		if len(res.Offers) != 0 {
			t.Errorf("search %s: %d offers, want none", c, len(res.Offers))
		}
	}
	for _, c := range []string{
		`{"gpu_ram": {"gte": "24000"}}`,
		`{"cpu_cores_effective": {"gte": "7.5"}, "cpu_cores": {"lt": 8.5}}`,
		`{"driver_version": {"gte": 535086005}}`,
		`{"reliability": {"gte": "0"}, "inet_down_cost": {"lte": "0.01"}}`,
		`{"rented": {"in": [false, true]}}`,
		`{}`,
		``,
	} {
		e.do("POST", "/api/v0/bundles/", e.renterKey, c).json(t, &res)
		if len(res.Offers) != 1 {
			t.Errorf("search %q: %d offers, want 1", c, len(res.Offers))
		}
	}

	// type bid prices at the minimum bid.
	e.do("POST", "/api/v0/bundles/", e.renterKey, `{"type": "bid", "allocated_storage": 5.0}`).json(t, &res)
	if len(res.Offers) != 1 || num(t, res.Offers[0]["dph_base"]) != 0.4 || res.Offers[0]["is_bid"] != true {
		t.Errorf("bid search = %v", res.Offers)
	}

	// Bad requests are 400 in Vast's shape, naming the field.
	for _, c := range []struct{ body, field string }{
		{`{"gpu_nam": {"eq": "RTX 4090"}}`, "gpu_nam"},
		{`{"has_avx": {"eq": true}}`, "has_avx"},
		{`{"gpu_ram": {"gte": "lots"}}`, "gpu_ram"},
		{`{"gpu_ram": {"about": "24"}}`, "gpu_ram"},
		{`{"dph_total": {"lt": "0.1234567"}}`, "dph_total"},
		{`{"type": "spot"}`, "type"},
		{`{"order": [["colour", "asc"]]}`, "order"},
		{`{"verified": {"eq": "maybe"}}`, "verified"},
		{`{"limit": "ten"}`, "limit"},
		{`[1, 2]`, "body"},
	} {
		m := e.do("POST", "/api/v0/bundles/", e.renterKey, c.body).vastError(t, http.StatusBadRequest, "invalid_args")
		if m["field"] != c.field || !strings.Contains(m["msg"].(string), c.field) {
			t.Errorf("search %s: %v, want the error to name %s", c.body, m, c.field)
		}
	}
}

// TestAuthentication checks the Bearer header, the api_key query parameter
// of older CLIs, and Vast's error shape for a missing or bad key.
func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	e.do("POST", "/api/v0/bundles/", "", `{}`).vastError(t, http.StatusUnauthorized, "invalid_api_key")
	e.do("POST", "/api/v0/bundles/", "sl_live_nonsense", `{}`).vastError(t, http.StatusUnauthorized, "invalid_api_key")
	var res struct {
		Offers []map[string]any `json:"offers"`
	}
	e.do("POST", "/api/v0/bundles/?api_key="+url.QueryEscape(e.renterKey), "", `{}`).json(t, &res)
	if len(res.Offers) != 1 {
		t.Errorf("search with ?api_key= = %v", res.Offers)
	}
	// Unknown paths and methods answer in the same shape.
	e.do("GET", "/api/v0/no_such_thing/", e.renterKey, "").vastError(t, http.StatusNotFound, "not_found")
	e.do("PATCH", "/api/v0/bundles/", e.renterKey, "").vastError(t, http.StatusMethodNotAllowed, "method_not_allowed")

	// Permission categories map onto scopes: a read-only key searches and
	// lists, but cannot rent.
	ro, err := e.svc.CreateKey(context.Background(), e.renterID, "ro", []string{suanli.ScopeInstanceRead}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e.do("POST", "/api/v0/bundles/", ro, `{}`).json(t, &res)
	e.do("GET", "/api/v0/instances?owner=me", ro, "").obj(t)
	m := e.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", e.machineID), ro, `{"image": "x", "onstart": "true"}`).vastError(t, http.StatusForbidden, "permission_denied")
	if !strings.Contains(m["msg"].(string), "instance_write") {
		t.Errorf("forbidden: %v, want it to name instance_write", m)
	}
	e.do("GET", "/api/v0/machines?owner=me", ro, "").vastError(t, http.StatusForbidden, "permission_denied")
}

// createBody is what `vastai create instance ID --image busybox --env '-e
// GREETING=hi -p 8080:8080' --disk 10 --label vast-test --onstart-cmd
// 'echo hello $GREETING' --ssh` sends.
const createBody = `{"client_id": "me", "image": "busybox", "env": {"GREETING": "hi", "-p 8080:8080": "1"}, "price": null,
 "disk": 10.0, "label": "vast-test", "extra": null, "onstart": "echo hello $GREETING", "image_login": null,
 "python_utf8": false, "lang_utf8": false, "use_jupyter_lab": false, "jupyter_dir": null, "force": false,
 "cancel_unavail": false, "template_hash_id": null, "user": null, "runtype": "ssh ssh_proxy"}`

// TestInstanceLifecycle drives create, show (v0, v1, one), logs and execute
// through result URLs, label, stop, start, reboot, bid and destroy.
func TestInstanceLifecycle(t *testing.T) {
	e := newEnv(t)
	id := e.createInstance(createBody)
	in := e.waitStatus(id, "running")

	for _, f := range []string{"id", "machine_id", "actual_status", "num_gpus", "gpu_name", "gpu_util", "cpu_cores_effective", "cpu_ram",
		"disk_space", "ssh_host", "ssh_port", "dph_total", "image_uuid", "inet_up", "inet_down", "reliability2", "label",
		"start_date", "extra_env", "public_ipaddr", "ports", "intended_status", "image_runtype"} {
		if _, ok := in[f]; !ok {
			t.Errorf("instance lacks %s", f)
		}
	}
	if start := num(t, in["start_date"]); math.Abs(start-float64(time.Now().Unix())) > 60 {
		t.Errorf("start_date = %v, want epoch seconds of now", start)
	}
	if in["image_uuid"] != "busybox" || in["label"] != "vast-test" || num(t, in["num_gpus"]) != 2 || in["gpu_name"] != "RTX 4090" ||
		num(t, in["disk_space"]) != 10 || in["ssh_host"] != "127.0.0.1" || num(t, in["ssh_port"]) != sshPort ||
		in["public_ipaddr"] != "127.0.0.1" || in["intended_status"] != "running" || num(t, in["cpu_ram"]) != 32<<10 {
		t.Errorf("instance = %v", in)
	}
	if hp := path(t, in, "ports", "22/tcp", 0, "HostPort"); hp != fmt.Sprint(sshPort) {
		t.Errorf(`ports["22/tcp"][0]["HostPort"] = %v, want "%d"`, hp, sshPort)
	}
	// The CLI turns extra_env into a dict: a list of [key, value] pairs.
	env := map[string]string{}
	for _, kv := range in["extra_env"].([]any) {
		p := kv.([]any)
		if len(p) != 2 {
			t.Fatalf("extra_env entry %v is not a pair", p)
		}
		env[p[0].(string)] = p[1].(string)
	}
	if env["GREETING"] != "hi" || env["-p 8080:8080"] != "1" {
		t.Errorf("extra_env = %v", env)
	}
	dph := 0.8 + float64(suanli.MulDiv(100_000, 10*suanli.MicrosPerHour, suanli.MicrosPerMonth))/1e6
	if got := num(t, in["dph_total"]); math.Abs(got-dph) > 1e-9 {
		t.Errorf("dph_total = %v, want %v", got, dph)
	}

	// v0 list (older CLIs) and v1 list.
	var v0 struct {
		Instances []map[string]any `json:"instances"`
	}
	e.do("GET", "/api/v0/instances?owner=me", e.renterKey, "").json(t, &v0)
	if len(v0.Instances) != 1 || num(t, v0.Instances[0]["id"]) != float64(id) {
		t.Errorf("v0 list = %v", v0.Instances)
	}
	v1 := e.do("GET", "/api/v1/instances/?select_filters=%7B%7D&order_by=%5B%7B%22col%22%3A%22id%22%2C%22dir%22%3A%22asc%22%7D%5D&limit=25", e.renterKey, "").obj(t)
	if l := v1["instances"].([]any); len(l) != 1 || v1["next_token"] != nil {
		t.Errorf("v1 list = %v", v1)
	}

	// Logs through a result URL, fetched without credentials.
	lr := e.do("PUT", fmt.Sprintf("/api/v0/instances/request_logs/%d/", id), e.renterKey, `{"tail": "100"}`).obj(t)
	if lr["success"] != true {
		t.Fatalf("request_logs = %v", lr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		logs := e.fetch(lr["result_url"].(string))
		if strings.Contains(string(logs.body), "hello hi") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs = %q, want hello hi", logs.body)
		}
		time.Sleep(50 * time.Millisecond)
		lr = e.do("PUT", fmt.Sprintf("/api/v0/instances/request_logs/%d", id), e.renterKey, `{"tail": 100}`).obj(t)
	}
	// A filter and a tail of 0.
	lr = e.do("PUT", fmt.Sprintf("/api/v0/instances/request_logs/%d/", id), e.renterKey, `{"tail": "0"}`).obj(t)
	if b := e.fetch(lr["result_url"].(string)).body; len(b) != 0 {
		t.Errorf("tail 0 = %q", b)
	}
	lr = e.do("PUT", fmt.Sprintf("/api/v0/instances/request_logs/%d/", id), e.renterKey, `{"filter": "nothing like it"}`).obj(t)
	if b := e.fetch(lr["result_url"].(string)).body; len(b) != 0 {
		t.Errorf("filtered logs = %q", b)
	}
	// A made-up result URL is nothing.
	u, _ := url.Parse(lr["result_url"].(string))
	req, _ := http.NewRequest("GET", e.url+"/api/v0/results/"+strings.Repeat("A", 43), nil)
	if r := e.send(req); r.status != http.StatusNotFound {
		t.Errorf("made-up result URL: %d", r.status)
	}
	if !strings.HasPrefix(u.Path, "/api/v0/results/") || len(u.Path) < len("/api/v0/results/")+43 {
		t.Errorf("result URL %s: want /api/v0/results/ and 256 random bits", u)
	}

	// Execute runs in the instance; its output comes through a result URL.
	xr := e.do("PUT", fmt.Sprintf("/api/v0/instances/command/%d/", id), e.renterKey, `{"command": "echo in $GREETING; exit 3"}`).obj(t)
	if xr["success"] != true || xr["writeable_path"] == nil {
		t.Fatalf("command = %v", xr)
	}
	out := e.fetch(xr["result_url"].(string))
	if string(out.body) != "in hi\n" || out.header.Get("X-Exit-Code") != "3" {
		t.Errorf("execute output %q, exit %q", out.body, out.header.Get("X-Exit-Code"))
	}

	// Label, then stop and start through PUT /instances/{id}/.
	if m := e.do("PUT", fmt.Sprintf("/api/v0/instances/%d/", id), e.renterKey, `{"label": "renamed"}`).obj(t); m["success"] != true {
		t.Fatalf("label = %v", m)
	}
	if got := e.show(id)["label"]; got != "renamed" {
		t.Errorf("label = %v", got)
	}
	e.do("PUT", fmt.Sprintf("/api/v0/instances/%d", id), e.renterKey, `{"state": "stopped"}`).obj(t)
	stopped := e.waitStatus(id, "exited")
	if stopped["intended_status"] != "stopped" || stopped["cur_state"] != "stopped" {
		t.Errorf("stopped = %v", stopped)
	}
	e.do("PUT", fmt.Sprintf("/api/v0/instances/%d/", id), e.renterKey, `{"state": "running"}`).obj(t)
	e.waitStatus(id, "running")

	// Reboot stops, waits for the host, and starts again.
	before, err := e.svc.FindInstanceByID(e.ctx(e.renterID), id)
	if err != nil {
		t.Fatal(err)
	}
	e.do("PUT", fmt.Sprintf("/api/v0/instances/reboot/%d/", id), e.renterKey, `{}`).obj(t)
	deadline = time.Now().Add(15 * time.Second)
	for {
		in, err := e.svc.FindInstanceByID(e.ctx(e.renterID), id)
		if err != nil {
			t.Fatal(err)
		}
		if in.Status == suanli.StatusRunning && in.StartedAt != nil && in.StartedAt.After(*before.StartedAt) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after reboot: %s since %v (was since %v)", in.Status, in.StartedAt, before.StartedAt)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Change bid needs the market's bids: where the service has them, an
	// on-demand instance has no bid to change; where not, a clear 501.
	br := e.do("PUT", fmt.Sprintf("/api/v0/instances/bid_price/%d/", id), e.renterKey, `{"client_id": "me", "price": 0.5}`)
	if _, bids := any(e.svc).(interface {
		ChangeBid(context.Context, int64, suanli.Money) (*suanli.Instance, error)
	}); bids {
		if br.status < 400 || br.status >= 500 {
			t.Errorf("change bid of an on-demand instance: %d %s", br.status, br.body)
		}
	} else {
		br.vastError(t, http.StatusNotImplemented, "not_implemented")
	}
	e.do("PUT", fmt.Sprintf("/api/v0/instances/bid_price/%d/", id), e.renterKey, `{"client_id": "me", "price": null}`).vastError(t, http.StatusBadRequest, "invalid_args")

	// Another tenant sees nothing.
	e.do("GET", fmt.Sprintf("/api/v0/instances/%d/", id), e.other, "").vastError(t, http.StatusNotFound, "not_found")
	e.do("DELETE", fmt.Sprintf("/api/v0/instances/%d/", id), e.other, "").vastError(t, http.StatusNotFound, "not_found")

	// Destroy.
	if m := e.do("DELETE", fmt.Sprintf("/api/v0/instances/%d/", id), e.renterKey, `{}`).obj(t); m["success"] != true {
		t.Fatalf("destroy = %v", m)
	}
	if got := e.show(id); got["actual_status"] != "destroyed" {
		t.Errorf("after destroy: %v", got["actual_status"])
	}
	e.do("GET", "/api/v0/instances?owner=me", e.renterKey, "").json(t, &v0)
	if len(v0.Instances) != 0 {
		t.Errorf("list after destroy = %v", v0.Instances)
	}
	e.do("PUT", fmt.Sprintf("/api/v0/instances/command/%d/", id), e.renterKey, `{"command": "true"}`).vastError(t, http.StatusConflict, "conflict")
}

// ctx is a context for account id with every scope, to read native state.
func (e *env) ctx(id int64) context.Context {
	return suanli.NewContextWithPrincipal(context.Background(), &suanli.Principal{AccountID: id, Role: suanli.RoleUser, Scopes: []string{suanli.ScopeAll}})
}

// TestCreateTranslation checks what the create body becomes natively:
// args runtype, interruptible price, ports, and errors named in Vast terms.
func TestCreateTranslation(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx(e.renterID)
	id := e.createInstance(`{"client_id": "me", "image": "busybox", "price": "0.45", "disk": "12", "onstart": "sh",
		"args": ["-c", "echo args mode"], "runtype": "args", "env": {"-p 10022:22/tcp": "1", "-h": "box"}}`)
	in, err := e.svc.FindInstanceByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if in.RentalType != suanli.RentalInterruptible || in.Bid != 450_000 || in.DiskGB != 12 ||
		strings.Join(in.Cmd, " ") != "sh -c echo args mode" || len(in.Ports) != 1 || in.Ports[0] != 22 {
		t.Errorf("created %+v", in)
	}
	row := e.show(id)
	if row["is_bid"] != true || row["image_runtype"] != "args" || num(t, row["bid"]) != 0.45 {
		t.Errorf("row = %v", row)
	}
	e.do("DELETE", fmt.Sprintf("/api/v0/instances/%d/", id), e.renterKey, "").obj(t)

	for _, c := range []struct{ body, field string }{
		{`{"image": "", "onstart": "true"}`, "image"},
		{`{"image": "busybox", "disk": -1, "onstart": "true"}`, "disk"},
		{`{"image": "busybox", "disk": 10.5, "onstart": "true"}`, "disk"},
		{`{"image": "busybox"}`, "onstart"}, // the process runtime needs a command
		{`{"image": "busybox", "onstart": "true", "env": {"-v /data:/data": "1"}}`, "env"},
		{`{"image": "busybox", "onstart": "true", "env": {"-p 53:53/udp": "1"}}`, "env"},
		{`{"image": "busybox", "onstart": "true", "env": {"SUANLI_X": "1"}}`, "env"},
		{`{"image": "busybox", "onstart": "true", "price": "0.01"}`, "price"}, // under the minimum bid
		{`{"image": "busybox", "onstart": "true", "image_login": "-u bob docker.io"}`, "image_login"},
		{`{"image": "busybox", "onstart": "true", "runtype": "jupyter_direc ssh_direc"}`, "runtype"},
		{`{"image": "busybox", "onstart": "true", "template_hash_id": "no-such-template"}`, "template_hash_id"},
	} {
		m := e.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", e.machineID), e.renterKey, c.body).vastError(t, http.StatusBadRequest, "invalid_args")
		if m["field"] != c.field || !strings.HasPrefix(m["msg"].(string), c.field) {
			t.Errorf("create %s: %v, want the error to name %s", c.body, m, c.field)
		}
	}
	e.do("PUT", "/api/v0/asks/999/", e.renterKey, `{"image": "busybox", "onstart": "true"}`).vastError(t, http.StatusNotFound, "not_found")
}

// TestListV1Paging pages through two instances one at a time.
func TestListV1Paging(t *testing.T) {
	e := newEnv(t)
	body := strings.Replace(createBody, `"price": null`, `"price": null, "num_gpus": 1`, 1)
	a := e.createInstance(strings.Replace(body, `"vast-test"`, `"one"`, 1))
	e.do("PUT", fmt.Sprintf("/api/v0/instances/%d/", a), e.renterKey, `{"label": "one"}`).obj(t)
	var ids []float64
	token := ""
	for page := 0; page < 3; page++ {
		q := "/api/v1/instances/?select_filters=%7B%7D&limit=1&order_by=" + url.QueryEscape(`[{"col":"id","dir":"desc"}]`)
		if token != "" {
			q += "&after_token=" + url.QueryEscape(token)
		}
		m := e.do("GET", q, e.renterKey, "").obj(t)
		for _, in := range m["instances"].([]any) {
			ids = append(ids, num(t, in.(map[string]any)["id"]))
		}
		if m["next_token"] == nil {
			break
		}
		token = m["next_token"].(string)
	}
	if len(ids) != 1 || ids[0] != float64(a) {
		t.Errorf("paged ids = %v", ids)
	}
	m := e.do("GET", "/api/v1/instances/?select_filters="+url.QueryEscape(`{"label":{"eq":"nope"}}`), e.renterKey, "").obj(t)
	if len(m["instances"].([]any)) != 0 || num(t, m["total_instances"]) != 0 {
		t.Errorf("filtered = %v", m)
	}
	e.do("GET", "/api/v1/instances/?select_filters="+url.QueryEscape(`{"dph_total":{"lt":1}}`), e.renterKey, "").vastError(t, http.StatusBadRequest, "invalid_args")
	e.do("GET", "/api/v1/instances/?after_token=garbage", e.renterKey, "").vastError(t, http.StatusBadRequest, "invalid_args")
}

// TestCurrentUser checks the keys the CLI reads and pops.
func TestCurrentUser(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"/api/v0/users/current", "/api/v0/users/current/?owner=me"} {
		u := e.do("GET", p, e.renterKey, "").obj(t)
		for _, f := range []string{"api_key", "balance", "credit", "email", "id", "username"} {
			if _, ok := u[f]; !ok {
				t.Errorf("user lacks %s", f)
			}
		}
		if num(t, u["credit"]) != 10 || num(t, u["balance"]) != 10 || u["username"] != "renter" ||
			!strings.HasPrefix(e.renterKey, u["api_key"].(string)) || u["api_key"] == e.renterKey {
			t.Errorf("user = %v", u)
		}
	}
}

// TestMachines lists, shows, sets the minimum bid of and unlists a machine
// with the bodies `vastai list machine`, `set min-bid` and `unlist machine`
// send, and checks the exact Money the listing holds.
func TestMachines(t *testing.T) {
	e := newEnv(t)
	end := time.Now().Add(30 * 24 * time.Hour).Truncate(time.Second)
	body := fmt.Sprintf(`{"machine": %d, "price_gpu": 0.5, "price_disk": 0.15, "price_inetu": 0.02, "price_inetd": 0.01,
		"price_min_bid": 0.25, "min_chunk": null, "end_date": %d.0, "credit_discount_max": null, "duration": null,
		"vol_size": null, "vol_price": null}`, e.machineID, end.Unix())
	if m := e.do("PUT", "/api/v0/machines/create_asks/", e.renterKey, body).obj(t); m["success"] != true {
		t.Fatalf("create_asks = %v", m)
	}
	m, err := e.svc.FindMachineByID(e.ctx(e.renterID), e.machineID)
	if err != nil {
		t.Fatal(err)
	}
	l := m.Listing
	if !l.Listed || l.PriceGPU != 500_000 || l.PriceDisk != 150_000 || l.PriceInetUp != 20_000 || l.PriceInetDown != 10_000 ||
		l.MinBid != 250_000 || l.EndDate == nil || !l.EndDate.Equal(end) {
		t.Errorf("listing = %+v", l)
	}

	var ms struct {
		Machines []map[string]any `json:"machines"`
	}
	e.do("GET", "/api/v0/machines?owner=me", e.renterKey, "").json(t, &ms)
	if len(ms.Machines) != 1 {
		t.Fatalf("machines = %v", ms.Machines)
	}
	row := ms.Machines[0]
	for _, f := range []string{"id", "num_gpus", "gpu_name", "disk_space", "hostname", "driver_version", "reliability2", "verification",
		"public_ipaddr", "geolocation", "listed_gpu_cost", "min_bid_price"} {
		if _, ok := row[f]; !ok {
			t.Errorf("machine lacks %s", f)
		}
	}
	if num(t, row["listed_gpu_cost"]) != 0.5 || num(t, row["min_bid_price"]) != 0.25 || num(t, row["num_gpus"]) != 2 ||
		row["hostname"] != "rig" || row["public_ipaddr"] != "127.0.0.1" {
		t.Errorf("machine = %v", row)
	}
	var one []map[string]any
	for _, p := range []string{"/api/v0/machines/%d", "/api/v0/machines/%d/?owner=me"} {
		e.do("GET", fmt.Sprintf(p, e.machineID), e.renterKey, "").json(t, &one)
		if len(one) != 1 || num(t, one[0]["id"]) != float64(e.machineID) {
			t.Errorf("GET %s = %v, want a bare list of the machine", p, one)
		}
	}
	e.do("GET", fmt.Sprintf("/api/v0/machines/%d", e.machineID), e.other, "").vastError(t, http.StatusNotFound, "not_found")

	e.do("PUT", fmt.Sprintf("/api/v0/machines/%d/minbid/", e.machineID), e.renterKey, `{"client_id": "me", "price": 0.3}`).obj(t)
	if m, _ := e.svc.FindMachineByID(e.ctx(e.renterID), e.machineID); m.Listing.MinBid != 300_000 {
		t.Errorf("min bid = %s", m.Listing.MinBid)
	}
	for _, c := range []struct{ body, field string }{
		{fmt.Sprintf(`{"machine": %d, "price_gpu": 0.5, "credit_discount_max": 0.4}`, e.machineID), "credit_discount_max"},
		{fmt.Sprintf(`{"machine": %d, "price_gpu": 0.5, "min_chunk": 2}`, e.machineID), "min_chunk"},
		{fmt.Sprintf(`{"machine": %d, "price_gpu": 0.5, "duration": "3 months"}`, e.machineID), "duration"},
		{fmt.Sprintf(`{"machine": %d, "price_gpu": -1}`, e.machineID), "price_gpu"},
		{fmt.Sprintf(`{"machine": %d, "price_inetu": -1}`, e.machineID), "price_inetu"},
		{fmt.Sprintf(`{"machine": %d, "end_date": 1000}`, e.machineID), "end_date"},
		{`{"price_gpu": 0.5}`, "machine"},
	} {
		m := e.do("PUT", "/api/v0/machines/create_asks", e.renterKey, c.body).vastError(t, http.StatusBadRequest, "invalid_args")
		if m["field"] != c.field {
			t.Errorf("create_asks %s: %v, want field %s", c.body, m, c.field)
		}
	}
	e.do("PUT", "/api/v0/machines/create_asks/", e.other, fmt.Sprintf(`{"machine": %d, "price_gpu": 0.1}`, e.machineID)).vastError(t, http.StatusNotFound, "not_found")

	if r := e.do("DELETE", fmt.Sprintf("/api/v0/machines/%d/asks/", e.machineID), e.renterKey, ""); r.obj(t)["success"] != true {
		t.Fatalf("unlist: %s", r.body)
	}
	if m, _ := e.svc.FindMachineByID(e.ctx(e.renterID), e.machineID); m.Listing.Listed {
		t.Error("still listed after unlist")
	}
	e.do("PUT", fmt.Sprintf("/api/v0/machines/%d/minbid", e.machineID), e.renterKey, `{"price": 0.3}`).vastError(t, http.StatusConflict, "conflict")
}

// TestSSHKeys adds, lists, replaces and removes a key.
func TestSSHKeys(t *testing.T) {
	e := newEnv(t)
	line := testKey(t, "alice@laptop")
	pub := strings.Join(strings.Fields(line)[:2], " ") // stored without the comment, which names the key
	k := e.do("POST", "/api/v0/ssh/", e.renterKey, fmt.Sprintf(`{"ssh_key": %q}`, line)).obj(t)
	if k["success"] != true || k["key"] != pub || k["name"] != "alice@laptop" {
		t.Fatalf("add = %v", k)
	}
	var list []map[string]any
	e.do("GET", "/api/v0/ssh/", e.renterKey, "").json(t, &list)
	if len(list) != 1 || list[0]["key"] != pub || list[0]["id"] == nil || list[0]["created_at"] == nil {
		t.Fatalf("list = %v", list)
	}
	u := e.do("GET", "/api/v0/users/current", e.renterKey, "").obj(t)
	if u["ssh_key"] != pub {
		t.Errorf("user ssh_key = %v", u["ssh_key"])
	}
	e.do("POST", "/api/v0/ssh", e.renterKey, fmt.Sprintf(`{"ssh_key": %q}`, line)).vastError(t, http.StatusConflict, "conflict")
	e.do("POST", "/api/v0/ssh/", e.renterKey, `{"ssh_key": "not a key"}`).vastError(t, http.StatusBadRequest, "invalid_args")
	id := list[0]["id"].(json.Number).String()
	pub2 := strings.TrimSpace(testKey(t, ""))
	k2 := e.do("PUT", "/api/v0/ssh/"+id+"/", e.renterKey, fmt.Sprintf(`{"ssh_key": %q}`, pub2)).obj(t)
	e.do("GET", "/api/v0/ssh", e.renterKey, "").json(t, &list)
	if len(list) != 1 || list[0]["key"] != pub2 {
		t.Fatalf("after update = %v", list)
	}
	e.do("DELETE", "/api/v0/ssh/"+k2["id"].(json.Number).String()+"/", e.other, "").vastError(t, http.StatusNotFound, "not_found")
	e.do("DELETE", "/api/v0/ssh/"+k2["id"].(json.Number).String()+"/", e.renterKey, "").obj(t)
	e.do("GET", "/api/v0/ssh/", e.renterKey, "").json(t, &list)
	if len(list) != 0 {
		t.Errorf("after delete = %v", list)
	}
}

// TestInvoicesAndEarnings runs an instance, settles its meters, and reads
// them back through both invoice shapes and the earnings report.
func TestInvoicesAndEarnings(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	id := e.createInstance(createBody)
	e.waitStatus(id, "running")
	time.Sleep(1100 * time.Millisecond)
	if _, err := e.db.Settle(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	sum, err := e.svc.FindCharges(e.ctx(e.renterID), suanli.ChargeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total <= 0 {
		t.Fatalf("nothing charged: %+v", sum)
	}

	// v1: ?select_filters={"when": {…}}&limit=20.
	sel := url.QueryEscape(fmt.Sprintf(`{"when": {"gte": %d, "lte": %d}}`, start.Add(-time.Hour).Unix(), time.Now().Add(time.Hour).Unix()))
	v1 := e.do("GET", "/api/v1/invoices/?select_filters="+sel+"&limit=20", e.renterKey, "").obj(t)
	for _, f := range []string{"results", "count", "total", "next_token"} {
		if _, ok := v1[f]; !ok {
			t.Errorf("v1 invoices lack %s", f)
		}
	}
	var total suanli.Money
	var sawCredit bool
	for _, r := range v1["results"].([]any) {
		row := r.(map[string]any)
		amt, err := suanli.ParseMoney(row["amount"].(json.Number).String())
		if err != nil {
			t.Fatal(err)
		}
		if row["type"] == "credit" {
			sawCredit = true
			continue
		}
		total += amt
		if row["description"] == "" || row["start"] == nil || row["end"] == nil {
			t.Errorf("row = %v", row)
		}
	}
	if total != sum.Total || !sawCredit {
		t.Errorf("v1 charges sum to %s, the ledger says %s; credit row seen: %v", total, sum.Total, sawCredit)
	}
	// Paging: one at a time.
	p1 := e.do("GET", "/api/v1/invoices/?select_filters="+sel+"&limit=1", e.renterKey, "").obj(t)
	if num(t, p1["count"]) != 1 || p1["next_token"] == nil {
		t.Errorf("page 1 = %v", p1)
	}
	p2 := e.do("GET", "/api/v1/invoices?select_filters="+sel+"&limit=1&after_token="+url.QueryEscape(p1["next_token"].(string)), e.renterKey, "").obj(t)
	if num(t, p2["count"]) != 1 || fmt.Sprint(p2["results"]) == fmt.Sprint(p1["results"]) {
		t.Errorf("page 2 = %v", p2)
	}
	e.do("GET", "/api/v1/invoices/?select_filters="+url.QueryEscape(`{"service": {"in": ["credit"]}}`), e.renterKey, "").obj(t)

	// The older shape.
	old := e.do("GET", fmt.Sprintf("/api/v0/users/me/invoices?owner=me&sdate=%d&edate=%d&inc_charges=true", start.Add(-time.Hour).Unix(), time.Now().Add(time.Hour).Unix()), e.renterKey, "").obj(t)
	rows := old["invoices"].([]any)
	if len(rows) == 0 {
		t.Fatalf("old invoices = %v", old)
	}
	total = 0
	for _, r := range rows {
		row := r.(map[string]any)
		for _, f := range []string{"description", "quantity", "rate", "amount", "timestamp", "type"} {
			if _, ok := row[f]; !ok {
				t.Errorf("old invoice row lacks %s: %v", f, row)
			}
		}
		if row["type"] == "charge" {
			amt, _ := suanli.ParseMoney(row["amount"].(json.Number).String())
			total += amt
		}
		if row["type"] == "charge" && strings.Contains(row["description"].(string), "compute") && num(t, row["rate"]) != 0.8 {
			t.Errorf("compute rate = %v, want 0.8 $/h", row["rate"])
		}
	}
	if total != sum.Total {
		t.Errorf("old invoices sum to %s, the ledger says %s", total, sum.Total)
	}
	if _, ok := old["current"].(map[string]any)["charges"]; !ok {
		t.Errorf("current = %v", old["current"])
	}

	// Earnings: the renter owns the machine, so it earned what it paid.
	day := float64(time.Now().Unix()) / 86400
	earn := e.do("GET", fmt.Sprintf("/api/v0/users/me/machine-earnings?owner=me&sday=%f&eday=%f", day-1, day), e.renterKey, "").obj(t)
	per := earn["per_machine"].([]any)
	if len(per) != 1 || num(t, per[0].(map[string]any)["machine_id"]) != float64(e.machineID) || num(t, per[0].(map[string]any)["gross"]) <= 0 {
		t.Errorf("earnings = %v", earn)
	}
	e.do("GET", "/api/v0/users/99/machine-earnings?owner=me", e.renterKey, "").vastError(t, http.StatusNotFound, "not_found")
}
