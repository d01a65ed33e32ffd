package advisor

import (
	"math"
	"math/big"
	"sort"
	"strings"

	"github.com/suanli/suanli"
)

// CatalogRow is one public-cloud GPU instance price: who sells it, what is
// in it, where, and what it costs on demand per hour for the whole
// instance. GPU is the normalised model name (GPUKey.String()); Accelerator
// is the name as the source spells it. GPUCount may be fractional (clouds
// sell slices of a GPU). SpotPrice 0 means the source lists none. AsOf is
// the date (YYYY-MM-DD) the price was read; Source where.
type CatalogRow struct {
	Provider     string       `json:"provider"`
	InstanceType string       `json:"instance_type"`
	GPU          string       `json:"gpu"`
	Accelerator  string       `json:"accelerator"`
	GPUCount     float64      `json:"gpu_count"`
	GPUMemGiB    float64      `json:"gpu_mem_gib"` // per GPU, 0 when unknown
	VCPUs        float64      `json:"vcpus"`
	MemoryGiB    float64      `json:"memory_gib"`
	Region       string       `json:"region"`
	Country      string       `json:"country,omitempty"`
	Price        suanli.Money `json:"price"`
	SpotPrice    suanli.Money `json:"spot_price,omitempty"`
	Source       string       `json:"source"`
	AsOf         string       `json:"as_of"`
	Note         string       `json:"note,omitempty"`
}

// Key returns the row's GPU as a GPUKey.
func (r CatalogRow) Key() GPUKey { return NormalizeGPU(r.GPU, r.GPUMemGiB) }

// PerGPUHour is the on-demand price per GPU-hour: Price / GPUCount, with
// the count taken to a millionth of a GPU, rounded down to the micro-unit.
// 0 when the row has no GPUs or no plausible price (above MaxHourly).
func (r CatalogRow) PerGPUHour() suanli.Money {
	micro := int64(math.Round(r.GPUCount * 1e6))
	if micro <= 0 || r.Price <= 0 || r.Price > MaxHourly {
		return 0
	}
	return suanli.MulDiv(r.Price, 1_000_000, micro)
}

// MaxHourly is the largest hourly price the advisor takes for real
// ($1,000,000 an hour); anything above is a typo or a corrupted file, and
// capping it keeps the integer arithmetic far from overflow.
const MaxHourly = suanli.Money(1_000_000) * suanli.Micro

// ratioBP returns num / den in basis points, rounded toward zero, computed
// exactly and clamped to ±10^12 bp; 0 when den is not positive.
func ratioBP(num, den suanli.Money) int64 {
	if den <= 0 {
		return 0
	}
	q := new(big.Int).Mul(big.NewInt(int64(num)), big.NewInt(10000))
	q.Quo(q, big.NewInt(int64(den)))
	const limit = 1_000_000_000_000
	switch {
	case q.Cmp(big.NewInt(limit)) > 0:
		return limit
	case q.Cmp(big.NewInt(-limit)) < 0:
		return -limit
	}
	return q.Int64()
}

// MergeCatalog returns base with extra added; a row of extra replaces a row
// of base with the same provider, instance type and region (an import
// refreshes the built-in prices). Neither input is changed.
func MergeCatalog(base, extra []CatalogRow) []CatalogRow {
	type k struct{ p, i, r string }
	seen := make(map[k]bool, len(extra))
	for _, r := range extra {
		seen[k{strings.ToLower(r.Provider), r.InstanceType, r.Region}] = true
	}
	out := make([]CatalogRow, 0, len(base)+len(extra))
	for _, r := range base {
		if !seen[k{strings.ToLower(r.Provider), r.InstanceType, r.Region}] {
			out = append(out, r)
		}
	}
	return append(out, extra...)
}

// SortCatalog orders rows by provider, GPU, per-GPU price, instance type
// and region, in place.
func SortCatalog(rows []CatalogRow) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Provider != b.Provider {
			return a.Provider < b.Provider
		}
		if a.GPU != b.GPU {
			return a.GPU < b.GPU
		}
		if pa, pb := a.PerGPUHour(), b.PerGPUHour(); pa != pb {
			return pa < pb
		}
		if a.InstanceType != b.InstanceType {
			return a.InstanceType < b.InstanceType
		}
		return a.Region < b.Region
	})
}

// BuiltinCatalog returns a copy of the built-in public-cloud price table.
func BuiltinCatalog() []CatalogRow { return append([]CatalogRow(nil), builtinCatalog...) }
