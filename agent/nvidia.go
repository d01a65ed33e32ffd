package agent

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

// The nvidia-smi queries the agent runs, with --format=csv,noheader,nounits.
// ParseNvidiaSMI and ParseGPUSamples read their output; the column order is
// fixed here.
const (
	nvidiaGPUQuery    = "index,uuid,name,memory.total,driver_version,compute_cap,power.limit"
	nvidiaGPUQueryOld = "index,uuid,name,memory.total,driver_version"
	nvidiaSampleQuery = "index,utilization.gpu,memory.used,temperature.gpu,power.draw"
)

// ParseNvidiaSMI parses the output of
//
//	nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version,compute_cap[,power.limit] --format=csv,noheader,nounits
//
// one GPU per line. The compute_cap and power.limit columns are optional
// (drivers before 510 lack compute_cap); "[N/A]" in an optional column
// leaves the field empty. Names are normalised with NormalizeGPUName, and
// CUDAVersion is left empty: it comes from ParseCUDAVersion.
func ParseNvidiaSMI(csv []byte) ([]suanli.GPU, error) {
	var gpus []suanli.GPU
	err := eachCSVLine(csv, 5, 7, func(n int, f []string) error {
		var g suanli.GPU
		var err error
		if g.Index, err = strconv.Atoi(f[0]); err != nil {
			return fmt.Errorf("line %d: index %q is not a number", n, f[0])
		}
		g.UUID = f[1]
		g.Name = NormalizeGPUName(f[2])
		if g.MemoryMB, err = strconv.ParseInt(f[3], 10, 64); err != nil {
			return fmt.Errorf("line %d: memory.total %q is not a number of MiB (run with nounits)", n, f[3])
		}
		g.DriverVersion = f[4]
		if len(f) > 5 && !notAvailable(f[5]) {
			g.ComputeCap = f[5]
		}
		if len(f) > 6 && !notAvailable(f[6]) {
			w, err := strconv.ParseFloat(f[6], 64)
			if err != nil {
				return fmt.Errorf("line %d: power.limit %q is not a number of watts", n, f[6])
			}
			g.PowerLimitW = int(math.Round(w))
		}
		if g.UUID == "" || g.Name == "" {
			return fmt.Errorf("line %d: empty uuid or name", n)
		}
		gpus = append(gpus, g)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("parse nvidia-smi gpu list: %w", err)
	}
	return gpus, nil
}

// cudaVersionRE finds the CUDA version in nvidia-smi's banner
// ("CUDA Version: 12.4") and in nvidia-smi -q ("CUDA Version : 12.4").
var cudaVersionRE = regexp.MustCompile(`CUDA Version\s*:\s*([0-9]+(?:\.[0-9]+)*)`)

// ParseCUDAVersion returns the highest CUDA version the driver supports, as
// printed in the banner of plain nvidia-smi or in nvidia-smi -q, or "" when
// out names none.
func ParseCUDAVersion(out []byte) string {
	m := cudaVersionRE.FindSubmatch(out)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// gpuNamePrefixes are the vendor and brand words nvidia-smi puts before the
// model. "Quadro" stays: "Quadro RTX 6000" and "RTX 6000" are different cards.
var gpuNamePrefixes = []string{"NVIDIA ", "GeForce ", "Tesla "}

// NormalizeGPUName turns an nvidia-smi product name into the name Suanli
// shows and searches on: vendor and brand prefixes ("NVIDIA", "GeForce",
// "Tesla") are dropped, hyphens and underscores become spaces, and runs of
// spaces collapse. Everything else, memory size and form factor included, is
// kept, so that different boards keep different names:
//
//	NVIDIA GeForce RTX 4090 → RTX 4090
//	NVIDIA A100-SXM4-80GB   → A100 SXM4 80GB
//	NVIDIA A100 80GB PCIe   → A100 80GB PCIe
//	NVIDIA H100 80GB HBM3   → H100 80GB HBM3
//	Tesla V100-SXM2-16GB    → V100 SXM2 16GB
func NormalizeGPUName(name string) string {
	name = strings.NewReplacer("-", " ", "_", " ").Replace(name)
	name = strings.Join(strings.Fields(name), " ")
	for again := true; again; {
		again = false
		for _, p := range gpuNamePrefixes {
			if len(name) > len(p) && strings.EqualFold(name[:len(p)], p) {
				name = name[len(p):]
				again = true
			}
		}
	}
	return name
}

// GPUSample is one reading of one GPU's load, from nvidia-smi. A value the
// driver reports as "[N/A]" or "[Not Supported]" (power draw on many
// consumer boards) is zero.
type GPUSample struct {
	Index        int     `json:"index"`
	UtilPercent  float64 `json:"util_percent"`   // 0..100 over the driver's last sample period
	MemoryUsedMB int64   `json:"memory_used_mb"` // MiB
	TemperatureC int     `json:"temperature_c"`
	PowerW       float64 `json:"power_w"`
}

// ParseGPUSamples parses the output of
//
//	nvidia-smi --query-gpu=index,utilization.gpu,memory.used,temperature.gpu,power.draw --format=csv,noheader,nounits
//
// one GPU per line.
func ParseGPUSamples(csv []byte) ([]GPUSample, error) {
	var out []GPUSample
	err := eachCSVLine(csv, 5, 5, func(n int, f []string) error {
		var s GPUSample
		var err error
		if s.Index, err = strconv.Atoi(f[0]); err != nil {
			return fmt.Errorf("line %d: index %q is not a number", n, f[0])
		}
		num := func(col string, v string) (float64, error) {
			if notAvailable(v) {
				return 0, nil
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("line %d: %s %q is not a number (run with nounits)", n, col, v)
			}
			return x, nil
		}
		if s.UtilPercent, err = num("utilization.gpu", f[1]); err != nil {
			return err
		}
		mem, err := num("memory.used", f[2])
		if err != nil {
			return err
		}
		s.MemoryUsedMB = int64(mem)
		temp, err := num("temperature.gpu", f[3])
		if err != nil {
			return err
		}
		s.TemperatureC = int(temp)
		if s.PowerW, err = num("power.draw", f[4]); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("parse nvidia-smi gpu samples: %w", err)
	}
	return out, nil
}

// SampleGPUs reads the load of every NVIDIA GPU through nvidia-smi. It
// suits Config.GPUSampler on machines with real GPUs.
func SampleGPUs(ctx context.Context) ([]GPUSample, error) {
	out, err := runNvidiaSMI(ctx, "--query-gpu="+nvidiaSampleQuery, "--format=csv,noheader,nounits")
	if err != nil {
		return nil, err
	}
	return ParseGPUSamples(out)
}

// eachCSVLine calls fn with the trimmed, comma-separated fields of every
// non-blank line of nvidia-smi CSV output (which never quotes) and its
// 1-based line number, after checking the field count.
func eachCSVLine(csv []byte, minFields, maxFields int, fn func(n int, f []string) error) error {
	sc := bufio.NewScanner(bytes.NewReader(csv))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < minFields || len(f) > maxFields {
			want := strconv.Itoa(minFields)
			if maxFields != minFields {
				want += " to " + strconv.Itoa(maxFields)
			}
			return fmt.Errorf("line %d: %d fields, want %s: %q", n, len(f), want, line)
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if err := fn(n, f); err != nil {
			return err
		}
	}
	return sc.Err()
}

// notAvailable reports whether v is nvidia-smi's way of saying there is no
// value: "[N/A]", "[Not Supported]", "N/A".
func notAvailable(v string) bool {
	return v == "" || v == "N/A" || strings.HasPrefix(v, "[")
}
