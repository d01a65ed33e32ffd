package chaos

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/suanli/suanli"
	shttp "github.com/suanli/suanli/http"
)

// LabelRun is the Docker label every object of a cluster carries, with the
// cluster's run id as its value.
const LabelRun = "suanli.chaos"

// GPUModel is the simulated GPU every agent declares.
const GPUModel = "RTX 4090"

// Options configure a Cluster. Zero values mean the documented defaults,
// chosen so that a fault is detected within seconds.
type Options struct {
	Agents        int           // agent containers; default 3
	GPUs          int           // simulated GPUs per agent; default 2
	Heartbeat     time.Duration // server --heartbeat; default 1s
	SuspectAfter  time.Duration // server --suspect-after; default 3s
	LostAfter     time.Duration // server --lost-after; default 10s
	FailoverGrace time.Duration // server --failover-grace; default LostAfter
	Settle        time.Duration // server --settle-every; default 200ms
	FenceAfter    time.Duration // agent --fence-after; default 5s
	// Logf receives progress lines (what the cluster does, and when); nil
	// discards them.
	Logf func(format string, args ...any)
}

func (o *Options) setDefaults() {
	if o.Agents <= 0 {
		o.Agents = 3
	}
	if o.GPUs <= 0 {
		o.GPUs = 2
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = time.Second
	}
	if o.SuspectAfter <= 0 {
		o.SuspectAfter = 3 * time.Second
	}
	if o.LostAfter <= 0 {
		o.LostAfter = 10 * time.Second
	}
	if o.FailoverGrace <= 0 {
		o.FailoverGrace = o.LostAfter
	}
	if o.Settle <= 0 {
		o.Settle = 200 * time.Millisecond
	}
	if o.FenceAfter <= 0 {
		o.FenceAfter = 5 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// LeaseTick is how often the control plane checks leases: half a heartbeat,
// at least a second (control.Service.Run).
func (o Options) LeaseTick() time.Duration { return max(time.Second, o.Heartbeat/2) }

// DetectionBound is the longest a host's loss may take to be acted on,
// counted from the fault: lost_after (counted from the last heartbeat, at or
// before the fault), plus one lease tick, plus a second for the relaunch and
// the clocks of a loaded machine.
func (o Options) DetectionBound() time.Duration { return o.LostAfter + o.LeaseTick() + time.Second }

// Cluster is a control plane and its agents, each agent in its own
// container. Its methods are not safe for concurrent use, except where
// their docs say so.
type Cluster struct {
	Opts Options
	// ID names this run's Docker objects (suanli-chaos-ID-…).
	ID     string
	Server *Server
	Agents []*Agent
	// Client is the operator's API client (owner of every machine, and the
	// renter).
	Client *shttp.Client

	dir      string // binaries, server home, agent homes
	bin      string // the static suanli binary
	image    string
	network  string
	gateway  string
	closeMu  sync.Mutex
	closed   bool
	monitors []*Watch
}

// Available reports whether this machine can run a Cluster (a reachable
// Docker daemon), or why not.
func Available(ctx context.Context) error {
	if _, err := exec.LookPath("docker"); err != nil {
		return suanli.Errorf(suanli.EUNAVAILABLE, "the docker command is not installed")
	}
	if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return suanli.Errorf(suanli.EUNAVAILABLE, "the Docker daemon is not reachable: %s", strings.TrimSpace(string(out)))
	}
	return nil
}

// Start builds the binaries and the image, creates the network, starts the
// control plane and the agents, lists every machine at $1/GPU-hour, and
// waits until all are online. On error, what was created is removed.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	opts.setDefaults()
	if err := Available(ctx); err != nil {
		return nil, err
	}
	id := runID()
	dir, err := os.MkdirTemp("", "suanli-chaos-"+id+"-")
	if err != nil {
		return nil, err
	}
	c = &Cluster{Opts: opts, ID: id, dir: dir, image: "suanli-chaos:" + id, network: "suanli-chaos-" + id}
	made := c // every "return nil, err" below sets c to nil before this runs
	defer func() {
		if err != nil {
			made.Close()
		}
	}()
	if err := c.build(ctx); err != nil {
		return nil, err
	}
	if err := c.createNetwork(ctx); err != nil {
		return nil, err
	}
	port, err := freePort(c.gateway)
	if err != nil {
		return nil, err
	}
	c.Server = &Server{c: c, home: filepath.Join(dir, "server"), Addr: net.JoinHostPort(c.gateway, port)}
	if err := c.Server.Start(ctx); err != nil {
		return nil, err
	}
	key, err := readOperatorKey(c.Server.home)
	if err != nil {
		return nil, err
	}
	c.Client = shttp.NewClient(c.Server.URL, key)
	c.Client.HTTP.Timeout = 10 * time.Second
	for i := 0; i < opts.Agents; i++ {
		a := &Agent{c: c, Index: i, Name: fmt.Sprintf("a%d", i), Container: fmt.Sprintf("suanli-chaos-%s-a%d", id, i),
			Home: filepath.Join(dir, fmt.Sprintf("agent%d", i))}
		c.Agents = append(c.Agents, a)
		if err := a.create(ctx); err != nil {
			return nil, err
		}
	}
	price := suanli.Money(1_000_000)
	for _, a := range c.Agents {
		if err := a.waitJoined(ctx, 30*time.Second); err != nil {
			return nil, err
		}
		if _, err := c.Client.ListMachine(ctx, a.MachineID, suanli.ListingUpdate{PriceGPU: &price}); err != nil {
			return nil, fmt.Errorf("list machine %d: %w", a.MachineID, err)
		}
	}
	if err := c.WaitOnline(ctx, 30*time.Second, c.Agents...); err != nil {
		return nil, err
	}
	opts.Logf("cluster %s: control plane at %s, %d agents on network %s", id, c.Server.URL, len(c.Agents), c.network)
	return c, nil
}

func runID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// docker runs the docker command and returns its trimmed output.
func docker(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// moduleRoot is the directory of the go.mod of the working directory's
// module (the repository root).
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", suanli.Errorf(suanli.EUNAVAILABLE, "not inside the suanli module (go env GOMOD: %q): run from the repository", gomod)
	}
	return filepath.Dir(gomod), nil
}

// build compiles suanli and the beat workload as static binaries and builds
// the agents' image FROM scratch.
func (c *Cluster) build(ctx context.Context) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	ctxDir := filepath.Join(c.dir, "image")
	if err := os.MkdirAll(ctxDir, 0o755); err != nil {
		return err
	}
	c.bin = filepath.Join(ctxDir, "suanli")
	for pkg, out := range map[string]string{"./cmd/suanli": c.bin, "./internal/chaos/testdata/beat": filepath.Join(ctxDir, "beat")} {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	df := "FROM scratch\nCOPY suanli /suanli\nCOPY beat /beat\nENTRYPOINT [\"/suanli\"]\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "docker", "build", "-q", "--label", LabelRun+"="+c.ID, "-t", c.image, ctxDir)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("docker build: %v\n%s", err, b)
	}
	c.Opts.Logf("built %s", c.image)
	return nil
}

func (c *Cluster) createNetwork(ctx context.Context) error {
	if _, err := docker(ctx, "network", "create", "--label", LabelRun+"="+c.ID, c.network); err != nil {
		return err
	}
	gw, err := docker(ctx, "network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", c.network)
	if err != nil {
		return err
	}
	if net.ParseIP(gw) == nil {
		return fmt.Errorf("network %s: no gateway address (%q)", c.network, gw)
	}
	c.gateway = gw
	return nil
}

func freePort(host string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port, nil
}

func readOperatorKey(home string) (string, error) {
	b, err := os.ReadFile(filepath.Join(home, "config.json"))
	if err != nil {
		return "", err
	}
	var cfg struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil || cfg.APIKey == "" {
		return "", fmt.Errorf("operator key in %s: %v", home, err)
	}
	return cfg.APIKey, nil
}

// Close stops the control plane and removes every container, the network,
// the image and the temporary directory. It is safe to call twice and from
// any goroutine.
func (c *Cluster) Close() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	for _, w := range c.monitors {
		w.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if c.Server != nil {
		c.Server.Stop(false)
	}
	if ids, err := docker(ctx, "ps", "-aq", "--filter", "label="+LabelRun+"="+c.ID); err == nil && ids != "" {
		if _, err := docker(ctx, append([]string{"rm", "-f", "-v"}, strings.Fields(ids)...)...); err != nil {
			errs = append(errs, err)
		}
	}
	if out, _ := docker(ctx, "network", "ls", "-q", "--filter", "label="+LabelRun+"="+c.ID); out != "" {
		if _, err := docker(ctx, "network", "rm", c.network); err != nil {
			errs = append(errs, err)
		}
	}
	if out, _ := docker(ctx, "images", "-q", c.image); out != "" {
		if _, err := docker(ctx, "rmi", "-f", c.image); err != nil {
			errs = append(errs, err)
		}
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
	return errors.Join(errs...)
}

// Logs returns the control plane's log and each agent's (docker logs), for
// a failed test to print. Only the last max bytes of each are kept.
func (c *Cluster) Logs(max int) string {
	var b strings.Builder
	tail := func(s string) string {
		if len(s) > max {
			return "…" + s[len(s)-max:]
		}
		return s
	}
	if c.Server != nil {
		s, _ := os.ReadFile(c.Server.logPath())
		fmt.Fprintf(&b, "=== server log\n%s\n", tail(string(s)))
	}
	for _, a := range c.Agents {
		out, _ := exec.Command("docker", "logs", a.Container).CombinedOutput()
		fmt.Fprintf(&b, "=== agent %s (machine %d) log\n%s\n", a.Name, a.MachineID, tail(string(out)))
	}
	return b.String()
}

// WaitOnline waits until the agents' machines are online.
func (c *Cluster) WaitOnline(ctx context.Context, within time.Duration, agents ...*Agent) error {
	return poll(ctx, within, func() (bool, error) {
		for _, a := range agents {
			m, err := c.Client.FindMachineByID(ctx, a.MachineID)
			if err != nil || m.Status != suanli.MachineOnline {
				return false, nil
			}
		}
		return true, nil
	}, func() string { return fmt.Sprintf("%d machines online", len(agents)) })
}

// poll calls ok every 50ms until it says done, fails, or within passes.
func poll(ctx context.Context, within time.Duration, ok func() (bool, error), what func() string) error {
	deadline := time.Now().Add(within)
	for {
		done, err := ok()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return suanli.Errorf(suanli.EUNAVAILABLE, "not within %s: %s", within, what())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Server is the control plane process.
type Server struct {
	c    *Cluster
	home string
	// Addr is where it listens (the network's gateway address, so that
	// the agents reach it and a disconnected agent does not).
	Addr string
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

func (s *Server) logPath() string { return filepath.Join(s.home, "server.log") }

// Start starts the control plane (again, after Stop: same home and address)
// and waits until it serves.
func (s *Server) Start(ctx context.Context) error {
	o := s.c.Opts
	if err := os.MkdirAll(s.home, 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.c.bin, "server", "--home", s.home, "--addr", s.Addr, "--allow-simulated",
		"--heartbeat", o.Heartbeat.String(), "--suspect-after", o.SuspectAfter.String(), "--lost-after", o.LostAfter.String(),
		"--failover-grace", o.FailoverGrace.String(), "--settle-every", o.Settle.String())
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	s.cmd, s.log, s.done = cmd, logf, make(chan struct{})
	urlRe := regexp.MustCompile(`control plane at (\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := urlRe.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() {
		cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	select {
	case s.URL = <-found:
		return nil
	case <-s.done:
		return fmt.Errorf("suanli server exited at start: see %s", s.logPath())
	case <-time.After(30 * time.Second):
		s.Stop(true)
		return fmt.Errorf("suanli server did not start in 30s: see %s", s.logPath())
	case <-ctx.Done():
		s.Stop(true)
		return ctx.Err()
	}
}

// Stop stops the control plane: SIGKILL when kill is set (a crash),
// otherwise SIGINT (a clean shutdown, as for an upgrade), waiting for it to
// exit.
func (s *Server) Stop(kill bool) {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	if kill {
		s.cmd.Process.Signal(syscall.SIGKILL)
	} else {
		s.cmd.Process.Signal(os.Interrupt)
	}
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// Agent is one host: a container running `suanli agent`.
type Agent struct {
	c         *Cluster
	Index     int
	Name      string // a0, a1, …
	Container string
	// Home is the agent's home on this machine, mounted at /home in the
	// container: its credential, and the process runtime's instances
	// under agent/instances.
	Home      string
	MachineID int64
}

func (a *Agent) create(ctx context.Context) error {
	if err := os.MkdirAll(a.Home, 0o700); err != nil {
		return err
	}
	tok, err := a.c.Client.CreateJoinToken(ctx, time.Hour)
	if err != nil {
		return fmt.Errorf("join token: %w", err)
	}
	o := a.c.Opts
	_, err = docker(ctx, "run", "-d", "--name", a.Container, "--hostname", a.Name, "--label", LabelRun+"="+a.c.ID,
		"--network", a.c.network, "-v", a.Home+":/home", a.c.image,
		"--home", "/home", "agent", "--server", a.c.Server.URL, "--join-token", tok.Token, "--runtime", "process",
		"--fake-gpus", fmt.Sprintf("%s:%d", GPUModel, o.GPUs), "--ssh-addr", "off", "--fence-after", o.FenceAfter.String())
	return err
}

func (a *Agent) waitJoined(ctx context.Context, within time.Duration) error {
	return poll(ctx, within, func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(a.Home, "agent.json"))
		if err != nil {
			return false, nil
		}
		var st struct {
			MachineID int64 `json:"machine_id"`
		}
		if json.Unmarshal(b, &st) != nil || st.MachineID == 0 {
			return false, nil
		}
		a.MachineID = st.MachineID
		return true, nil
	}, func() string {
		out, _ := exec.Command("docker", "logs", "--tail", "20", a.Container).CombinedOutput()
		return fmt.Sprintf("agent %s joined; its log:\n%s", a.Name, out)
	})
}

// InstanceDir is where the agent's process runtime keeps the instance, on
// this machine.
func (a *Agent) InstanceDir(id int64) string {
	return filepath.Join(a.Home, "agent", "instances", fmt.Sprint(id))
}

// Holds reports whether the agent still has the instance (its directory).
func (a *Agent) Holds(id int64) bool {
	_, err := os.Stat(a.InstanceDir(id))
	return err == nil
}

// AgentByMachine returns the agent of a machine, or nil.
func (c *Cluster) AgentByMachine(id int64) *Agent {
	for _, a := range c.Agents {
		if a.MachineID == id {
			return a
		}
	}
	return nil
}

// logLines returns the agent's log lines (docker logs) that contain any of
// subs, joined, for a note.
func (a *Agent) logLines(subs ...string) string {
	out, _ := exec.Command("docker", "logs", a.Container).CombinedOutput()
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) {
				keep = append(keep, l)
				break
			}
		}
	}
	return strings.Join(keep, " | ")
}
