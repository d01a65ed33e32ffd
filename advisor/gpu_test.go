package advisor_test

import (
	"testing"

	"github.com/suanli/suanli/advisor"
)

func TestNormalizeGPU(t *testing.T) {
	for _, tc := range []struct {
		name string
		mem  float64
		want string
	}{
		// nvidia-smi names
		{"NVIDIA H100 80GB HBM3", 0, "H100 SXM"},
		{"NVIDIA H100 PCIe", 0, "H100 PCIe"},
		{"NVIDIA H100 NVL", 0, "H100 NVL"},
		{"NVIDIA A100-SXM4-80GB", 0, "A100-80GB"},
		{"NVIDIA A100-PCIE-40GB", 0, "A100-40GB"},
		{"NVIDIA A100 80GB PCIe", 0, "A100-80GB"},
		{"NVIDIA GeForce RTX 4090", 0, "RTX 4090"},
		{"NVIDIA GeForce RTX 4070 Ti SUPER", 0, "RTX 4070 Ti Super"},
		{"Tesla T4", 0, "T4"},
		{"Tesla V100-SXM2-16GB", 0, "V100-16GB"},
		{"Tesla V100-SXM2-32GB", 0, "V100-32GB"},
		{"NVIDIA A10G", 0, "A10G"},
		{"NVIDIA A10", 0, "A10"},
		{"NVIDIA L40S", 0, "L40S"},
		{"NVIDIA L4", 0, "L4"},
		{"NVIDIA RTX A6000", 0, "RTX A6000"},
		{"NVIDIA RTX 6000 Ada Generation", 0, "RTX 6000 Ada"},
		{"Quadro RTX 6000", 0, "RTX 6000"},
		{"NVIDIA RTX PRO 6000 Blackwell Server Edition", 0, "RTX PRO 6000"},
		{"NVIDIA H200", 0, "H200"},
		{"NVIDIA GH200 480GB", 0, "GH200"},
		{"NVIDIA B200", 0, "B200"},
		{"AMD Instinct MI300X", 0, "MI300X"},
		// marketplace and query spellings
		{"RTX_4090", 0, "RTX 4090"},
		{"H100 SXM", 0, "H100 SXM"},
		{"A100 SXM4", 80, "A100-80GB"},
		{"A100 SXM4", 40, "A100-40GB"},
		{"A100", 0, "A100"},
		{"H100", 94, "H100 NVL"},
		{"H100", 80, "H100"},
		// SkyPilot accelerator names
		{"A100-80GB", 0, "A100-80GB"},
		{"A100-80GB-SXM", 0, "A100-80GB"},
		{"H100-SXM", 0, "H100 SXM"},
		{"H100-MEGA", 0, "H100 SXM"},
		{"H100-NVL", 0, "H100 NVL"},
		{"RTX4090", 0, "RTX 4090"},
		{"RTX6000-Ada", 0, "RTX 6000 Ada"},
		{"RTX6000Ada", 0, "RTX 6000 Ada"},
		{"RTXA6000", 0, "RTX A6000"},
		{"RTXPRO6000S", 0, "RTX PRO 6000"},
		{"RTXPRO6000WS", 0, "RTX PRO 6000"},
		{"GTX1660S", 0, "GTX 1660 Super"},
		{"tpu-v4", 0, "TPU v4"},
		{"V100-32GB", 0, "V100-32GB"},
		// unknown names still compare equal to themselves
		{"Gaudi HL-205", 0, "GAUDI HL 205"},
		{"", 0, ""},
	} {
		if got := advisor.NormalizeGPU(tc.name, tc.mem).String(); got != tc.want {
			t.Errorf("NormalizeGPU(%q, %v) = %q, want %q", tc.name, tc.mem, got, tc.want)
		}
	}
}

func TestGPUKeyMatch(t *testing.T) {
	for _, tc := range []struct {
		a, b      string
		ok, exact bool
	}{
		{"H100 SXM", "NVIDIA H100 80GB HBM3", true, true},
		{"H100", "H100 SXM", true, false},
		{"H100 PCIe", "H100 SXM", false, false},
		{"A100-80GB", "A100-40GB", false, false},
		{"RTX 4090", "RTX 4080", false, false},
		{"A10", "A10G", false, false},
		{"", "", false, false},
	} {
		ok, exact := advisor.NormalizeGPU(tc.a, 0).Match(advisor.NormalizeGPU(tc.b, 0))
		if ok != tc.ok || exact != tc.exact {
			t.Errorf("%q.Match(%q) = %v, %v; want %v, %v", tc.a, tc.b, ok, exact, tc.ok, tc.exact)
		}
	}
}

func TestLookupGPU(t *testing.T) {
	for _, s := range advisor.GPUSpecs() {
		if s.MemGiB <= 0 || s.Watts <= 0 || s.Source == "" {
			t.Errorf("%v: incomplete spec %+v", s.Key, s)
		}
		// Every table key must be what NormalizeGPU makes of its own name.
		if got := advisor.NormalizeGPU(s.Key.String(), 0); got != s.Key {
			t.Errorf("NormalizeGPU(%q) = %v, want %v", s.Key.String(), got, s.Key)
		}
	}
	s, ok := advisor.LookupGPU(advisor.NormalizeGPU("NVIDIA H100 80GB HBM3", 0))
	if !ok || s.Watts != 700 {
		t.Errorf("LookupGPU(H100 SXM) = %+v, %v; want 700 W", s, ok)
	}
	if s, ok := advisor.LookupGPU(advisor.NormalizeGPU("RTX 4070 Super", 0)); !ok || s.Key.Family != "RTX 4070" {
		t.Errorf("LookupGPU(RTX 4070 Super) = %+v, %v; want the RTX 4070 family", s, ok)
	}
	if _, ok := advisor.LookupGPU(advisor.NormalizeGPU("Voodoo 2", 0)); ok {
		t.Errorf("LookupGPU(Voodoo 2): want not found")
	}
}
