package agent_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
)

func TestParseFakeGPUs(t *testing.T) {
	gpus, err := agent.ParseFakeGPUs("RTX 4090:2, a100:1")
	if err != nil {
		t.Fatal(err)
	}
	want := []suanli.GPU{
		{Index: 0, UUID: "GPU-sim-0-rtx-4090", Name: "RTX 4090", MemoryMB: 24564, DriverVersion: "570.124.06",
			CUDAVersion: "12.8", ComputeCap: "8.9", PowerLimitW: 450, Simulated: true},
		{Index: 1, UUID: "GPU-sim-1-rtx-4090", Name: "RTX 4090", MemoryMB: 24564, DriverVersion: "570.124.06",
			CUDAVersion: "12.8", ComputeCap: "8.9", PowerLimitW: 450, Simulated: true},
		{Index: 2, UUID: "GPU-sim-2-a100", Name: "A100", MemoryMB: 81920, DriverVersion: "570.124.06",
			CUDAVersion: "12.8", ComputeCap: "8.0", PowerLimitW: 400, Simulated: true},
	}
	if diff := cmp.Diff(want, gpus); diff != "" {
		t.Errorf("ParseFakeGPUs mismatch (-want +got):\n%s", diff)
	}
	again, _ := agent.ParseFakeGPUs("RTX 4090:2, a100:1")
	if !cmp.Equal(gpus, again) {
		t.Errorf("ParseFakeGPUs is not deterministic: %v then %v", gpus, again)
	}
}

func TestParseFakeGPUsNames(t *testing.T) {
	tests := []struct {
		in       string
		name     string
		memoryMB int64
	}{
		{"NVIDIA GeForce RTX 4090:1", "RTX 4090", 24564},
		{"A100-SXM4-80GB:1", "A100 SXM4 80GB", 81920},
		{"h100_pcie:1", "H100 PCIe", 81559},
		{"RTX 4090:1:48", "RTX 4090", 48 * 1024},
		{"RTX 2080 Super:1:8", "RTX 2080 Super", 8 * 1024},
	}
	for _, tt := range tests {
		gpus, err := agent.ParseFakeGPUs(tt.in)
		if err != nil {
			t.Errorf("ParseFakeGPUs(%q): %v", tt.in, err)
			continue
		}
		if g := gpus[0]; g.Name != tt.name || g.MemoryMB != tt.memoryMB || !g.Simulated {
			t.Errorf("ParseFakeGPUs(%q) = %q %d MiB simulated=%v, want %q %d MiB simulated", tt.in, g.Name, g.MemoryMB, g.Simulated, tt.name, tt.memoryMB)
		}
	}
}

func TestParseFakeGPUsErrors(t *testing.T) {
	tests := []struct{ in, wantMsg string }{
		{"", "no GPUs given"},
		{"RTX 4090", "MODEL:COUNT"},
		{"RTX 4090:0", "at least 1"},
		{"RTX 4090:two", "at least 1"},
		{"RTX 9999:1", "unknown model"},
		{"RTX 4090:1:-3", "memory"},
		{"RTX 4090:1:NaN", "memory"},
		{"RTX 4090:1:0.0001", "memory"},
		{":2", "empty model"},
		{"RTX 4090:65", "at most 64"},
		{"RTX 4090:1:2:3", "MODEL:COUNT"},
	}
	for _, tt := range tests {
		gpus, err := agent.ParseFakeGPUs(tt.in)
		if err == nil {
			t.Errorf("ParseFakeGPUs(%q) = %v, want an error", tt.in, gpus)
			continue
		}
		if suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("ParseFakeGPUs(%q) error = %v (%s), want invalid mentioning %q", tt.in, err, suanli.ErrorCode(err), tt.wantMsg)
		}
	}
	_, err := agent.ParseFakeGPUs("RTX 9999:1")
	if !strings.Contains(err.Error(), "RTX 4090") {
		t.Errorf("unknown model error %q does not list the known models", err)
	}
}

func FuzzParseFakeGPUs(f *testing.F) {
	for _, s := range []string{"RTX 4090:2", "RTX 4090:2,A100:1", "RTX 2080 Super:1:8", "H100:64", ":", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		gpus, err := agent.ParseFakeGPUs(spec)
		if err != nil {
			if suanli.ErrorCode(err) != suanli.EINVALID {
				t.Errorf("ParseFakeGPUs(%q) error %v is not invalid", spec, err)
			}
			return
		}
		if len(gpus) == 0 || len(gpus) > 64 {
			t.Errorf("ParseFakeGPUs(%q) = %d GPUs", spec, len(gpus))
		}
		for i, g := range gpus {
			if g.Index != i || !g.Simulated || g.MemoryMB <= 0 || g.Name == "" || !strings.HasPrefix(g.UUID, "GPU-sim-") {
				t.Errorf("ParseFakeGPUs(%q)[%d] = %+v", spec, i, g)
			}
		}
	})
}
