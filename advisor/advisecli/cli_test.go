package advisecli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
	"github.com/suanli/suanli/advisor/advisecli"
	"github.com/suanli/suanli/internal/testreq"
)

// fixedOffers is an OfferService that answers every search with the same
// offers and records the queries it was asked.
type fixedOffers struct {
	offers  []*suanli.Offer
	queries []suanli.OfferQuery
}

func (f *fixedOffers) SearchOffers(_ context.Context, q suanli.OfferQuery) (*suanli.OfferResult, error) {
	f.queries = append(f.queries, q)
	return &suanli.OfferResult{Offers: f.offers, Total: len(f.offers)}, nil
}

func (f *fixedOffers) FindOfferByID(_ context.Context, id int64) (*suanli.Offer, error) {
	for _, o := range f.offers {
		if o.ID == id {
			return o, nil
		}
	}
	return nil, suanli.Errorf(suanli.ENOTFOUND, "offer %d not found", id)
}

var _ suanli.OfferService = (*fixedOffers)(nil)

func testOffers() *fixedOffers {
	return &fixedOffers{offers: []*suanli.Offer{
		{ID: 1, GPUName: "NVIDIA H100 80GB HBM3", NumGPUs: 2, GPURAM: 79.6, CPUCores: 32, DPHBase: 3_740_000, DPHTotal: 3_750_000, Country: "SE"},
		{ID: 2, GPUName: "RTX 4090", NumGPUs: 1, GPURAM: 24, CPUCores: 16, DPHBase: 400_000, DPHTotal: 410_000, Country: "DE"},
		{ID: 3, CPUCores: 64, DPHBase: 800_000, DPHTotal: 810_000, Country: "FI"},
	}}
}

// run executes the advisor's commands under a root like cmd/suanli's,
// with SUANLI_HOME in a temp dir, and returns the output.
func run(t *testing.T, svc suanli.OfferService, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "suanli", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(advisecli.Commands(func(context.Context) (suanli.OfferService, error) {
		if svc == nil {
			return nil, errors.New("no server in this test")
		}
		return svc, nil
	})...)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

func home(t *testing.T) string {
	t.Helper()
	h := t.TempDir()
	t.Setenv("SUANLI_HOME", h)
	return h
}

func contains(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestVRAMCommand(t *testing.T) {
	home(t)
	out, err := run(t, nil, "advise", "vram", "llama-7b")
	if err != nil {
		t.Fatal(err)
	}
	// The formula says 15.70 GiB; the published minimum, 24 GB, is
	// the advice: both show, and the card and the query follow the larger.
	contains(t, out, "LLaMA-7B (6.74B parameters): infer, fp16, batch 1, sequence 2048", "weights", "12.55", "KV cache", "total",
		"Estimate 15.70 GiB (the formula above); published minimum for this workload: 24 GB",
		"Recommended: one GPU with 24 GB or more (offer query: gpu_ram>=23.6)", "int4 weights", "Source: Touvron")
	if strings.Contains(out, "16 GB or more") || strings.Contains(out, "gpu_ram>=15.") {
		t.Errorf("llama-7b advice falls below the published 24 GB:\n%s", out)
	}
	out, err = run(t, nil, "advise", "vram", "llama-7b", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var pub struct {
		TotalGiB     float64 `json:"total_gib"`
		PublishedGB  float64 `json:"published_gb"`
		RequiredGiB  float64 `json:"required_gib"`
		SmallestCard int     `json:"smallest_card_gb"`
		Query        string  `json:"query"`
	}
	if err := json.Unmarshal([]byte(out), &pub); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if pub.TotalGiB >= 24 || pub.PublishedGB != 24 || pub.RequiredGiB != 24 || pub.SmallestCard != 24 || pub.Query != "gpu_ram>=23.6" {
		t.Errorf("llama-7b JSON = %+v, want the estimate under 24 GiB and published_gb, required_gib, smallest_card_gb 24, query gpu_ram>=23.6", pub)
	}
	// A changed workload voids the published figure: int4 follows the formula.
	out, err = run(t, nil, "advise", "vram", "llama-7b", "--dtype", "int4")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "published minimum") || !strings.Contains(out, "Minimum ") {
		t.Errorf("llama-7b int4 shows the fp16 published minimum:\n%s", out)
	}

	svc := testOffers()
	out, err = run(t, svc, "advise", "vram", "--params", "7B", "--dtype", "bf16", "--task", "finetune", "--lora", "--batch", "8", "--seq", "1024", "--grad-accum", "4", "--search")
	if err != nil {
		t.Fatal(err)
	}
	contains(t, out, "custom model (7B parameters): finetune, bf16 mixed precision, batch 8 (4 × 2), sequence 1024, adamw, LoRA rank 16",
		"gradient accumulation: 4 micro-batches of 2", "Offers (gpu_ram>=", "NVIDIA H100 80GB HBM3")
	if len(svc.queries) != 1 || !strings.HasPrefix(svc.queries[0].Query, "gpu_ram>=") || svc.queries[0].Order != "dph" {
		t.Errorf("searched %+v, want one gpu_ram>= query ordered by dph", svc.queries)
	}

	out, err = run(t, nil, "advise", "vram", "mixtral-8x7b", "--dtype", "int4", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Total        int64   `json:"total"`
		TotalGiB     float64 `json:"total_gib"`
		Weights      int64   `json:"weights"`
		SmallestCard int     `json:"smallest_card_gb"`
		Query        string  `json:"query"`
		Workload     advisor.Workload
		Alternatives []advisor.Alternative
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	// Mixtral keeps all 46.7B parameters in memory: 23.35 GB at 4 bits.
	if got.Weights != 23_351_396_352 || got.Workload.Dtype != advisor.INT4 || got.SmallestCard != 32 || !strings.HasPrefix(got.Query, "gpu_ram>=") {
		t.Errorf("mixtral int4 JSON = %+v", got)
	}

	out, err = run(t, nil, "advise", "vram", "--list")
	if err != nil {
		t.Fatal(err)
	}
	contains(t, out, "MODEL", "resnet50", "8 GB", "bert-base", "16 GB", "sd-1.4", "10 GB", "llama-7b", "24 GB", "qwen2.5-72b")
}

func TestVRAMCommandErrors(t *testing.T) {
	home(t)
	for _, args := range [][]string{
		{"advise", "vram"},
		{"advise", "vram", "gpt-17"},
		{"advise", "vram", "--params", "lots"},
		{"advise", "vram", "llama-7b", "--params", "7B"},
		{"advise", "vram", "--params", "7B", "--dtype", "fp12"},
		{"advise", "vram", "--params", "7B", "--task", "train", "--dtype", "int4"},
	} {
		_, err := run(t, nil, args...)
		if suanli.ErrorCode(err) != suanli.EINVALID {
			t.Errorf("%v: err %v, want EINVALID", args, err)
		}
	}
	// --search without a server says why.
	if _, err := run(t, nil, "advise", "vram", "llama-7b", "--search"); err == nil || !strings.Contains(err.Error(), "gpu_ram>=") {
		t.Errorf("--search without a server: %v", err)
	}
}

func TestCPUOrGPUCommand(t *testing.T) {
	home(t)
	svc := testOffers()
	out, err := run(t, svc, "advise", "cpu-or-gpu", "--workload", "web-service", "--query", "reliability>0.9")
	if err != nil {
		t.Fatal(err)
	}
	// 64 cores at $0.81/h = 2 units → $0.405; the 4090 box's 16 cores at
	// $0.41/h = 0.5 unit → $0.82.
	contains(t, out, "best CPU", "#3", "0.405", "best GPU", "#2", "0.82", "CPU: offer #3", "49.39%", "When a CPU wins: Always")
	if svc.queries[0].Query != "reliability>0.9" {
		t.Errorf("query %q, want the --query", svc.queries[0].Query)
	}
	out, err = run(t, svc, "advise", "cpu-or-gpu", "--workload", "training", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var a advisor.CPUOrGPUAdvice
	if err := json.Unmarshal([]byte(out), &a); err != nil || a.Best != "gpu" || a.BestGPU.OfferID != 2 {
		t.Errorf("training JSON = %+v, %v; want the RTX 4090 offer", a, err)
	}
	if _, err := run(t, svc, "advise", "cpu-or-gpu"); suanli.ErrorCode(err) != suanli.EINVALID {
		t.Errorf("no --workload: %v, want EINVALID", err)
	}
	out, err = run(t, nil, "advise", "cpu-or-gpu", "--list")
	if err != nil {
		t.Fatal(err)
	}
	contains(t, out, "feature-engineering", "database", "rendering", "training", "inference")
}

func TestRentVsBuyCommand(t *testing.T) {
	home(t)
	// The example; no server is needed.
	out, err := run(t, nil, "advise", "rent-vs-buy", "--hourly", "2.5", "--hours", "300", "--instances", "1", "--hardware-price", "30000",
		"--months", "36", "--utilization", "0.5", "--power-watts", "700", "--kwh-price", "0.15")
	if err != nil {
		t.Fatal(err)
	}
	contains(t, out, "$750.00", "$1666.666666", "$3333.333333", "keep renting", "break-even: month 42", "Rent.", "$31134.00")

	out, err = run(t, nil, "advise", "rent-vs-buy", "--hourly", "4", "--hours", "720", "--hardware-price", "30000", "--power-watts", "700", "--kwh-price", "0.15", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r advisor.RentVsBuyResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	// 4 × 720 = 2880/month; utilisation 720/730 = 98.63%; power 0.7 × 720 ×
	// 0.15 = 75.60; 30000 / (2880 − 75.60) = 10.7 → month 11.
	if !r.Rule.ConsiderBuying || r.Input.UtilizationBP != 9863 || r.TCO.BreakEvenMonth != 11 || !strings.HasPrefix(r.TCO.Verdict, "Buy.") {
		t.Errorf("heavy use = %+v", r)
	}
	for _, args := range [][]string{
		{"advise", "rent-vs-buy"},
		{"advise", "rent-vs-buy", "--hourly", "two", "--hours", "1", "--hardware-price", "1"},
		{"advise", "rent-vs-buy", "--hourly", "2", "--hours", "1", "--hardware-price", "1", "--utilization", "150%"},
		{"advise", "rent-vs-buy", "--hourly", "2", "--hours", "1", "--hardware-price", "1", "--utilization", "0"},
		{"advise", "rent-vs-buy", "--hourly", "2", "--hours", "800", "--hardware-price", "1"},
	} {
		if _, err := run(t, nil, args...); suanli.ErrorCode(err) != suanli.EINVALID {
			t.Errorf("%v: %v, want EINVALID", args[2:], err)
		}
	}
}

func TestCatalogImportListCompare(t *testing.T) {
	h := home(t)
	vms := testreq.SharedData(t, "skypilot-catalog-v8/vast/vms.csv")
	out, err := run(t, nil, "catalog", "import", vms)
	if err != nil {
		t.Fatal(err)
	}
	contains(t, out, "Imported 67 vast rows", "skipped 0", "now holds 67 rows: vast 67.")
	b, err := os.ReadFile(filepath.Join(h, advisecli.CatalogFile))
	if err != nil {
		t.Fatalf("catalog not stored: %v", err)
	}
	var stored struct {
		Rows []advisor.CatalogRow
	}
	if err := json.Unmarshal(b, &stored); err != nil || len(stored.Rows) != 67 {
		t.Fatalf("stored catalog: %d rows, %v", len(stored.Rows), err)
	}
	if _, err := time.Parse(time.DateOnly, stored.Rows[0].AsOf); err != nil || !strings.Contains(stored.Rows[0].Source, "vms.csv") {
		t.Errorf("imported row dated %q, source %q", stored.Rows[0].AsOf, stored.Rows[0].Source)
	}

	// Importing again replaces the provider's rows rather than doubling them.
	out, err = run(t, nil, "catalog", "import", vms, "--provider", "vast", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var imp struct {
		Provider    string
		Imported    int
		Skipped     []advisor.Skip
		CatalogRows int `json:"catalog_rows"`
	}
	if err := json.Unmarshal([]byte(out), &imp); err != nil || imp.Provider != "vast" || imp.Imported != 67 || imp.CatalogRows != 67 || imp.Skipped == nil {
		t.Errorf("re-import JSON = %+v, %v", imp, err)
	}

	out, err = run(t, nil, "catalog", "ls", "--gpu", "H100_SXM")
	if err != nil {
		t.Fatal(err)
	}
	contains(t, out, "PROVIDER", "p5.48xlarge", "gpu_8x_h100_sxm5", "1x-H100_SXM-32-65536", "Vietnam, VN, AS")
	if strings.Contains(out, "H100 NVL") || strings.Contains(out, "H100 PCIe") {
		t.Errorf("--gpu H100_SXM listed other forms:\n%s", out)
	}
	out, err = run(t, nil, "catalog", "ls", "--provider", "lambda", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []advisor.CatalogRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) == 0 {
		t.Fatalf("ls --json: %v", err)
	}
	for _, r := range rows {
		if r.Provider != "lambda" {
			t.Errorf("--provider lambda listed %s", r.Provider)
		}
	}

	// compare merges built-in and imported rows.
	svc := testOffers()
	out, err = run(t, svc, "compare", "gpu_name=H100_SXM", "--limit", "5")
	if err != nil {
		t.Fatal(err)
	}
	contains(t, out, "Offer #1: 2× H100 SXM at $1.87/GPU-h", "vast", "lambda", "aws", "37.45%", "Offer #2: 1× RTX 4090", "runpod")
	if strings.Contains(out, "Offer #3") {
		t.Errorf("CPU-only offer compared:\n%s", out)
	}
	if q := svc.queries[0]; q.Query != "gpu_name=H100_SXM" || q.Limit != 5 {
		t.Errorf("compare searched %+v", q)
	}
	out, err = run(t, svc, "compare", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var c advisor.Comparison
	if err := json.Unmarshal([]byte(out), &c); err != nil || len(c.Offers) != 2 || c.Offers[0].Equivalents[0].Provider != "vast" {
		t.Errorf("compare --json = %+v, %v", c, err)
	}
}

func TestCatalogImportErrors(t *testing.T) {
	h := home(t)
	acc := testreq.SharedData(t, "skypilot-catalog-v8/common/accelerators.csv")
	if _, err := run(t, nil, "catalog", "import", acc); suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(err.Error(), "--provider") {
		t.Errorf("import from common/: %v, want EINVALID asking for --provider", err)
	}
	_, err := run(t, nil, "catalog", "import", acc, "--provider", "x")
	if suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(err.Error(), "InstanceType") {
		t.Errorf("import accelerators.csv: %v, want EINVALID naming InstanceType", err)
	}
	if _, err := run(t, nil, "catalog", "import", filepath.Join(h, "nope", "vms.csv")); suanli.ErrorCode(err) != suanli.EINVALID {
		t.Errorf("missing file: %v", err)
	}
	// A file of CPU rows only imports nothing and says why.
	cpu := filepath.Join(h, "aws", "vms.csv")
	if err := os.MkdirAll(filepath.Dir(cpu), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cpu, []byte("InstanceType,AcceleratorName,Price,Region\nm5.large,,0.096,us-east-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, nil, "catalog", "import", cpu); err == nil || !strings.Contains(err.Error(), "CPU-only") {
		t.Errorf("CPU-only file: %v, want the skip reason", err)
	}
	if _, err := os.Stat(filepath.Join(h, advisecli.CatalogFile)); err == nil {
		t.Errorf("a failed import wrote the catalog")
	}
	// A corrupt catalog.json is reported, not silently replaced.
	if err := os.WriteFile(filepath.Join(h, advisecli.CatalogFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, nil, "catalog", "ls"); suanli.ErrorCode(err) != suanli.EINVALID {
		t.Errorf("corrupt catalog: %v, want EINVALID", err)
	}
}

func TestHelpTeaches(t *testing.T) {
	home(t)
	for _, args := range [][]string{
		{"advise", "--help"}, {"advise", "vram", "--help"}, {"advise", "cpu-or-gpu", "--help"}, {"advise", "rent-vs-buy", "--help"},
		{"compare", "--help"}, {"catalog", "--help"}, {"catalog", "import", "--help"}, {"catalog", "ls", "--help"},
	} {
		out, err := run(t, nil, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		contains(t, out, "Examples:", "suanli ", "--json")
	}
}
