package market

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// kind is how a field's values parse, compare and print.
type kind uint8

const (
	kindInt    kind = iota // int64; compute_cap accepts "8.9" for 890
	kindFloat              // float64
	kindMoney              // suanli.Money, typed in dollars
	kindBool               // true/false
	kindString             // equality ignores case; order is natural ("535.9" < "535.10")
	kindTime               // unix seconds; a nil time is +infinity (open-ended)
)

func (k kind) String() string {
	switch k {
	case kindInt:
		return "a whole number"
	case kindFloat:
		return "a number"
	case kindMoney:
		return "an amount like 0.30 or $0.30"
	case kindBool:
		return "true or false"
	case kindString:
		return "text (write _ for a space)"
	case kindTime:
		return "a date like 2026-05-01 or 2026-05-01T12:00:00Z"
	}
	return "a value"
}

// val is one field value of one offer. Int, money, bool (0/1) and time use
// i; float uses f; string uses s.
type val struct {
	i int64
	f float64
	s string
}

// fieldID numbers the fields in Offer order; it indexes fields.
type fieldID uint8

// field describes one query field: its name, kind, unit for messages, and
// where it lives in an Offer (ptr returns a pointer to the struct field).
type field struct {
	name string
	kind kind
	unit string // "GB", "Mb/s", "/h", "/GB", "/GB-month", "" …
	ptr  func(o *suanli.Offer) any
}

// get reads the field from o as stored (derived fields are not recomputed).
func (f *field) get(o *suanli.Offer) val {
	switch p := f.ptr(o).(type) {
	case *int64:
		return iv(*p)
	case *int:
		return iv(int64(*p))
	case *float64:
		return fv(*p)
	case *suanli.Money:
		return iv(int64(*p))
	case *bool:
		return bv(*p)
	case *string:
		return sv(*p)
	case **time.Time:
		return tv(*p)
	}
	panic("market: field " + f.name + " has an unknown type")
}

// set writes v into the field of o.
func (f *field) set(o *suanli.Offer, v val) {
	switch p := f.ptr(o).(type) {
	case *int64:
		*p = v.i
	case *int:
		*p = int(v.i)
	case *float64:
		*p = v.f
	case *suanli.Money:
		*p = suanli.Money(v.i)
	case *bool:
		*p = v.i != 0
	case *string:
		*p = v.s
	case **time.Time:
		if v.i == math.MaxInt64 {
			*p = nil
		} else {
			t := time.Unix(v.i, 0).UTC()
			*p = &t
		}
	}
}

func iv(i int64) val { return val{i: i} }
func fv(f float64) val {
	if f == 0 || f != f { // -0 and +0 are one value; NaN counts as 0
		f = 0
	}
	return val{f: f}
}
func bv(b bool) val {
	if b {
		return val{i: 1}
	}
	return val{}
}
func sv(s string) val { return val{s: s} }
func tv(t *time.Time) val {
	if t == nil {
		return val{i: math.MaxInt64}
	}
	return val{i: t.Unix()}
}

// fields lists every query field, in suanli.Offer order.
var fields = []field{
	{"id", kindInt, "", func(o *suanli.Offer) any { return &o.ID }},
	{"machine_id", kindInt, "", func(o *suanli.Offer) any { return &o.MachineID }},
	{"host_id", kindInt, "", func(o *suanli.Offer) any { return &o.HostID }},
	{"hostname", kindString, "", func(o *suanli.Offer) any { return &o.Hostname }},
	{"gpu_name", kindString, "", func(o *suanli.Offer) any { return &o.GPUName }},
	{"num_gpus", kindInt, "", func(o *suanli.Offer) any { return &o.NumGPUs }},
	{"total_gpus", kindInt, "", func(o *suanli.Offer) any { return &o.TotalGPUs }},
	{"gpu_ram", kindFloat, "GB", func(o *suanli.Offer) any { return &o.GPURAM }},
	{"gpu_total_ram", kindFloat, "GB", func(o *suanli.Offer) any { return &o.GPUTotalRAM }},
	{"compute_cap", kindInt, "", func(o *suanli.Offer) any { return &o.ComputeCap }},
	{"cuda_vers", kindFloat, "", func(o *suanli.Offer) any { return &o.CUDAVersion }},
	{"driver_version", kindString, "", func(o *suanli.Offer) any { return &o.DriverVersion }},
	{"gpu_arch", kindString, "", func(o *suanli.Offer) any { return &o.GPUArch }},
	{"cpu_arch", kindString, "", func(o *suanli.Offer) any { return &o.CPUArch }},
	{"cpu_name", kindString, "", func(o *suanli.Offer) any { return &o.CPUName }},
	{"cpu_cores", kindInt, "", func(o *suanli.Offer) any { return &o.CPUCores }},
	{"cpu_ram", kindFloat, "GB", func(o *suanli.Offer) any { return &o.CPURAM }},
	{"disk_space", kindFloat, "GB", func(o *suanli.Offer) any { return &o.DiskSpace }},
	{"disk_bw", kindFloat, "MB/s", func(o *suanli.Offer) any { return &o.DiskBW }},
	{"inet_up", kindFloat, "Mb/s", func(o *suanli.Offer) any { return &o.InetUp }},
	{"inet_down", kindFloat, "Mb/s", func(o *suanli.Offer) any { return &o.InetDown }},
	{"inet_up_cost", kindMoney, "/GB", func(o *suanli.Offer) any { return &o.InetUpCost }},
	{"inet_down_cost", kindMoney, "/GB", func(o *suanli.Offer) any { return &o.InetDownCost }},
	{"gpu_price", kindMoney, "/h", func(o *suanli.Offer) any { return &o.GPUPrice }},
	{"cpu_price", kindMoney, "/h", func(o *suanli.Offer) any { return &o.CPUPrice }},
	{"ram_price", kindMoney, "/h", func(o *suanli.Offer) any { return &o.RAMPrice }},
	{"dph_base", kindMoney, "/h", func(o *suanli.Offer) any { return &o.DPHBase }},
	{"dph_total", kindMoney, "/h", func(o *suanli.Offer) any { return &o.DPHTotal }},
	{"storage_cost", kindMoney, "/GB-month", func(o *suanli.Offer) any { return &o.StorageCost }},
	{"min_bid", kindMoney, "/h", func(o *suanli.Offer) any { return &o.MinBid }},
	{"reliability", kindFloat, "", func(o *suanli.Offer) any { return &o.Reliability }},
	{"verified", kindBool, "", func(o *suanli.Offer) any { return &o.Verified }},
	{"rentable", kindBool, "", func(o *suanli.Offer) any { return &o.Rentable }},
	{"simulated", kindBool, "", func(o *suanli.Offer) any { return &o.Simulated }},
	{"datacenter", kindBool, "", func(o *suanli.Offer) any { return &o.Datacenter }},
	{"tier", kindString, "", func(o *suanli.Offer) any { return &o.Tier }},
	{"geolocation", kindString, "", func(o *suanli.Offer) any { return &o.Geolocation }},
	{"country", kindString, "", func(o *suanli.Offer) any { return &o.Country }},
	{"region", kindString, "", func(o *suanli.Offer) any { return &o.Region }},
	{"dlperf", kindFloat, "", func(o *suanli.Offer) any { return &o.DLPerf }},
	{"dlperf_per_dphtotal", kindFloat, "", func(o *suanli.Offer) any { return &o.DLPerfPerDPH }},
	{"score", kindFloat, "", func(o *suanli.Offer) any { return &o.Score }},
	{"total_flops", kindFloat, "TFLOPS", func(o *suanli.Offer) any { return &o.TotalFlops }},
	{"flops_per_dphtotal", kindFloat, "", func(o *suanli.Offer) any { return &o.FlopsPerDPH }},
	{"duration", kindFloat, "days", func(o *suanli.Offer) any { return &o.Duration }},
	{"end_date", kindTime, "", func(o *suanli.Offer) any { return &o.EndDate }},
	{"static_ip", kindBool, "", func(o *suanli.Offer) any { return &o.StaticIP }},
	{"encrypted_disk", kindBool, "", func(o *suanli.Offer) any { return &o.EncryptedDisk }},
	{"direct_port_count", kindInt, "", func(o *suanli.Offer) any { return &o.DirectPortCount }},
	{"carbon_intensity", kindFloat, "gCO2/kWh", func(o *suanli.Offer) any { return &o.CarbonIntensity }},
	{"co2_g_per_hour", kindFloat, "g/h", func(o *suanli.Offer) any { return &o.CO2PerHour }},
	{"green", kindBool, "", func(o *suanli.Offer) any { return &o.Green }},
	{"green_discount", kindFloat, "%", func(o *suanli.Offer) any { return &o.GreenDiscount }},
	{"latency_ms", kindFloat, "ms", func(o *suanli.Offer) any { return &o.LatencyMS }},
	{"preempt_grace_s", kindInt, "s", func(o *suanli.Offer) any { return &o.PreemptGraceS }},
	{"interruption_rate", kindFloat, "", func(o *suanli.Offer) any { return &o.InterruptionRate }},
	{"host_status", kindString, "", func(o *suanli.Offer) any { return &o.HostStatus }},
}

// aliases maps other names, mostly Vast's, to the canonical field.
var aliases = map[string]string{
	"dph":                 "dph_total",
	"cuda_max_good":       "cuda_vers",
	"reliability2":        "reliability",
	"cpu_cores_effective": "cpu_cores",
	"dlperf_usd":          "dlperf_per_dphtotal",
	"flops_usd":           "flops_per_dphtotal",
	"gpu_totalram":        "gpu_total_ram",
}

// Aliases returns the alternative field names the query language accepts and
// the field each stands for (dph → dph_total, and Vast's names such as
// cuda_max_good, reliability2, dlperf_usd). The map is a fresh copy.
func Aliases() map[string]string {
	m := make(map[string]string, len(aliases))
	for k, v := range aliases {
		m[k] = v
	}
	return m
}

var fieldByName = func() map[string]fieldID {
	m := make(map[string]fieldID, len(fields)+len(aliases))
	for i, f := range fields {
		m[f.name] = fieldID(i)
	}
	for a, c := range aliases {
		m[a] = m[c]
	}
	return m
}()

// Field IDs the index and the derivations refer to by name.
var (
	fRentable  = mustField("rentable")
	fDPHTotal  = mustField("dph_total")
	fDLPerfPD  = mustField("dlperf_per_dphtotal")
	fFlopsPD   = mustField("flops_per_dphtotal")
	fScore     = mustField("score")
	fID        = mustField("id")
	fComputeCp = mustField("compute_cap")
)

func mustField(name string) fieldID {
	id, ok := fieldByName[name]
	if !ok {
		panic("market: no field " + name)
	}
	return id
}

// lookupField resolves a name or alias, ignoring case.
func lookupField(name string) (fieldID, bool) {
	id, ok := fieldByName[strings.ToLower(name)]
	return id, ok
}

// Fields returns the canonical query field names, in suanli.Offer order. Every
// JSON name of suanli.Offer is one (end_date compares dates; an open-ended
// listing is later than any date). The slice is a fresh copy.
func Fields() []string {
	s := make([]string, len(fields))
	for i, f := range fields {
		s[i] = f.name
	}
	return s
}

var validFieldList = strings.Join(Fields(), " ")

// suggest returns the known name closest to name, or "" when none is close.
func suggest(name string) string {
	name = strings.ToLower(name)
	names := make([]string, 0, len(fieldByName))
	for n := range fieldByName {
		names = append(names, n)
	}
	sort.Strings(names)
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(name, n); d < bestD || (d == bestD && best == "" && d <= 2) {
			best, bestD = n, d
		}
	}
	if best != "" && bestD <= 2 {
		return best
	}
	for _, f := range fields { // a prefix such as "cuda" or "inet"
		if n := f.name; len(name) >= 3 && strings.HasPrefix(n, name) {
			return n
		}
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			c = min(c, prev[j]+1, cur[j-1]+1)
			cur[j] = c
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
