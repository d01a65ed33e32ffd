package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
	"github.com/suanli/suanli/agent/docker"
	"github.com/suanli/suanli/agent/process"
	"github.com/suanli/suanli/agent/vault"
	"github.com/suanli/suanli/heartbeat"
	shttp "github.com/suanli/suanli/http"
)

// agentConfig is the host agent's configuration.
type agentConfig struct {
	FakeGPUs string
	Runtime  string // auto, docker, process
	DataDir  string
	// SSHAddr is where the SSH endpoint listens ("off": none; "": the
	// command's default). SSHAdvertise is the host renters reach it at ("":
	// the address the control plane sees the agent's syncs come from).
	SSHAddr      string
	SSHAdvertise string
	// CAFile or CAFingerprint pin an HTTPS control plane's CA at join;
	// caPEM is the CA itself when the caller has it (up).
	CAFile        string
	CAFingerprint string
	caPEM         []byte
	// BlockHost is "auto" (on when root with iptables), "on" or "off":
	// whether Docker instances are kept from reaching the host's ports.
	BlockHost string
	// SubnetPool is where Docker instance networks take a /28 each.
	SubnetPool string
	// DockerNamespace separates agents sharing one Docker daemon.
	DockerNamespace string
	// FenceAfter stops billed workloads after this long without reaching
	// the control plane (its lost_after minus a margin), so a rental the
	// control plane gave up on never runs twice.
	FenceAfter time.Duration
	// LightBeats lets the agent use the control plane's light heartbeat
	// channel (UDP) between full syncs.
	LightBeats bool
	// DiskEncryption is auto, on or off: whether instance disks and volumes
	// are encrypted at rest with per-object keys (agent/vault).
	DiskEncryption string
	// VaultSize is the size of a new encrypted loop image, in GB.
	VaultSize int64
	// Watchdog starts a watchdog process that fences the workloads when
	// the agent process itself stops renewing its lease (suanli agent only).
	Watchdog bool
}

func (c *agentConfig) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.FakeGPUs, "fake-gpus", os.Getenv("SUANLI_FAKE_GPUS"), `declare simulated GPUs, e.g. "RTX 4090:2" (development and tests; marked simulated everywhere)`)
	f.StringVar(&c.Runtime, "runtime", envOr("SUANLI_RUNTIME", "auto"), "how instances run: docker, process, or auto (docker when a daemon is reachable)")
	f.StringVar(&c.DataDir, "data-dir", "", "where the agent keeps instance data (default HOME/agent)")
	f.StringVar(&c.SSHAddr, "ssh-addr", os.Getenv("SUANLI_SSH_ADDR"), "where the SSH endpoint for renters listens (HOST:PORT; port 0 picks a free one; off: no SSH); default :2222 for agent, 127.0.0.1:0 for up; env SUANLI_SSH_ADDR")
	f.StringVar(&c.SSHAdvertise, "ssh-advertise", os.Getenv("SUANLI_SSH_ADVERTISE"), "host or IP renters reach the SSH endpoint at (default: the address the control plane sees this agent at); env SUANLI_SSH_ADVERTISE")
	f.StringVar(&c.BlockHost, "block-host-access", "auto", "keep Docker instances from reaching this host's own ports: auto (when root with iptables), on, off")
	f.StringVar(&c.DockerNamespace, "docker-namespace", "", "name prefix for this agent's containers, networks and volumes, when several agents share one Docker daemon")
	f.StringVar(&c.SubnetPool, "subnet-pool", "", "CIDR where each Docker instance network takes a /28 (default: the daemon's pools, about 30 networks)")
	f.BoolVar(&c.LightBeats, "light-heartbeats", envOr("SUANLI_LIGHT_HEARTBEATS", "true") != "false", "between full syncs, send heartbeats as signed UDP datagrams when the control plane offers it (falls back to HTTP when UDP is blocked); env SUANLI_LIGHT_HEARTBEATS")
	f.DurationVar(&c.FenceAfter, "fence-after", 100*time.Second, "stop running instances after this long without the control plane (its lost-after minus a margin; 0 disables)")
	f.StringVar(&c.DiskEncryption, "disk-encryption", envOr("SUANLI_DISK_ENCRYPTION", "auto"), "encrypt each instance disk and volume at rest with its own key, held by the control plane, so that release is a crypto-erase: auto (when the data directory's filesystem supports fscrypt, or an image made by an earlier \"on\" exists), on (else make an encrypted loop image DATA-DIR/vault/disk.img; needs root), off; env SUANLI_DISK_ENCRYPTION")
	f.Int64Var(&c.VaultSize, "vault-size", 0, "size in GB of a new encrypted loop image (sparse: it takes disk space as it fills); default the free disk space less 10%")
	cmd.RegisterFlagCompletionFunc("runtime", cobra.FixedCompletions([]string{"auto", "docker", "process"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("disk-encryption", cobra.FixedCompletions([]string{"auto", "on", "off"}, cobra.ShellCompDirectiveNoFileComp))
}

// agentState is the agent's own credential (HOME/agent.json, mode 0600).
type agentState struct {
	Server    string `json:"server"`
	MachineID int64  `json:"machine_id"`
	APIKey    string `json:"api_key"`
	CAPEM     string `json:"ca_pem,omitempty"` // the control plane's pinned TLS CA
}

func detect(ctx context.Context, c agentConfig, dataDir string) (suanli.Hardware, error) {
	hw, err := agent.DetectHardware(ctx, dataDir)
	if errors.Is(err, agent.ErrGPUDetect) && c.FakeGPUs != "" {
		err = nil // the simulated GPUs replace what nvidia-smi failed to report
	}
	if err != nil {
		return hw, fmt.Errorf("detect hardware: %w", err)
	}
	if c.FakeGPUs != "" {
		gpus, err := agent.ParseFakeGPUs(c.FakeGPUs)
		if err != nil {
			return hw, suanli.FieldErrorf("fake-gpus", "%v", err)
		}
		hw.GPUs = gpus
	}
	return hw, nil
}

// openVault opens the agent's disk encryption per --disk-encryption; nil
// when it is off or not available in auto mode.
func openVault(ctx context.Context, c agentConfig, dataDir string, hw suanli.Hardware, logger *slog.Logger) (*vault.Vault, error) {
	switch c.DiskEncryption {
	case "", "auto", "on", "off":
	default:
		return nil, suanli.FieldErrorf("disk-encryption", "%q: use auto, on or off", c.DiskEncryption)
	}
	size := c.VaultSize << 30
	if size <= 0 && hw.DiskFreeGB > 0 {
		size = hw.DiskFreeGB << 30 / 10 * 9
	}
	v, err := vault.Open(ctx, vault.Options{Dir: filepath.Join(dataDir, "vault"), Mode: c.DiskEncryption, ImageSize: size, Logger: logger})
	if err != nil {
		return nil, suanli.FieldErrorf("disk-encryption", "%v", err)
	}
	if v != nil {
		logger.Info("disk encryption on", "how", v.Describe())
	}
	return v, nil
}

func newRuntime(ctx context.Context, c agentConfig, dataDir string, vlt *vault.Vault, logger *slog.Logger) (agent.Runtime, error) {
	newProcess := func() agent.Runtime {
		r := process.New(dataDir, logger)
		r.Vault = vlt
		return r
	}
	dockerOpts := func() docker.Options {
		o := docker.Options{DataDir: filepath.Join(dataDir, "docker"), Logger: logger, SubnetPool: c.SubnetPool, Namespace: c.DockerNamespace, Vault: vlt}
		switch c.BlockHost {
		case "on":
			o.BlockHostAccess = true
		case "auto":
			_, err := exec.LookPath("iptables")
			o.BlockHostAccess = os.Geteuid() == 0 && err == nil
		}
		return o
	}
	switch c.Runtime {
	case "process":
		return newProcess(), nil
	case "docker":
		return docker.New(ctx, dockerOpts())
	case "auto", "":
		if docker.Available(ctx) {
			return docker.New(ctx, dockerOpts())
		}
		return newProcess(), nil
	}
	return nil, suanli.FieldErrorf("runtime", "%q: use docker, process or auto", c.Runtime)
}

// startAgent joins (once; the credential is kept in stateFile) and runs the
// agent loop until ctx ends. join is called only when no credential exists.
func startAgent(ctx context.Context, c agentConfig, server, stateFile string, join func(context.Context) (string, error), logger *slog.Logger) (chan error, *agentState, *agent.Collector, error) {
	dataDir := c.DataDir
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, nil, nil, err
	}
	hw, err := detect(ctx, c, dataDir)
	if err != nil {
		return nil, nil, nil, err
	}
	vlt, err := openVault(ctx, c, dataDir, hw, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	if vlt != nil {
		hw.DiskEncryption = vlt.Describe()
	}
	rt, err := newRuntime(ctx, c, dataDir, vlt, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	var st agentState
	if b, err := os.ReadFile(stateFile); err == nil {
		json.Unmarshal(b, &st)
	}
	if st.APIKey == "" || st.MachineID == 0 {
		tok, err := join(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		caPEM, err := joinCA(ctx, c, server)
		if err != nil {
			return nil, nil, nil, err
		}
		jc := shttp.NewClient(server, "")
		if err := pinClient(jc, caPEM); err != nil {
			return nil, nil, nil, err
		}
		resp, err := jc.Join(ctx, suanli.JoinRequest{Token: tok, Hardware: hw, Runtime: rt.Name()})
		if err != nil {
			return nil, nil, nil, err
		}
		st = agentState{Server: server, MachineID: resp.MachineID, APIKey: resp.APIKey, CAPEM: string(caPEM)}
		b, _ := json.MarshalIndent(st, "", "  ")
		if err := os.WriteFile(stateFile, b, 0o600); err != nil {
			return nil, nil, nil, err
		}
	}
	client := shttp.NewClient(server, st.APIKey)
	if err := pinClient(client, []byte(st.CAPEM)); err != nil {
		return nil, nil, nil, err
	}
	sshEP, sshCA, err := startSSHEndpoint(ctx, c, dataDir, rt, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg := agent.Config{Server: client, Runtime: rt, MachineID: st.MachineID, Hardware: hw, Version: Version, Logger: logger,
		FenceAfter: c.FenceAfter, SSH: sshEP, SSHAuthorities: sshCA}
	if c.Watchdog && c.FenceAfter > 0 {
		if cfg.LeaseFile, err = startWatchdog(c, dataDir, rt.Name(), logger); err != nil {
			return nil, nil, nil, err
		}
	}
	if len(hw.GPUs) > 0 && !hw.GPUs[0].Simulated {
		cfg.GPUSampler = agent.SampleGPUs
	}
	if c.LightBeats {
		cfg.DialBeats = beatDialer(server, st.MachineID)
	}
	ag, err := agent.New(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	done := make(chan error, 1)
	go func() {
		err := ag.Run(ctx)
		if cl, ok := rt.(interface{ Close() error }); ok {
			cl.Close()
		}
		done <- err
	}()
	logger.Info("agent started", "machine_id", st.MachineID, "runtime", rt.Name(), "gpus", len(hw.GPUs), "server", server)
	return done, &st, agent.NewCollector(rt, cfg.GPUSampler), nil
}

func newAgentCmd(a *app) *cobra.Command {
	var c agentConfig
	var token, metricsAddr string
	cmd := &cobra.Command{
		Use:   "agent --server URL --join-token TOKEN",
		Short: "Run the host agent: offer this machine and run rented instances",
		Long: `Run the host agent on a provider's machine. It detects the hardware
(CPU, RAM, disk, NVIDIA GPUs through nvidia-smi), registers the machine with
the control plane using a one-time join token (print one with
'suanli host join-token'), keeps its own credential in HOME/agent.json, and
then runs the instances the control plane asks for.

List the machine afterwards with 'suanli host list MACHINE --price-gpu …'.`,
		Example: `  suanli agent --server http://market.example:8470 --join-token sl_join_…
  suanli agent --server http://127.0.0.1:8470 --join-token sl_join_… --fake-gpus "RTX 4090:2" --runtime process`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			logger := newLogger()
			server := a.server
			if server == "" {
				server = os.Getenv("SUANLI_SERVER")
			}
			stateFile := filepath.Join(a.home, "agent.json")
			if server == "" {
				var st agentState
				if b, err := os.ReadFile(stateFile); err == nil && json.Unmarshal(b, &st) == nil {
					server = st.Server
				}
			}
			if server == "" {
				return suanli.FieldErrorf("server", "give the control plane's URL with --server or SUANLI_SERVER")
			}
			if c.DataDir == "" {
				c.DataDir = filepath.Join(a.home, "agent")
			}
			if c.SSHAddr == "" {
				c.SSHAddr = ":2222"
			}
			c.CAFile = a.caFile // the global --ca-file
			if err := os.MkdirAll(a.home, 0o700); err != nil {
				return err
			}
			done, st, coll, err := startAgent(cmd.Context(), c, server, stateFile, func(context.Context) (string, error) {
				if token == "" {
					return "", suanli.FieldErrorf("join-token", "this machine has not joined yet: pass --join-token (print one with `suanli host join-token`)")
				}
				return token, nil
			}, logger)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "agent running for machine %d against %s\n", st.MachineID, server)
			if metricsAddr != "" {
				reg := prometheus.NewRegistry()
				reg.MustRegister(coll)
				ln, err := net.Listen("tcp", metricsAddr)
				if err != nil {
					return fmt.Errorf("metrics listener: %w", err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "agent metrics at http://%s/metrics\n", ln.Addr())
				go http.Serve(ln, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
			}
			return <-done
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVar(&token, "join-token", os.Getenv("SUANLI_JOIN_TOKEN"), "one-time join token (first start only); env SUANLI_JOIN_TOKEN")
	cmd.Flags().StringVar(&c.CAFingerprint, "ca-fingerprint", os.Getenv("SUANLI_CA_FINGERPRINT"), "pin the control plane's CA by its fingerprint, as `suanli host join-token` prints it (first start only)")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics (instances, per-GPU utilisation, memory, temperature) at HOST:PORT")
	cmd.Flags().BoolVar(&c.Watchdog, "watchdog", true, "start a watchdog process that stops this machine's workloads when the agent itself is stopped or dead past its fence (so a job relaunched elsewhere never runs twice)")
	return cmd
}

// beatDialer opens the light heartbeat channel at the address a sync
// advertises; ":PORT" is on the host of the server URL.
func beatDialer(server string, machineID int64) func(addr string) (agent.Beater, error) {
	return func(addr string) (agent.Beater, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if host == "" {
			u, err := url.Parse(server)
			if err != nil {
				return nil, err
			}
			host = u.Hostname()
		}
		c, err := heartbeat.Dial(net.JoinHostPort(host, port), machineID)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// Both runtimes keep volumes (and say how they released them).
var (
	_ agent.VolumeManager = (*process.Runtime)(nil)
	_ agent.VolumeManager = (*docker.Runtime)(nil)
	_ agent.Releaser      = (*process.Runtime)(nil)
	_ agent.Releaser      = (*docker.Runtime)(nil)
)
