package agent

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

// Simulated GPUs claim this driver and CUDA version, recent enough for every
// model in knownGPUs, so that filters such as cuda_vers>=12 behave as on a
// real machine.
const (
	simDriverVersion = "570.124.06"
	simCUDAVersion   = "12.8"
)

// maxFakeGPUs bounds a --fake-gpus list; more is almost surely a typo.
const maxFakeGPUs = 64

// knownGPU is what nvidia-smi reports for a model: memory.total in MiB,
// compute capability, default power limit in watts.
type knownGPU struct {
	memoryMB   int64
	computeCap string
	powerW     int
}

// knownGPUs are the models ParseFakeGPUs knows, by normalised name. Bare
// family names ("A100", "H100") stand for the common SXM 80 GB board.
var knownGPUs = map[string]knownGPU{
	"GTX 1080 Ti":    {11264, "6.1", 250},
	"RTX 2080 Ti":    {11264, "7.5", 250},
	"RTX 3060":       {12288, "8.6", 170},
	"RTX 3080":       {10240, "8.6", 320},
	"RTX 3090":       {24576, "8.6", 350},
	"RTX 3090 Ti":    {24564, "8.6", 450},
	"RTX 4070":       {12282, "8.9", 200},
	"RTX 4080":       {16376, "8.9", 320},
	"RTX 4090":       {24564, "8.9", 450},
	"RTX 5090":       {32607, "12.0", 575},
	"RTX A4000":      {16376, "8.6", 140},
	"RTX A5000":      {24564, "8.6", 230},
	"RTX A6000":      {49140, "8.6", 300},
	"RTX 6000 Ada":   {49140, "8.9", 300},
	"T4":             {15360, "7.5", 70},
	"V100":           {16384, "7.0", 300},
	"V100 SXM2 32GB": {32768, "7.0", 300},
	"A10":            {23028, "8.6", 150},
	"A40":            {46068, "8.6", 300},
	"L4":             {23034, "8.9", 72},
	"L40":            {46068, "8.9", 300},
	"L40S":           {46068, "8.9", 350},
	"A100":           {81920, "8.0", 400},
	"A100 SXM4 40GB": {40960, "8.0", 400},
	"A100 SXM4 80GB": {81920, "8.0", 400},
	"A100 80GB PCIe": {81920, "8.0", 300},
	"H100":           {81559, "9.0", 700},
	"H100 80GB HBM3": {81559, "9.0", 700},
	"H100 PCIe":      {81559, "9.0", 350},
	"H100 NVL":       {95830, "9.0", 400},
	"H200":           {143771, "9.0", 700},
	"B200":           {183359, "10.0", 1000},
}

// KnownGPUModels returns the model names ParseFakeGPUs knows, sorted.
func KnownGPUModels() []string {
	names := make([]string, 0, len(knownGPUs))
	for n := range knownGPUs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseFakeGPUs turns a --fake-gpus value into simulated GPUs, for
// development and tests on machines without them. The value is a
// comma-separated list of MODEL:COUNT or MODEL:COUNT:MEMORY_GB entries:
//
//	RTX 4090:2
//	RTX 4090:2,A100:1
//	RTX 2080 Super:1:8
//
// MODEL is normalised like nvidia-smi names (NormalizeGPUName) and matched
// case-insensitively against KnownGPUModels, whose memory, compute
// capability and power limit the GPUs get; MEMORY_GB overrides the memory
// and is required for a model that is not known. Indexes run from 0 in list
// order. Every GPU has Simulated set, the driver and CUDA version of a recent
// driver, and a UUID "GPU-sim-<index>-<model>", the same on every run and
// unique within the machine (not across machines).
func ParseFakeGPUs(spec string) ([]suanli.GPU, error) {
	var gpus []suanli.GPU
	for _, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		parts := strings.Split(entry, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, suanli.Errorf(suanli.EINVALID, "fake GPUs %q: want MODEL:COUNT or MODEL:COUNT:MEMORY_GB, e.g. \"RTX 4090:2\"", entry)
		}
		name := NormalizeGPUName(parts[0])
		if name == "" {
			return nil, suanli.Errorf(suanli.EINVALID, "fake GPUs %q: empty model name", entry)
		}
		count, err := strconv.Atoi(strings.TrimSpace(parts[1]))
		if err != nil || count < 1 {
			return nil, suanli.Errorf(suanli.EINVALID, "fake GPUs %q: count %q must be a whole number of at least 1", entry, parts[1])
		}
		if len(gpus)+count > maxFakeGPUs {
			return nil, suanli.Errorf(suanli.EINVALID, "fake GPUs %q: at most %d GPUs in all", spec, maxFakeGPUs)
		}
		model, known := lookupGPU(name)
		if known {
			name = model.name
		}
		if len(parts) == 3 {
			gb, err := strconv.ParseFloat(strings.TrimSpace(parts[2]), 64)
			if err != nil || !(gb*1024 >= 1 && gb <= 4096) { // also refuses NaN
				return nil, suanli.Errorf(suanli.EINVALID, "fake GPUs %q: memory %q must be a number of GB from 0.001 to 4096", entry, parts[2])
			}
			model.memoryMB = int64(gb * 1024)
		} else if !known {
			return nil, suanli.Errorf(suanli.EINVALID,
				"fake GPUs %q: unknown model %q; give its memory as MODEL:COUNT:MEMORY_GB, or use one of: %s",
				entry, name, strings.Join(KnownGPUModels(), ", "))
		}
		for range count {
			i := len(gpus)
			gpus = append(gpus, suanli.GPU{
				Index:         i,
				UUID:          fmt.Sprintf("GPU-sim-%d-%s", i, strings.ToLower(strings.ReplaceAll(name, " ", "-"))),
				Name:          name,
				MemoryMB:      model.memoryMB,
				DriverVersion: simDriverVersion,
				CUDAVersion:   simCUDAVersion,
				ComputeCap:    model.computeCap,
				PowerLimitW:   model.powerW,
				Simulated:     true,
			})
		}
	}
	if len(gpus) == 0 {
		return nil, suanli.Errorf(suanli.EINVALID, "fake GPUs %q: no GPUs given; want e.g. \"RTX 4090:2\"", spec)
	}
	return gpus, nil
}

// namedGPU is a knownGPU with its canonical name.
type namedGPU struct {
	knownGPU
	name string
}

// lookupGPU finds a known model by normalised name, ignoring case.
func lookupGPU(name string) (namedGPU, bool) {
	for n, g := range knownGPUs {
		if strings.EqualFold(n, name) {
			return namedGPU{g, n}, true
		}
	}
	return namedGPU{}, false
}
