package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli/agent"
	"github.com/suanli/suanli/agent/docker"
	shttp "github.com/suanli/suanli/http"
)

// check is one line of `suanli doctor`.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn, fail
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func newDoctorCmd(a *app) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this host: Docker, GPU driver and CUDA, disk, clock skew, the server",
		Long: `Check that this machine can serve rentals well, and say how to fix what
is wrong: the Docker Engine, NVIDIA driver and CUDA (through nvidia-smi),
free disk in the Suanli home, clock skew against the control plane, and
whether the control plane answers. Each check is ok, warn or fail; the
exit status is non-zero when one fails (with --json too).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 20*time.Second)
			defer cancel()
			checks := runChecks(ctx, a)
			failed := 0
			for _, c := range checks {
				if c.Status == "fail" {
					failed++
				}
			}
			if jsonOut {
				if err := a.printJSON(cmd, checks); err != nil {
					return err
				}
			} else {
				for _, c := range checks {
					fmt.Fprintf(cmd.OutOrStdout(), "%-5s %-10s %s\n", c.Status, c.Name, c.Detail)
					if c.Fix != "" {
						fmt.Fprintf(cmd.OutOrStdout(), "      %-10s fix: %s\n", "", c.Fix)
					}
				}
			}
			// Scripts read the exit status, with --json too.
			if failed > 0 {
				return fmt.Errorf("%d of %d checks failed", failed, len(checks))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func runChecks(ctx context.Context, a *app) []check {
	var out []check
	if docker.Available(ctx) {
		out = append(out, check{Name: "docker", Status: "ok", Detail: "the Docker Engine answers: instances run as containers"})
	} else {
		out = append(out, check{Name: "docker", Status: "warn", Detail: "no Docker Engine reachable: instances run as plain processes (--runtime process), without image isolation",
			Fix: "install Docker Engine and add this user to the docker group, or set DOCKER_HOST"})
	}
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		out = append(out, check{Name: "gpu", Status: "ok", Detail: "no nvidia-smi: a CPU-only machine (list it with --price-cpu)"})
	} else if hw, err := agent.DetectHardware(ctx, a.home); err != nil {
		out = append(out, check{Name: "gpu", Status: "fail", Detail: "nvidia-smi fails: " + err.Error(), Fix: "reinstall the NVIDIA driver; `nvidia-smi` must print your GPUs"})
	} else if len(hw.GPUs) > 0 {
		g := hw.GPUs[0]
		out = append(out, check{Name: "gpu", Status: "ok", Detail: fmt.Sprintf("%d× %s, driver %s, CUDA %s, compute %s", len(hw.GPUs), g.Name, g.DriverVersion, g.CUDAVersion, g.ComputeCap)})
		if _, err := exec.LookPath("nvidia-container-runtime"); err != nil && docker.Available(ctx) {
			out = append(out, check{Name: "gpu", Status: "warn", Detail: "nvidia-container-runtime not found: containers cannot use the GPUs", Fix: "install the NVIDIA Container Toolkit"})
		}
	}
	var st syscall.Statfs_t
	dir := a.home
	if _, err := os.Stat(dir); err != nil {
		dir = filepath.Dir(dir)
	}
	if err := syscall.Statfs(dir, &st); err == nil {
		free := int64(st.Bavail) * int64(st.Bsize) / (1 << 30)
		c := check{Name: "disk", Status: "ok", Detail: fmt.Sprintf("%d GB free under %s", free, dir)}
		if free < 50 {
			c.Status, c.Fix = "warn", "renters need room for images and disks: free space or move --home to a bigger disk"
		}
		out = append(out, c)
	}
	client := a.client()
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, client.BaseURL+"/healthz", nil)
	resp, err := client.HTTP.Do(req) // with the pinned CA of an HTTPS server
	if err != nil {
		out = append(out, check{Name: "server", Status: "fail", Detail: "cannot reach " + client.BaseURL + ": " + err.Error(),
			Fix: "start it (`suanli up` or `suanli server`), or pass --server / SUANLI_SERVER"})
		return out
	}
	rtt := time.Since(start)
	var h shttp.Health
	err = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil {
		out = append(out, check{Name: "server", Status: "fail", Detail: fmt.Sprintf("%s answers HTTP %d to GET /healthz, not a Suanli control plane's health", client.BaseURL, resp.StatusCode),
			Fix: "pass the control plane's URL with --server / SUANLI_SERVER"})
		return out
	}
	out = append(out, check{Name: "server", Status: "ok", Detail: fmt.Sprintf("%s answers in %s", client.BaseURL, rtt.Round(time.Millisecond))})
	if !h.Time.IsZero() {
		skew := time.Until(h.Time.Add(rtt / 2))
		c := check{Name: "clock", Status: "ok", Detail: fmt.Sprintf("%s off the control plane", skew.Round(time.Millisecond))}
		if skew > 2*time.Second || skew < -2*time.Second {
			c.Status, c.Fix = "warn", "enable NTP (timedatectl set-ntp true): skew distorts heartbeats and billing times"
		}
		out = append(out, c)
	}
	return out
}
