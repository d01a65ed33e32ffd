package agent_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
	"github.com/suanli/suanli/agent/process"
)

// TestCollectorMetrics runs the agent with the process runtime (one
// instance still running, one exited) and the recorded nvidia-smi samples
// of four H100s, and scrapes the collector as Prometheus would: instance
// counts by status, and per-GPU utilisation, memory in bytes, temperature
// and power, each labelled with the GPU's index, every family with its
// help and gauge type. Once the instances are gone, so are their counts.
func TestCollectorMetrics(t *testing.T) {
	csv := readTestdata(t, "samples-h100-4.csv")
	sampler := func(ctx context.Context) ([]agent.GPUSample, error) { return agent.ParseGPUSamples(csv) }
	rt := process.New(t.TempDir(), nil)
	srv := newTestServer(t, 30*time.Second)
	srv.set(suanli.InstanceSpec{ID: 1, Desired: suanli.DesiredRunning, Image: "none", Cmd: []string{"sleep", "60"}},
		suanli.InstanceSpec{ID: 2, Desired: suanli.DesiredRunning, Image: "none", Cmd: []string{"true"}})
	stop := startAgent(t, srv, rt, func(c *agent.Config) { c.GPUSampler = sampler })
	defer stop()
	waitReports(t, srv, map[int64]string{1: suanli.StatusRunning, 2: suanli.StatusExited})

	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(agent.NewCollector(rt, sampler)); err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	want := map[string]float64{
		`suanli_agent_instances{status="exited"}`:       1,
		`suanli_agent_instances{status="running"}`:      1,
		`suanli_agent_gpu_utilization_percent{gpu="0"}`: 98,
		`suanli_agent_gpu_utilization_percent{gpu="1"}`: 97,
		`suanli_agent_gpu_utilization_percent{gpu="2"}`: 0,
		`suanli_agent_gpu_utilization_percent{gpu="3"}`: 45,
		`suanli_agent_gpu_memory_used_bytes{gpu="0"}`:   71234 * mib,
		`suanli_agent_gpu_memory_used_bytes{gpu="1"}`:   71230 * mib,
		`suanli_agent_gpu_memory_used_bytes{gpu="2"}`:   4 * mib,
		`suanli_agent_gpu_memory_used_bytes{gpu="3"}`:   20480 * mib,
		`suanli_agent_gpu_temperature_celsius{gpu="0"}`: 67,
		`suanli_agent_gpu_temperature_celsius{gpu="1"}`: 69,
		`suanli_agent_gpu_temperature_celsius{gpu="2"}`: 31,
		`suanli_agent_gpu_temperature_celsius{gpu="3"}`: 52,
		`suanli_agent_gpu_power_watts{gpu="0"}`:         652.41,
		`suanli_agent_gpu_power_watts{gpu="1"}`:         648.90,
		`suanli_agent_gpu_power_watts{gpu="2"}`:         72.15,
		`suanli_agent_gpu_power_watts{gpu="3"}`:         310.07,
	}
	series, types := scrape(t, reg)
	if diff := cmp.Diff(want, series); diff != "" {
		t.Errorf("scrape with two instances and four H100s (-want +got):\n%s", diff)
	}
	wantTypes := map[string]string{}
	for _, name := range []string{"suanli_agent_instances", "suanli_agent_gpu_utilization_percent", "suanli_agent_gpu_memory_used_bytes",
		"suanli_agent_gpu_temperature_celsius", "suanli_agent_gpu_power_watts"} {
		wantTypes[name] = "gauge"
	}
	if diff := cmp.Diff(wantTypes, types); diff != "" {
		t.Errorf("metric types (-want +got):\n%s", diff)
	}

	// The server drops both: the runtime holds none, and no series says
	// otherwise; the GPUs are still reported.
	srv.set()
	deadline := time.Now().Add(10 * time.Second)
	for {
		reps, err := rt.Status(t.Context())
		if err == nil && len(reps) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runtime still holds %+v (%v) after the server dropped every instance", reps, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	series, _ = scrape(t, reg)
	gpus := 0
	for k := range series {
		if strings.HasPrefix(k, "suanli_agent_instances") {
			t.Errorf("after every instance was removed: %s %v", k, series[k])
		}
		if strings.HasPrefix(k, "suanli_agent_gpu_") {
			gpus++
		}
	}
	if gpus != 16 {
		t.Errorf("after the instances were removed: %d GPU series, want 4 per GPU", gpus)
	}
}

// TestCollectorWithoutGPUs: a machine without real GPUs (no sampler) and
// one whose nvidia-smi fails export instance counts only; a sample with
// [N/A] power exports 0 W rather than dropping the GPU.
func TestCollectorWithoutGPUs(t *testing.T) {
	rt := newTestRuntime(t)
	rt.add(7, suanli.StatusRunning)
	rt.add(8, suanli.StatusStopped)
	failing := func(ctx context.Context) ([]agent.GPUSample, error) {
		return nil, errors.New("nvidia-smi: driver not loaded")
	}
	for name, sampler := range map[string]func(context.Context) ([]agent.GPUSample, error){"no sampler": nil, "failing sampler": failing} {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(agent.NewCollector(rt, sampler))
		want := map[string]float64{`suanli_agent_instances{status="running"}`: 1, `suanli_agent_instances{status="stopped"}`: 1}
		if got, _ := scrape(t, reg); !cmp.Equal(want, got) {
			t.Errorf("%s: scrape = %v, want %v", name, got, want)
		}
	}
	csv := readTestdata(t, "samples-rtx4090-na.csv")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(agent.NewCollector(rt, func(ctx context.Context) ([]agent.GPUSample, error) { return agent.ParseGPUSamples(csv) }))
	got, _ := scrape(t, reg)
	for k, v := range map[string]float64{`suanli_agent_gpu_power_watts{gpu="0"}`: 0, `suanli_agent_gpu_memory_used_bytes{gpu="0"}`: 1 << 20,
		`suanli_agent_gpu_utilization_percent{gpu="0"}`: 3, `suanli_agent_gpu_temperature_celsius{gpu="0"}`: 38} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("RTX 4090 with [N/A] power: %s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}

// scrape gets reg's /metrics page in the text format, as Prometheus does,
// and returns each series (name{labels}) with its value and each family's
// type. A collector error fails the scrape.
func scrape(t *testing.T, reg *prometheus.Registry) (series map[string]float64, types map[string]string) {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	series, types = map[string]float64{}, map[string]string{}
	help := map[string]bool{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		switch f := strings.Fields(line); {
		case len(f) == 0:
		case f[0] == "#" && len(f) >= 4 && f[1] == "HELP":
			help[f[2]] = true
		case f[0] == "#" && len(f) == 4 && f[1] == "TYPE":
			types[f[2]] = f[3]
		case f[0] == "#":
			t.Errorf("metrics line %q", line)
		default:
			i := strings.LastIndexByte(line, ' ')
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			series[line[:i]] = v
		}
	}
	for name := range types {
		if !help[name] {
			t.Errorf("metric %s has no HELP", name)
		}
	}
	return series, types
}

// waitReports waits until the server has the given status for each instance.
func waitReports(t *testing.T, srv *testServer, want map[int64]string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		done := true
		for id, st := range want {
			if r, _ := srv.report(id); r.Status != st {
				done = false
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			for id := range want {
				r, _ := srv.report(id)
				t.Errorf("instance %d: %s (%s), want %s", id, r.Status, r.Message, want[id])
			}
			t.FailNow()
		}
		time.Sleep(20 * time.Millisecond)
	}
}
