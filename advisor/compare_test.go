package advisor_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
)

func TestBuiltinCatalog(t *testing.T) {
	rows := advisor.BuiltinCatalog()
	providers := map[string]int{}
	for _, r := range rows {
		providers[r.Provider]++
		if r.InstanceType == "" || r.Region == "" || r.Price <= 0 || r.GPUCount <= 0 || r.GPUMemGiB <= 0 || r.VCPUs <= 0 || r.MemoryGiB <= 0 {
			t.Errorf("incomplete row %+v", r)
		}
		if u, err := url.Parse(r.Source); err != nil || u.Scheme != "https" {
			t.Errorf("%s %s: source %q is not a URL", r.Provider, r.InstanceType, r.Source)
		}
		if _, err := time.Parse(time.DateOnly, r.AsOf); err != nil {
			t.Errorf("%s %s: as-of %q is not a date", r.Provider, r.InstanceType, r.AsOf)
		}
		// The GPU column must be canonical: what NormalizeGPU makes of it.
		if k := r.Key(); k.String() != r.GPU {
			t.Errorf("%s %s: GPU %q normalises to %q", r.Provider, r.InstanceType, r.GPU, k)
		}
		if _, ok := advisor.LookupGPU(r.Key()); !ok {
			t.Errorf("%s %s: GPU %q not in the GPU table", r.Provider, r.InstanceType, r.GPU)
		}
	}
	for _, p := range []string{"aws", "azure", "alibaba", "gcp", "lambda", "runpod"} {
		if providers[p] == 0 {
			t.Errorf("no %s rows in the built-in catalog", p)
		}
	}
	// Per-GPU price: p4d.24xlarge is 8 × A100 at $32.7726.
	for _, r := range rows {
		if r.InstanceType == "p4d.24xlarge" && r.PerGPUHour() != 4_096_575 {
			t.Errorf("p4d per GPU = %s, want $4.096575", r.PerGPUHour())
		}
	}
}

func TestMergeCatalog(t *testing.T) {
	base := []advisor.CatalogRow{
		{Provider: "aws", InstanceType: "g4dn.xlarge", Region: "us-east-1", Price: 526_000},
		{Provider: "aws", InstanceType: "g4dn.xlarge", Region: "eu-west-1", Price: 587_000},
	}
	extra := []advisor.CatalogRow{{Provider: "AWS", InstanceType: "g4dn.xlarge", Region: "us-east-1", Price: 500_000}}
	got := advisor.MergeCatalog(base, extra)
	if len(got) != 2 || got[0].Region != "eu-west-1" || got[1].Price != 500_000 {
		t.Errorf("MergeCatalog = %+v, want eu-west-1 kept and us-east-1 replaced", got)
	}
	if base[0].Price != 526_000 {
		t.Errorf("MergeCatalog changed its input")
	}
}

func TestCompare(t *testing.T) {
	catalog := []advisor.CatalogRow{
		{Provider: "lambda", InstanceType: "gpu_8x_h100_sxm5", GPU: "H100 SXM", GPUCount: 8, Region: "us-east-1", Price: 23_920_000, AsOf: "2024-10-01"},
		{Provider: "aws", InstanceType: "p5.48xlarge", GPU: "H100 SXM", GPUCount: 8, Region: "us-east-1", Price: 98_320_000, AsOf: "2024-10-01"},
		{Provider: "aws", InstanceType: "p5.48xlarge", GPU: "H100 SXM", GPUCount: 8, Region: "eu-north-1", Price: 110_000_000, AsOf: "2024-10-01"},
		{Provider: "lambda", InstanceType: "gpu_1x_h100_pcie", GPU: "H100 PCIe", GPUCount: 1, Region: "us-east-1", Price: 2_490_000, AsOf: "2024-10-01"},
		{Provider: "runpod", InstanceType: "1x_H100", GPU: "H100", GPUCount: 1, Region: "any", Price: 2_000_000, AsOf: "2024-10-01"},
		{Provider: "gcp", InstanceType: "g2-standard-4", GPU: "L4", GPUCount: 1, Region: "us-central1", Price: 706_800, AsOf: "2024-10-01"},
	}
	offers := []*suanli.Offer{
		// 2 × H100 SXM at $3.74/h: $1.87 per GPU-hour.
		{ID: 1, GPUName: "NVIDIA H100 80GB HBM3", NumGPUs: 2, DPHBase: 3_740_000, Country: "US"},
		{ID: 2, GPUName: "RTX 4090", NumGPUs: 1, GPUPrice: 400_000},
		{ID: 3, NumGPUs: 0, CPUCores: 64, DPHBase: 1_000_000}, // CPU-only: left out
		{ID: 4, GPUName: "L4", NumGPUs: 1, GPUPrice: 900_000},
	}
	c := advisor.Compare(offers, catalog, time.Date(2025, 10, 1, 0, 0, 0, 0, time.UTC))
	if len(c.Offers) != 3 {
		t.Fatalf("compared %d offers, want 3 (GPU offers only)", len(c.Offers))
	}
	h := c.Offers[0]
	if h.PerGPUHour != 1_870_000 || h.GPU != "H100 SXM" {
		t.Fatalf("offer 1: %+v", h)
	}
	// Each provider once, its cheapest exact match; RunPod's family-only
	// "H100" row matches loosely; Lambda's PCIe row does not match at all.
	want := []struct {
		provider string
		per      suanli.Money
		savings  int64
		exact    bool
	}{
		{"runpod", 2_000_000, 650, false}, // (2.00 − 1.87)/2.00 = 6.5%
		{"lambda", 2_990_000, 3745, true}, // (2.99 − 1.87)/2.99 = 37.458…% → 37.45%
		{"aws", 12_290_000, 8478, true},   // (12.29 − 1.87)/12.29 = 84.784…%
	}
	if len(h.Equivalents) != len(want) {
		t.Fatalf("equivalents %+v, want %d", h.Equivalents, len(want))
	}
	for i, w := range want {
		e := h.Equivalents[i]
		if e.Provider != w.provider || e.PerGPUHour != w.per || e.SavingsBP != w.savings || e.Exact != w.exact || e.AgeDays != 365 {
			t.Errorf("equivalent %d = %+v, want %+v, 365 days old", i, e, w)
		}
	}
	if !strings.Contains(h.Summary, "6.5% cheaper than the cheapest equivalent") || !strings.Contains(h.Summary, "family match") {
		t.Errorf("summary %q", h.Summary)
	}
	if r := c.Offers[1]; len(r.Equivalents) != 0 || !strings.Contains(r.Summary, "no public-cloud") {
		t.Errorf("RTX 4090 offer: %+v, want no equivalents", r)
	}
	// Dearer than the cloud: negative savings.
	if l := c.Offers[2]; len(l.Equivalents) != 1 || l.Equivalents[0].SavingsBP != -2733 || !strings.Contains(l.Summary, "dearer") {
		t.Errorf("L4 offer: %+v, want -27.33%%", l)
	}
	// p5.48xlarge costs 11.68/98.32 = 11.879…% → 11.87% more in eu-north-1.
	if len(c.Regions) != 1 || c.Regions[0].InstanceType != "p5.48xlarge" || c.Regions[0].SpreadBP != 1187 || c.Regions[0].MaxRegion != "eu-north-1" {
		t.Errorf("regions = %+v, want p5.48xlarge +11.87%% in eu-north-1", c.Regions)
	}
}

// TestCompareWithImportedVast: the real Vast catalog against the built-in
// one: every Vast H100 SXM row finds AWS, Azure, GCP, Lambda, OCI and
// RunPod equivalents.
func TestCompareWithImportedVast(t *testing.T) {
	vast, _ := importFile(t, "skypilot-catalog-v8/vast/vms.csv", "vast")
	o := &suanli.Offer{ID: 9, GPUName: "H100 SXM", NumGPUs: 1, GPUPrice: 1_500_000}
	c := advisor.Compare([]*suanli.Offer{o}, advisor.MergeCatalog(advisor.BuiltinCatalog(), vast), time.Time{})
	got := map[string]bool{}
	for _, e := range c.Offers[0].Equivalents {
		got[e.Provider] = true
	}
	for _, p := range []string{"aws", "azure", "gcp", "lambda", "oci", "runpod", "vast"} {
		if !got[p] {
			t.Errorf("no %s equivalent for an H100 SXM: %+v", p, c.Offers[0].Equivalents)
		}
	}
	if e := c.Offers[0].Equivalents[0]; e.Provider != "vast" || e.PerGPUHour != 1_865_000 {
		t.Errorf("cheapest equivalent %+v, want vast 2x H100 SXM at $1.865/GPU-h", e)
	}
}
