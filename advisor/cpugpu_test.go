package advisor_test

import (
	"strings"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
)

func cpuGPUOffers() []*suanli.Offer {
	return []*suanli.Offer{
		{ID: 1, CPUCores: 64, DPHTotal: 800_000},                                                       // 64-core CPU box, $0.80/h
		{ID: 2, CPUCores: 16, DPHTotal: 300_000},                                                       // 16-core CPU box, $0.30/h
		{ID: 3, GPUName: "RTX 4090", NumGPUs: 1, CPUCores: 16, DPHTotal: 500_000},                      // $0.50/h
		{ID: 4, GPUName: "H100 SXM", NumGPUs: 1, CPUCores: 24, DPHTotal: 2_000_000, TotalFlops: 165.2}, // 2× the reference GPU
		{ID: 5, CPUCores: 8}, // no price: ignored
	}
}

func TestAdviseCPUOrGPU(t *testing.T) {
	for _, tc := range []struct {
		kind      string
		gpuCode   bool
		best      string
		cpuID     int64
		cpuUnit   suanli.Money
		gpuID     int64
		gpuUnit   suanli.Money
		cpuCostBP int64
	}{
		// Web service: 64 cores = 2 units → $0.40/unit; 16 cores = 0.5 unit
		// → $0.60; the 4090 box counts its 16 cores: $1.00/unit.
		{"web-service", false, "cpu", 1, 400_000, 3, 1_000_000, 4000},
		// Training: the 4090 does 25 units/h → $0.02/unit; the H100 does 2 ×
		// 25 = 50 units for $2 → $0.04. The best CPU box is 200× the cost.
		{"training", false, "gpu", 1, 400_000, 3, 20_000, 200000},
		// Feature engineering uses at most 16 cores: 0.5 unit per box; the
		// cheapest 16 cores are the 16-core CPU box at $0.60/unit, then the
		// 4090 box's cores at $1.00 (the GPU itself unused).
		{"feature engineering", false, "cpu", 2, 600_000, 3, 1_000_000, 6000},
		// ... unless the pipeline runs on RAPIDS: 5 units on the 4090.
		{"etl", true, "gpu", 2, 600_000, 3, 100_000, 60000},
	} {
		p, err := advisor.ParseWorkloadKind(tc.kind)
		if err != nil {
			t.Fatal(err)
		}
		a := advisor.AdviseCPUOrGPU(p, cpuGPUOffers(), tc.gpuCode)
		if a.Best != tc.best || a.BestCPU == nil || a.BestGPU == nil || a.Considered != 4 {
			t.Fatalf("%s: %+v", tc.kind, a)
		}
		if a.BestCPU.OfferID != tc.cpuID || a.BestCPU.CostPerUnit != tc.cpuUnit || a.BestGPU.OfferID != tc.gpuID || a.BestGPU.CostPerUnit != tc.gpuUnit || a.CPUCostBP != tc.cpuCostBP {
			t.Errorf("%s: cpu #%d %s, gpu #%d %s, cpu/gpu %d bp; want #%d %s, #%d %s, %d bp (%s)", tc.kind,
				a.BestCPU.OfferID, a.BestCPU.CostPerUnit, a.BestGPU.OfferID, a.BestGPU.CostPerUnit, a.CPUCostBP,
				tc.cpuID, tc.cpuUnit, tc.gpuID, tc.gpuUnit, tc.cpuCostBP, a.Explanation)
		}
		if !strings.HasPrefix(a.Explanation, strings.ToUpper(tc.best)) {
			t.Errorf("%s: explanation %q should lead with %s", tc.kind, a.Explanation, tc.best)
		}
	}
	p, _ := advisor.ParseWorkloadKind("database")
	if a := advisor.AdviseCPUOrGPU(p, cpuGPUOffers()[2:3], false); a.Best != "gpu" || a.BestCPU != nil || !strings.Contains(a.Explanation, "no CPU-only offer") {
		t.Errorf("GPU offers only: %+v", a)
	}
	if a := advisor.AdviseCPUOrGPU(p, nil, false); a.Best != "" || a.Explanation == "" {
		t.Errorf("no offers: %+v", a)
	}
	if _, err := advisor.ParseWorkloadKind("mining"); suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(err.Error(), "web-service") {
		t.Errorf("ParseWorkloadKind(mining) = %v, want EINVALID listing the kinds", err)
	}
	if len(advisor.KindProfiles()) < 6 {
		t.Errorf("want at least 6 workload kinds")
	}
}
