package agent_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
)

func readTestdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "nvidia-smi", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestParseNvidiaSMI(t *testing.T) {
	tests := []struct {
		file  string
		count int
		first suanli.GPU
	}{
		{"gpus-rtx4090-1.csv", 1, suanli.GPU{
			Index: 0, UUID: "GPU-3a5f1c8e-9b2d-7e4a-6c0f-1d8b2e9a4c57", Name: "RTX 4090",
			MemoryMB: 24564, DriverVersion: "550.54.15", ComputeCap: "8.9",
		}},
		{"gpus-a100-sxm4-80gb-8.csv", 8, suanli.GPU{
			Index: 0, UUID: "GPU-8c2e6f41-5a3b-9d7c-2e1f-0b4a6c8d3e92", Name: "A100 SXM4 80GB",
			MemoryMB: 81920, DriverVersion: "535.161.08", ComputeCap: "8.0", PowerLimitW: 400,
		}},
		{"gpus-h100-sxm-4.csv", 4, suanli.GPU{
			Index: 0, UUID: "GPU-c81f2d4a-6b3e-9a7d-1f5c-8e2b4a9d6c31", Name: "H100 80GB HBM3",
			MemoryMB: 81559, DriverVersion: "550.90.07", ComputeCap: "9.0", PowerLimitW: 700,
		}},
		{"gpus-mixed-3090-a6000.csv", 3, suanli.GPU{
			Index: 0, UUID: "GPU-0e6a2c9f-8b4d-1f3e-7a5c-2d9b6e4f1a83", Name: "RTX 3090",
			MemoryMB: 24576, DriverVersion: "545.29.06", ComputeCap: "8.6", PowerLimitW: 350,
		}},
		{"gpus-t4-old-driver.csv", 2, suanli.GPU{
			Index: 0, UUID: "GPU-d4a1f8c3-7e2b-5d9a-3f6c-1e8b4d7a2c95", Name: "T4",
			MemoryMB: 15360, DriverVersion: "470.223.02",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			gpus, err := agent.ParseNvidiaSMI(readTestdata(t, tt.file))
			if err != nil {
				t.Fatalf("ParseNvidiaSMI: %v", err)
			}
			if len(gpus) != tt.count {
				t.Fatalf("ParseNvidiaSMI(%s) = %d GPUs, want %d", tt.file, len(gpus), tt.count)
			}
			if diff := cmp.Diff(tt.first, gpus[0]); diff != "" {
				t.Errorf("ParseNvidiaSMI(%s)[0] mismatch (-want +got):\n%s", tt.file, diff)
			}
			seen := map[string]bool{}
			for i, g := range gpus {
				if g.Index != i {
					t.Errorf("gpu %d has index %d", i, g.Index)
				}
				if seen[g.UUID] {
					t.Errorf("uuid %s twice", g.UUID)
				}
				seen[g.UUID] = true
			}
		})
	}
	mixed, _ := agent.ParseNvidiaSMI(readTestdata(t, "gpus-mixed-3090-a6000.csv"))
	if got := mixed[2].Name; got != "RTX A6000" {
		t.Errorf("mixed[2].Name = %q, want RTX A6000", got)
	}
}

func TestParseNvidiaSMIErrors(t *testing.T) {
	for _, in := range []string{
		string(readTestdata(t, "error-no-driver.txt")),
		"0, GPU-x, NVIDIA GeForce RTX 4090\n",                                 // too few columns
		"zero, GPU-x, NVIDIA GeForce RTX 4090, 24564, 550.54.15, 8.9\n",       // index
		"0, GPU-x, NVIDIA GeForce RTX 4090, 24564 MiB, 550.54.15, 8.9\n",      // units left in
		"0, GPU-x, NVIDIA GeForce RTX 4090, 24564, 550.54.15, 8.9, lots\n",    // power
		"0, , NVIDIA GeForce RTX 4090, 24564, 550.54.15, 8.9\n",               // no uuid
		"0, GPU-x, RTX 4090, 24564, 550.54.15, 8.9, 450.00, extra, columns\n", // too many
	} {
		if gpus, err := agent.ParseNvidiaSMI([]byte(in)); err == nil {
			t.Errorf("ParseNvidiaSMI(%q) = %v, want an error", in, gpus)
		}
	}
	if gpus, err := agent.ParseNvidiaSMI(nil); err != nil || len(gpus) != 0 {
		t.Errorf("ParseNvidiaSMI(empty) = %v, %v; want no GPUs, no error", gpus, err)
	}
	gpus, err := agent.ParseNvidiaSMI([]byte("0, GPU-x, NVIDIA L4, 23034, 550.54.15, [N/A], [N/A]\n"))
	if err != nil || gpus[0].ComputeCap != "" || gpus[0].PowerLimitW != 0 {
		t.Errorf("ParseNvidiaSMI with [N/A] = %+v, %v; want empty compute cap and power", gpus, err)
	}
}

func TestParseCUDAVersion(t *testing.T) {
	tests := []struct{ file, want string }{
		{"banner-550.txt", "12.4"},
		{"banner-535.txt", "12.2"},
		{"q-550.txt", "12.4"},
		{"error-no-driver.txt", ""},
	}
	for _, tt := range tests {
		if got := agent.ParseCUDAVersion(readTestdata(t, tt.file)); got != tt.want {
			t.Errorf("ParseCUDAVersion(%s) = %q, want %q", tt.file, got, tt.want)
		}
	}
}

func TestNormalizeGPUName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"NVIDIA GeForce RTX 4090", "RTX 4090"},
		{"NVIDIA GeForce GTX 1080 Ti", "GTX 1080 Ti"},
		{"NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"},
		{"NVIDIA A100 80GB PCIe", "A100 80GB PCIe"},
		{"NVIDIA H100 80GB HBM3", "H100 80GB HBM3"},
		{"NVIDIA H200", "H200"},
		{"Tesla T4", "T4"},
		{"Tesla V100-SXM2-16GB", "V100 SXM2 16GB"},
		{"NVIDIA RTX A6000", "RTX A6000"},
		{"Quadro RTX 6000", "Quadro RTX 6000"},
		{"NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada Generation"},
		{"  rtx_4090 ", "rtx 4090"},
		{"nvidia geforce RTX 3090", "RTX 3090"},
		{"NVIDIA", "NVIDIA"},
	}
	for _, tt := range tests {
		if got := agent.NormalizeGPUName(tt.in); got != tt.want {
			t.Errorf("NormalizeGPUName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseGPUSamples(t *testing.T) {
	got, err := agent.ParseGPUSamples(readTestdata(t, "samples-h100-4.csv"))
	if err != nil {
		t.Fatal(err)
	}
	want := []agent.GPUSample{
		{Index: 0, UtilPercent: 98, MemoryUsedMB: 71234, TemperatureC: 67, PowerW: 652.41},
		{Index: 1, UtilPercent: 97, MemoryUsedMB: 71230, TemperatureC: 69, PowerW: 648.90},
		{Index: 2, UtilPercent: 0, MemoryUsedMB: 4, TemperatureC: 31, PowerW: 72.15},
		{Index: 3, UtilPercent: 45, MemoryUsedMB: 20480, TemperatureC: 52, PowerW: 310.07},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseGPUSamples(samples-h100-4.csv) mismatch (-want +got):\n%s", diff)
	}
	got, err = agent.ParseGPUSamples(readTestdata(t, "samples-rtx4090-na.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []agent.GPUSample{{Index: 0, UtilPercent: 3, MemoryUsedMB: 1, TemperatureC: 38}}; !cmp.Equal(want, got) {
		t.Errorf("ParseGPUSamples(samples-rtx4090-na.csv) = %+v, want %+v", got, want)
	}
	for _, in := range []string{"0, 98, 71234, 67\n", "0, 98%, 71234, 67, 600\n", "x, 1, 2, 3, 4\n"} {
		if s, err := agent.ParseGPUSamples([]byte(in)); err == nil {
			t.Errorf("ParseGPUSamples(%q) = %v, want an error", in, s)
		}
	}
}

func FuzzParseNvidiaSMI(f *testing.F) {
	for _, name := range []string{"gpus-rtx4090-1.csv", "gpus-a100-sxm4-80gb-8.csv", "gpus-t4-old-driver.csv", "samples-h100-4.csv"} {
		f.Add(readTestdata(f, name))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		gpus, err := agent.ParseNvidiaSMI(in)
		if err == nil {
			for _, g := range gpus {
				if g.UUID == "" || g.Name == "" {
					t.Errorf("ParseNvidiaSMI(%q) accepted a GPU without uuid or name: %+v", in, g)
				}
			}
		}
		_, _ = agent.ParseGPUSamples(in)
	})
}
