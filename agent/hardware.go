package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/suanli/suanli"
)

// ErrGPUDetect is wrapped by DetectHardware's error when nvidia-smi is on
// PATH but fails, so that a caller declaring simulated GPUs (which replace
// the detected ones) can go on with a warning.
var ErrGPUDetect = errors.New("gpu detection failed")

// nvidiaSMITimeout bounds one nvidia-smi run; a hung driver must not hang
// the agent's start.
const nvidiaSMITimeout = 15 * time.Second

// DetectHardware reports what this machine has: hostname, OS, CPU model,
// logical cores (those this process may use), architecture, total RAM (from
// /proc/meminfo), free disk under dataDir (or its nearest existing parent),
// and the NVIDIA GPUs that nvidia-smi lists when it is on PATH.
//
// A machine without nvidia-smi has no GPUs and that is not an error. When
// nvidia-smi is there but fails (driver not loaded, version mismatch),
// DetectHardware returns everything else it found together with an error
// that wraps ErrGPUDetect and quotes nvidia-smi, so the caller can refuse to
// start rather than list a GPU machine as CPU-only. Simulated GPUs (ParseFakeGPUs) are the caller's
// business: it replaces Hardware.GPUs with them.
func DetectHardware(ctx context.Context, dataDir string) (suanli.Hardware, error) {
	hw := suanli.Hardware{
		OS:       runtime.GOOS,
		CPUArch:  runtime.GOARCH,
		CPUCores: runtime.NumCPU(),
	}
	var errs []error
	var err error
	if hw.Hostname, err = os.Hostname(); err != nil {
		errs = append(errs, fmt.Errorf("hostname: %w", err))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		hw.CPUModel = parseCPUModel(b)
	}
	if b, err := os.ReadFile("/proc/meminfo"); err != nil {
		errs = append(errs, fmt.Errorf("read memory size: %w", err))
	} else if hw.RAMMB, err = parseMemTotalMB(b); err != nil {
		errs = append(errs, err)
	}
	if hw.DiskFreeGB, err = diskFreeGB(dataDir); err != nil {
		errs = append(errs, err)
	}
	if hw.GPUs, err = detectNvidiaGPUs(ctx); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrGPUDetect, err))
	}
	return hw, errors.Join(errs...)
}

// parseCPUModel returns the CPU model from /proc/cpuinfo: "model name" on
// x86, "Model" or "Hardware" on many ARM boards, "cpu model" on others.
func parseCPUModel(cpuinfo []byte) string {
	found := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if _, seen := found[k]; !seen {
			found[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	for _, k := range []string{"model name", "Model", "Hardware", "cpu model", "cpu"} {
		if v := found[k]; v != "" {
			return v
		}
	}
	return ""
}

// parseMemTotalMB returns MemTotal from /proc/meminfo in MiB.
func parseMemTotalMB(meminfo []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemTotal" {
			continue
		}
		f := strings.Fields(v) // "24684084 kB"
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			break
		}
		return kb / 1024, nil
	}
	return 0, errors.New("read memory size: no MemTotal line in /proc/meminfo")
}

// diskFreeGB returns the space available to unprivileged users under dir, in
// GiB rounded down. dir need not exist yet: its nearest existing parent is
// measured, which is where it will be created.
func diskFreeGB(dir string) (int64, error) {
	if dir == "" {
		dir = "."
	}
	p, err := filepath.Abs(dir)
	if err != nil {
		return 0, fmt.Errorf("free disk under %s: %w", dir, err)
	}
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(p, &st)
		if err == nil {
			return int64(st.Bavail) * int64(st.Bsize) >> 30, nil
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, syscall.ENOENT) || parent == p {
			return 0, fmt.Errorf("free disk under %s: %w", dir, err)
		}
		p = parent
	}
}

// detectNvidiaGPUs runs nvidia-smi when it is on PATH. It returns no GPUs
// and no error when it is not.
func detectNvidiaGPUs(ctx context.Context) ([]suanli.GPU, error) {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		return nil, nil
	}
	out, err := runNvidiaSMI(ctx, "--query-gpu="+nvidiaGPUQuery, "--format=csv,noheader,nounits")
	if err != nil && bytes.Contains(out, []byte("not a valid field")) {
		// Drivers before 510 know neither compute_cap nor, on some boards,
		// power.limit: ask for the five columns every driver has.
		out, err = runNvidiaSMI(ctx, "--query-gpu="+nvidiaGPUQueryOld, "--format=csv,noheader,nounits")
	}
	if err != nil {
		return nil, err
	}
	gpus, err := ParseNvidiaSMI(out)
	if err != nil {
		return nil, err
	}
	// The CUDA version is only in the banner of plain nvidia-smi.
	if banner, err := runNvidiaSMI(ctx); err == nil {
		cuda := ParseCUDAVersion(banner)
		for i := range gpus {
			gpus[i].CUDAVersion = cuda
		}
	}
	return gpus, nil
}

// runNvidiaSMI runs nvidia-smi with args and returns its standard output, or
// an error that quotes what it printed.
func runNvidiaSMI(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, nvidiaSMITimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "nvidia-smi", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String() + "\n" + stdout.String())
		if len(msg) > 500 {
			msg = msg[:500] + "…"
		}
		if msg == "" {
			return stdout.Bytes(), fmt.Errorf("nvidia-smi: %w (check the NVIDIA driver)", err)
		}
		return append(stdout.Bytes(), stderr.Bytes()...), fmt.Errorf("nvidia-smi: %w: %s", err, msg)
	}
	return stdout.Bytes(), nil
}
