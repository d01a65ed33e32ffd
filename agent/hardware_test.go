package agent_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/suanli/suanli/agent"
)

func TestDetectHardware(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no nvidia-smi
	dir := filepath.Join(t.TempDir(), "not", "yet", "made")
	hw, err := agent.DetectHardware(t.Context(), dir)
	if err != nil {
		t.Fatalf("DetectHardware: %v", err)
	}
	if hw.OS != runtime.GOOS || hw.CPUArch != runtime.GOARCH {
		t.Errorf("os/arch = %s/%s, want %s/%s", hw.OS, hw.CPUArch, runtime.GOOS, runtime.GOARCH)
	}
	if hw.CPUCores != runtime.NumCPU() || hw.RAMMB <= 0 || hw.Hostname == "" {
		t.Errorf("DetectHardware = %+v: want cores, RAM and hostname", hw)
	}
	if len(hw.GPUs) != 0 {
		t.Errorf("GPUs without nvidia-smi: %+v", hw.GPUs)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("DetectHardware created %s", dir)
	}
}

// fakeNvidiaSMI puts an nvidia-smi on PATH that prints the named testdata
// files: gpus for the GPU list, banner for a plain run. An empty gpus makes
// it fail like a machine whose driver is not loaded.
func fakeNvidiaSMI(t *testing.T, gpus, banner string) {
	t.Helper()
	bin := t.TempDir()
	abs := func(name string) string {
		p, err := filepath.Abs(filepath.Join("testdata", "nvidia-smi", name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	script := "#!/bin/sh\n"
	if gpus == "" {
		script += "cat '" + abs("error-no-driver.txt") + "'\nexit 9\n"
	} else {
		script += "if [ $# -eq 0 ]; then cat '" + abs(banner) + "'; exit 0; fi\n" +
			"case \"$1\" in --query-gpu=index,uuid,*) cat '" + abs(gpus) + "';; *) exit 2;; esac\n"
	}
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":/usr/bin:/bin")
}

func TestDetectHardwareNvidia(t *testing.T) {
	fakeNvidiaSMI(t, "gpus-h100-sxm-4.csv", "banner-550.txt")
	hw, err := agent.DetectHardware(t.Context(), t.TempDir())
	if err != nil {
		t.Fatalf("DetectHardware: %v", err)
	}
	if len(hw.GPUs) != 4 {
		t.Fatalf("DetectHardware found %d GPUs, want 4", len(hw.GPUs))
	}
	for _, g := range hw.GPUs {
		if g.Name != "H100 80GB HBM3" || g.CUDAVersion != "12.4" || g.ComputeCap != "9.0" || g.Simulated {
			t.Errorf("GPU = %+v, want an H100 80GB HBM3 with CUDA 12.4", g)
		}
	}
}

func TestDetectHardwareNvidiaFails(t *testing.T) {
	fakeNvidiaSMI(t, "", "")
	hw, err := agent.DetectHardware(t.Context(), t.TempDir())
	if !errors.Is(err, agent.ErrGPUDetect) || !strings.Contains(err.Error(), "couldn't communicate with the NVIDIA driver") {
		t.Fatalf("DetectHardware error = %v, want ErrGPUDetect with nvidia-smi's own message", err)
	}
	if hw.RAMMB <= 0 || hw.CPUCores <= 0 {
		t.Errorf("DetectHardware = %+v: want the rest of the hardware with the error", hw)
	}
}

func TestParseCPUModel(t *testing.T) {
	tests := []struct{ in, want string }{
		{"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\n", "AMD EPYC 7763 64-Core Processor"},
		{"processor\t: 0\nBogoMIPS\t: 108.00\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n", "Raspberry Pi 4 Model B Rev 1.4"},
		{"processor\t: 0\n", ""},
	}
	for _, tt := range tests {
		if got := agent.ParseCPUModel([]byte(tt.in)); got != tt.want {
			t.Errorf("parseCPUModel(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseMemTotalMB(t *testing.T) {
	got, err := agent.ParseMemTotalMB([]byte("MemTotal:       24684084 kB\nMemFree:        24043728 kB\n"))
	if err != nil || got != 24105 {
		t.Errorf("parseMemTotalMB = %d, %v; want 24105", got, err)
	}
	if _, err := agent.ParseMemTotalMB([]byte("MemFree: 1 kB\n")); err == nil {
		t.Error("parseMemTotalMB without MemTotal: want an error")
	}
}
