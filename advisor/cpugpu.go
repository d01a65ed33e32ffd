package advisor

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/suanli/suanli"
)

// WorkloadKind is a declared kind of work for the CPU-or-GPU advice.
type WorkloadKind string

// The workload kinds the advisor knows.
const (
	KindFeatureEngineering WorkloadKind = "feature-engineering"
	KindWebService         WorkloadKind = "web-service"
	KindDatabase           WorkloadKind = "database"
	KindRendering          WorkloadKind = "rendering"
	KindTraining           WorkloadKind = "training"
	KindInference          WorkloadKind = "inference"
	KindVideoTranscode     WorkloadKind = "video-transcode"
	KindSimulation         WorkloadKind = "simulation"
	KindCIBuild            WorkloadKind = "ci-build"
)

// ReferenceCores is the size of the work unit the advice prices: one hour
// of 32 busy CPU cores.
const ReferenceCores = 32

// ReferenceGPUTFLOPS is the FP32 throughput of the GPU the speedups are
// quoted for (an RTX 4090: 82.6 TFLOPS, NVIDIA Ada whitepaper). Offers that
// report total_flops are scaled against it.
const ReferenceGPUTFLOPS = 82.6

// KindProfile is the rule of thumb for a workload kind. GPUSpeedup is the
// work one reference GPU does in the time ReferenceCores cores do one unit,
// when the code uses the GPU; GPUByDefault says whether the usual software
// for the kind does. UsefulCores caps the cores the work keeps busy (0: it
// scales with every core). CPUWinsWhen is a sentence for people.
type KindProfile struct {
	Kind         WorkloadKind `json:"kind"`
	Description  string       `json:"description"`
	GPUSpeedup   float64      `json:"gpu_speedup"`
	GPUByDefault bool         `json:"gpu_by_default"`
	UsefulCores  int          `json:"useful_cores,omitempty"`
	CPUWinsWhen  string       `json:"cpu_wins_when"`
	Source       string       `json:"source"`
}

var kindProfiles = []KindProfile{
	{KindTraining, "deep-learning training (PyTorch, JAX)", 25, true, 0,
		"For classic machine learning (gradient-boosted trees, scikit-learn) and tiny models; otherwise a GPU wins by an order of magnitude.",
		"Suanli rule of thumb: dense matrix math runs ~20-50× faster on one data-centre GPU than on 32 cores"},
	{KindInference, "deep-learning inference", 8, true, 0,
		"For small models (under ~1B parameters) or few, unbatched requests: CPU cores answer them without paying for an idle GPU.",
		"Suanli rule of thumb for batched inference; single requests gain less"},
	{KindRendering, "3D rendering (Blender Cycles, V-Ray)", 10, true, 0,
		"When the scene does not fit in GPU memory, or the renderer or its plug-ins are CPU-only.",
		"Blender Open Data benchmark (opendata.blender.org), Cycles medians: an RTX 4090 with OptiX scores about 10× a 32-core desktop CPU"},
	{KindVideoTranscode, "video transcoding (FFmpeg)", 4, true, 0,
		"When quality per bit matters more than speed (x264/x265 slow presets are CPU-only) or the codec has no hardware encoder.",
		"Suanli rule of thumb for NVENC against libx264 medium on 32 cores"},
	{KindSimulation, "scientific simulation (CFD, molecular dynamics, Monte Carlo)", 5, false, 0,
		"When the code is not CUDA-ported (most MPI codes): then only the cores count.",
		"Suanli rule of thumb; GPU-ported codes such as GROMACS or GPU solvers in OpenFOAM gain more"},
	{KindFeatureEngineering, "feature engineering and ETL (pandas, Polars, Spark)", 5, false, 16,
		"Almost always: dataframe code uses CPU cores and RAM, not the GPU, unless the pipeline runs on RAPIDS cuDF or Spark RAPIDS.",
		"Suanli rule of thumb; RAPIDS reports larger speedups on large joins and group-bys"},
	{KindWebService, "web services and APIs", 0, false, 0,
		"Always: request handling uses CPU cores; a GPU offer only adds cost.",
		"Suanli rule of thumb"},
	{KindDatabase, "databases (PostgreSQL, MySQL, Redis)", 0, false, 64,
		"Always: databases need cores, RAM and fast disks, not GPUs.",
		"Suanli rule of thumb"},
	{KindCIBuild, "builds and CI (compilers, tests)", 0, false, 64,
		"Always: compilers and test runners use CPU cores.",
		"Suanli rule of thumb"},
}

// KindProfiles returns the workload kinds and their rules of thumb.
func KindProfiles() []KindProfile { return append([]KindProfile(nil), kindProfiles...) }

// ParseWorkloadKind accepts a kind by name, with spaces or underscores for
// dashes ("feature engineering", "web_service"), and a few synonyms (etl,
// web, db, render, train, serve, transcode, ci).
func ParseWorkloadKind(s string) (KindProfile, error) {
	k := strings.ToLower(strings.NewReplacer(" ", "-", "_", "-").Replace(strings.TrimSpace(s)))
	syn := map[string]WorkloadKind{
		"etl": KindFeatureEngineering, "dataframe": KindFeatureEngineering, "pandas": KindFeatureEngineering,
		"web": KindWebService, "api": KindWebService, "db": KindDatabase, "render": KindRendering,
		"train": KindTraining, "finetune": KindTraining, "serve": KindInference, "infer": KindInference,
		"transcode": KindVideoTranscode, "video": KindVideoTranscode, "ci": KindCIBuild, "build": KindCIBuild,
		"hpc": KindSimulation, "cfd": KindSimulation,
	}
	if w, ok := syn[k]; ok {
		k = string(w)
	}
	var names []string
	for _, p := range kindProfiles {
		if string(p.Kind) == k {
			return p, nil
		}
		names = append(names, string(p.Kind))
	}
	return KindProfile{}, suanli.FieldErrorf("workload", "%q is not a workload kind: use one of %s", s, strings.Join(names, ", "))
}

// OfferCost is one offer priced per unit of work (an hour of
// ReferenceCores busy cores).
type OfferCost struct {
	OfferID     int64        `json:"offer_id"`
	GPUName     string       `json:"gpu_name,omitempty"`
	NumGPUs     int          `json:"num_gpus"`
	CPUCores    int          `json:"cpu_cores"`
	DPH         suanli.Money `json:"dph"`
	UnitsPerH   float64      `json:"units_per_hour"`
	CostPerUnit suanli.Money `json:"cost_per_unit"`
	UsesGPU     bool         `json:"uses_gpu"`
}

// CPUOrGPUAdvice says which kind of offer does a workload kind's work more
// cheaply. Best is "cpu", "gpu", or "" when one side has no offer.
// CPUCostBP is the CPU's cost per unit as a share of the GPU's (4000 = the
// CPU offer costs 40% as much for the same work).
type CPUOrGPUAdvice struct {
	Profile     KindProfile `json:"profile"`
	GPUCode     bool        `json:"gpu_code"`
	BestCPU     *OfferCost  `json:"best_cpu,omitempty"`
	BestGPU     *OfferCost  `json:"best_gpu,omitempty"`
	Best        string      `json:"best"`
	CPUCostBP   int64       `json:"cpu_cost_bp,omitempty"`
	Explanation string      `json:"explanation"`
	Considered  int         `json:"considered"`
}

// AdviseCPUOrGPU prices every offer per unit of the kind's work and
// compares the cheapest CPU-only offer with the cheapest GPU offer. gpuCode
// says the renter's code runs on GPUs even where the kind's usual software
// does not (RAPIDS, a CUDA-ported solver). Offers with no price (or one
// above MaxHourly) are ignored. The numbers are rules of thumb; Explanation
// says which.
func AdviseCPUOrGPU(p KindProfile, offers []*suanli.Offer, gpuCode bool) *CPUOrGPUAdvice {
	a := &CPUOrGPUAdvice{Profile: p, GPUCode: gpuCode || p.GPUByDefault}
	useGPU := a.GPUCode && p.GPUSpeedup > 0
	var cpus, gpus []OfferCost
	for _, o := range offers {
		c, ok := offerCost(o, p, useGPU)
		if !ok {
			continue
		}
		a.Considered++
		if o.NumGPUs > 0 {
			gpus = append(gpus, c)
		} else {
			cpus = append(cpus, c)
		}
	}
	cheapest := func(cs []OfferCost) *OfferCost {
		if len(cs) == 0 {
			return nil
		}
		sort.SliceStable(cs, func(i, j int) bool {
			if cs[i].CostPerUnit != cs[j].CostPerUnit {
				return cs[i].CostPerUnit < cs[j].CostPerUnit
			}
			return cs[i].OfferID < cs[j].OfferID
		})
		c := cs[0]
		return &c
	}
	a.BestCPU, a.BestGPU = cheapest(cpus), cheapest(gpus)
	unit := fmt.Sprintf("a unit is an hour of %d busy cores", ReferenceCores)
	switch {
	case a.BestCPU == nil && a.BestGPU == nil:
		a.Explanation = "no priced offers matched"
	case a.BestCPU == nil:
		a.Best = "gpu"
		a.Explanation = fmt.Sprintf("no CPU-only offer matched; the cheapest GPU offer is #%d at %s per unit (%s)", a.BestGPU.OfferID, a.BestGPU.CostPerUnit, unit)
	case a.BestGPU == nil:
		a.Best = "cpu"
		a.Explanation = fmt.Sprintf("no GPU offer matched; the cheapest CPU offer is #%d at %s per unit (%s)", a.BestCPU.OfferID, a.BestCPU.CostPerUnit, unit)
	default:
		c, g := a.BestCPU, a.BestGPU
		a.CPUCostBP = ratioBP(c.CostPerUnit, max(g.CostPerUnit, 1))
		if c.CostPerUnit <= g.CostPerUnit {
			a.Best = "cpu"
			a.Explanation = fmt.Sprintf("CPU: offer #%d (%d cores, %s/h) does the work for %s per unit, %s of the %s on GPU offer #%d (%d× %s, %s/h); %s",
				c.OfferID, c.CPUCores, c.DPH, c.CostPerUnit, FormatBP(a.CPUCostBP), g.CostPerUnit, g.OfferID, g.NumGPUs, g.GPUName, g.DPH, unit)
		} else {
			a.Best = "gpu"
			a.Explanation = fmt.Sprintf("GPU: offer #%d (%d× %s, %s/h) does the work for %s per unit; the best CPU offer #%d (%d cores, %s/h) costs %s per unit, %s as much; %s",
				g.OfferID, g.NumGPUs, g.GPUName, g.DPH, g.CostPerUnit, c.OfferID, c.CPUCores, c.DPH, c.CostPerUnit, formatTimes(a.CPUCostBP), unit)
		}
	}
	if !useGPU {
		a.Explanation += "; this work does not use the GPU, so a GPU offer counts only its CPU cores"
	}
	return a
}

// offerCost prices one offer per unit of work.
func offerCost(o *suanli.Offer, p KindProfile, useGPU bool) (OfferCost, bool) {
	dph := o.DPHTotal
	if dph <= 0 {
		dph = o.DPHBase
	}
	if dph <= 0 || dph > MaxHourly {
		return OfferCost{}, false
	}
	c := OfferCost{OfferID: o.ID, GPUName: o.GPUName, NumGPUs: o.NumGPUs, CPUCores: o.CPUCores, DPH: dph}
	cores := o.CPUCores
	if p.UsefulCores > 0 {
		cores = min(cores, p.UsefulCores)
	}
	units := float64(cores) / ReferenceCores
	if useGPU && o.NumGPUs > 0 {
		per := 1.0
		if o.TotalFlops > 0 {
			per = math.Min(5, math.Max(0.05, o.TotalFlops/float64(o.NumGPUs)/ReferenceGPUTFLOPS))
		}
		units = float64(o.NumGPUs) * p.GPUSpeedup * per
		c.UsesGPU = true
	}
	milli := int64(math.Round(units * 1000))
	if milli <= 0 {
		return OfferCost{}, false
	}
	c.UnitsPerH = float64(milli) / 1000
	c.CostPerUnit = suanli.MulDiv(dph, 1000, milli)
	return c, true
}

// formatTimes writes a ratio in basis points as a multiple: 24951 → "2.5×".
func formatTimes(bp int64) string { return trimFloat(float64(bp)/10000, 1) + "×" }
