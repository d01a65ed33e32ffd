package docker_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
	"github.com/suanli/suanli/agent/docker"
	"github.com/suanli/suanli/agent/vault/vaulttest"
	"github.com/suanli/suanli/internal/testreq"
)

// One instance through its whole life: run, limits, ports, logs, exec,
// traffic, telemetry.
func TestRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runtime()
	ctx := t.Context()

	spec := e.spec(1)
	spec.Env["FOO"] = "bar"
	start := time.Now()
	MustEnsure(t, r, spec)
	t.Logf("create→running with a local image: %v", time.Since(start).Round(time.Millisecond))

	rep := report(t, r, 1)
	if rep.Status != suanli.StatusRunning || rep.StartedAt == nil {
		t.Fatalf("report = %+v, want running with StartedAt", rep)
	}
	ports, err := r.Ports(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	hp := ports[8080]
	if hp == 0 || !strings.Contains(rep.Message, fmt.Sprintf("8080→%d", hp)) {
		t.Errorf("Ports = %v, Message = %q: want 8080 mapped and shown", ports, rep.Message)
	}

	// Limits and isolation, as the daemon holds them.
	ins, err := e.cli.ContainerInspect(ctx, e.containerName(1), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := ins.Container.HostConfig
	if hc.NanoCPUs != 1e9 || hc.Memory != 128<<20 || hc.PidsLimit == nil || *hc.PidsLimit != docker.DefaultPidsLimit {
		t.Errorf("NanoCPUs, Memory, PidsLimit = %d, %d, %v; want 1e9, %d, %d", hc.NanoCPUs, hc.Memory, hc.PidsLimit, 128<<20, docker.DefaultPidsLimit)
	}
	if hc.Privileged || !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") {
		t.Errorf("Privileged = %v, SecurityOpt = %v; want unprivileged with no-new-privileges", hc.Privileged, hc.SecurityOpt)
	}
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || slices.Contains(hc.CapAdd, "CAP_NET_RAW") || !slices.Contains(hc.CapAdd, "CAP_SETUID") {
		t.Errorf("CapDrop = %v, CapAdd = %v; want ALL dropped and the allowlist added", hc.CapDrop, hc.CapAdd)
	}
	if string(hc.NetworkMode) != e.networkName(1) {
		t.Errorf("NetworkMode = %q, want the private network %q", hc.NetworkMode, e.networkName(1))
	}
	if size, ok := hc.StorageOpt["size"]; ok {
		if size != "1G" {
			t.Errorf("StorageOpt size = %q, want 1G", size)
		}
	} else if want := "disk 1 GB watched every 30s (storage driver " + r.StorageDriver() + " has no quota)"; !strings.Contains(rep.Message, want) {
		t.Errorf("no size storage option, and Message = %q does not say %q", rep.Message, want)
	}
	if l := ins.Container.Config.Labels; l[docker.LabelInstance] != "1" || l[docker.LabelManaged] != "true" {
		t.Errorf("labels = %v", l)
	}

	// The mapped port answers from the host, and the workload knows it.
	body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/id", hp))
	if body != "1" {
		t.Errorf("GET /id on host port %d = %q, want 1", hp, body)
	}
	if code, out := execOut(t, r, 1, "/t", "env", "SUANLI_TCP_PORT_8080"); code != 0 || out != strconv.Itoa(hp) {
		t.Errorf("SUANLI_TCP_PORT_8080 in the container = %q (exit %d), want %d", out, code, hp)
	}
	if _, out := execOut(t, r, 1, "/t", "env", "FOO"); out != "bar" {
		t.Errorf("FOO in the container = %q, want bar", out)
	}

	// Logs: stdout and stderr, and reads from an offset.
	log := waitLog(t, r, 1, "stderr of instance 1")
	if !strings.Contains(log, "hello from instance 1\n") {
		t.Errorf("log = %q, want the stdout greeting", log)
	}
	tail, err := r.ReadLog(ctx, 1, 6, 4)
	if err != nil || string(tail) != log[6:10] {
		t.Errorf("ReadLog(1, 6, 4) = %q, %v; want %q", tail, err, log[6:10])
	}
	if b, err := r.ReadLog(ctx, 1, int64(len(log)+100), 10); err != nil || len(b) != 0 {
		t.Errorf("ReadLog past the end = %q, %v; want nothing", b, err)
	}

	// Exec: exit codes, output, stdin.
	if code, out := execOut(t, r, 1, "/t", "exit", "3"); code != 3 || out != "exiting with 3\n" {
		t.Errorf("exec exit 3 = %d, %q", code, out)
	}
	var out strings.Builder
	code, err := r.Exec(ctx, 1, []string{"/t", "stdin"}, strings.NewReader("ping"), &out, nil)
	if err != nil || code != 0 || out.String() != "ping" {
		t.Errorf("exec stdin = %d, %q, %v; want 0, ping", code, out.String(), err)
	}
	checkTTY(t, r)
	if code, _ := execOut(t, r, 1, "/no/such/binary"); code != 126 && code != 127 {
		t.Errorf("exec of a missing binary exited %d, want 126 or 127", code)
	}

	// Egress: 3 MB sent by the container are counted.
	before, err := r.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const blob = 3_000_000
	if n := len(httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/blob?n=%d", hp, blob))); n != blob {
		t.Fatalf("GET /blob returned %d bytes, want %d", n, blob)
	}
	var after map[int64]suanli.UsageReport
	waitFor(t, 5*time.Second, func() (bool, string) { // counters are sampled once a second
		after, err = r.Usage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d := after[1].TxBytes - before[1].TxBytes
		return d >= blob, fmt.Sprintf("TxBytes grew by %d for a %d-byte response, want about that", d, blob)
	})
	if d := after[1].TxBytes - before[1].TxBytes; d > 2*blob {
		t.Errorf("TxBytes grew by %d for a %d-byte response, want about that", d, blob)
	}
	if after[1].RxBytes <= 0 || after[1].InstanceID != 1 {
		t.Errorf("usage = %+v, want received bytes counted", after[1])
	}

	// Telemetry, from the sampled stats: the 3 MB served count as sent
	// bytes, and 4 MB the workload writes (to its volume, and syncs) as
	// written bytes.
	const written = 4 << 20
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/write?n=%d", hp, written)); got != fmt.Sprintf("wrote %d", written) {
		t.Fatalf("GET /write = %q", got)
	}
	waitFor(t, 5*time.Second, func() (bool, string) {
		rep = report(t, r, 1)
		tm := rep.Telemetry
		return tm != nil && tm.MemoryMB >= 0 && tm.MemoryMB < 128 && tm.CPUPercent >= 0 &&
				tm.NetTxBytes >= blob && tm.NetRxBytes > 0 && tm.DiskWriteBytes >= written,
			fmt.Sprintf("telemetry = %+v, want a sample within the limits, %d bytes sent and %d written", tm, blob, written)
	})
	if tm := rep.Telemetry; tm.NetTxBytes > 2*blob || tm.DiskWriteBytes > 4*written {
		t.Errorf("telemetry = %+v, want about %d bytes sent and %d written", tm, blob, written)
	}
	// The daemon here may report block I/O itself; the fallback, summing
	// /proc/<pid>/io over the container's cgroup, sees the write too.
	if os.Geteuid() == 0 {
		_, wr, found := docker.ProcDiskBytes(ins.Container.State.Pid, ins.Container.ID)
		if !found || wr < written {
			t.Errorf("ProcDiskBytes(init pid %d) = %d written, cgroup found %v; want at least %d", ins.Container.State.Pid, wr, found, written)
		}
		if _, _, found := docker.ProcDiskBytes(ins.Container.State.Pid, "not-this-container"); found {
			t.Errorf("ProcDiskBytes found a cgroup for a container id its path does not name")
		}
	}

	// Ensure is idempotent.
	MustEnsure(t, r, spec)
	ins2, _ := e.cli.ContainerInspect(ctx, e.containerName(1), client.ContainerInspectOptions{})
	if ins2.Container.ID != ins.Container.ID || ins2.Container.State.StartedAt != ins.Container.State.StartedAt {
		t.Errorf("a second Ensure replaced or restarted the container")
	}
}

// Stop keeps the writable layer: a file written before a stop is there
// after the start; the log keeps growing at stable offsets; ports stay.
func TestStopStartKeepsFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runtime()
	ctx := t.Context()
	spec := e.spec(2)
	MustEnsure(t, r, spec)
	if code, _ := execOut(t, r, 2, "/t", "write", "/keep.txt", "still here"); code != 0 {
		t.Fatalf("write exited %d", code)
	}
	ports1, _ := r.Ports(ctx, 2)
	first := waitLog(t, r, 2, "stderr of instance 2")

	spec.Desired = suanli.DesiredStopped
	start := time.Now()
	MustEnsure(t, r, spec)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("stop took %v, want well under the 3 s grace (the workload exits on SIGTERM)", d)
	}
	if rep := report(t, r, 2); rep.Status != suanli.StatusStopped || rep.ExitCode != nil {
		t.Fatalf("after stop: %+v, want stopped", rep)
	}
	MustEnsure(t, r, spec) // idempotent
	if _, err := r.Exec(ctx, 2, []string{"/t", "env", "X"}, nil, nil, nil); suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Errorf("Exec on a stopped instance: %v, want conflict", err)
	}

	spec.Desired = suanli.DesiredRunning
	MustEnsure(t, r, spec)
	if rep := report(t, r, 2); rep.Status != suanli.StatusRunning {
		t.Fatalf("after start: %+v, want running", rep)
	}
	if code, out := execOut(t, r, 2, "/t", "cat", "/keep.txt"); code != 0 || out != "still here" {
		t.Errorf("cat /keep.txt after stop/start = %d, %q", code, out)
	}
	if ports2, _ := r.Ports(ctx, 2); ports2[8080] != ports1[8080] {
		t.Errorf("host port changed across stop/start: %v → %v", ports1, ports2)
	}
	// Both runs in one log, the first run's bytes where they were.
	var log string
	waitFor(t, 10*time.Second, func() (bool, string) {
		b, _ := r.ReadLog(ctx, 2, 0, 1<<20)
		log = string(b)
		return strings.Count(log, "stderr of instance 2") == 2 && strings.Count(log, "hello from instance 2") == 2,
			fmt.Sprintf("log = %q, want the greetings of two runs", log)
	})
	if !strings.Contains(log, "got SIGTERM, bye\n") || !strings.HasPrefix(log, first) {
		t.Errorf("log after restart = %q, want it to start with %q", log, first)
	}
}

// A workload that ends by itself is reported exited with its code, and not
// restarted until the control plane asks for stopped, then running.
func TestExited(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runtime()
	spec := e.spec(3)
	spec.Cmd = []string{"exit", "7"}
	before := time.Now().Add(-time.Second) // the daemon's clock is this machine's
	MustEnsure(t, r, spec)
	var rep suanli.InstanceReport
	waitFor(t, 10*time.Second, func() (bool, string) {
		rep = report(t, r, 3)
		return rep.Status == suanli.StatusExited, fmt.Sprintf("report = %+v, want exited", rep)
	})
	if rep.ExitCode == nil || *rep.ExitCode != 7 || !strings.Contains(rep.Message, "code 7") {
		t.Errorf("exited report = %+v, want exit code 7", rep)
	}
	// When it ended, so that an exit during an outage is billed to then.
	if rep.EndedAt == nil || rep.EndedAt.Before(before) || rep.EndedAt.After(time.Now()) {
		t.Errorf("exited report's EndedAt = %v, want the container's finish, after %v", rep.EndedAt, before)
	}
	waitLog(t, r, 3, "exiting with 7\n")

	MustEnsure(t, r, spec) // still desired running: stays exited
	if rep := report(t, r, 3); rep.Status != suanli.StatusExited {
		t.Errorf("after Ensure(running) on an exited instance: %+v, want still exited", rep)
	}
	spec.Desired = suanli.DesiredStopped
	MustEnsure(t, r, spec)
	if rep := report(t, r, 3); rep.Status != suanli.StatusStopped {
		t.Errorf("after Ensure(stopped): %+v, want stopped", rep)
	}
	spec.Desired = suanli.DesiredRunning
	MustEnsure(t, r, spec)
	waitLog(t, r, 3, "exiting with 7\nexiting with 7\n") // ran a second time
}

// Remove deletes the container, its anonymous volume, its network and its
// log; removing again is fine.
func TestRemove(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runtime()
	ctx := t.Context()
	MustEnsure(t, r, e.spec(4))
	waitLog(t, r, 4, "hello")
	ins, err := e.cli.ContainerInspect(ctx, e.containerName(4), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var vol string
	for _, m := range ins.Container.Mounts {
		if m.Destination == "/vol" {
			vol = m.Name
		}
	}
	if vol == "" {
		t.Fatalf("no anonymous volume at /vol: %+v", ins.Container.Mounts)
	}

	if err := r.Remove(ctx, 4); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := e.cli.ContainerInspect(ctx, e.containerName(4), client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("container after Remove: %v, want not found", err)
	}
	if _, err := e.cli.VolumeInspect(ctx, vol, client.VolumeInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("anonymous volume %s after Remove: %v, want not found", vol, err)
	}
	if _, err := e.cli.NetworkInspect(ctx, e.networkName(4), client.NetworkInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("network after Remove: %v, want not found", err)
	}
	if _, err := r.ReadLog(ctx, 4, 0, 100); suanli.ErrorCode(err) != suanli.ENOTFOUND {
		t.Errorf("ReadLog after Remove: %v, want not_found", err)
	}
	if reps, _ := r.Status(ctx); len(reps) != 0 {
		t.Errorf("Status after Remove = %+v, want nothing", reps)
	}
	if err := r.Remove(ctx, 4); err != nil {
		t.Errorf("second Remove: %v", err)
	}
	if err := r.Remove(ctx, 999); err != nil {
		t.Errorf("Remove of an unknown instance: %v", err)
	}
}

// An image for another architecture is refused before anything is created,
// by Preflight and by Ensure.
func TestArchMismatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runtime()
	ctx := t.Context()
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	ref := "suanli-test/arch-" + other + ":" + e.ns
	// The builder does not run anything for a FROM scratch image, so a
	// placeholder file is enough: the image's platform is what is checked.
	if err := BuildImage(ctx, e.cli, ref, "linux/"+other, "FROM scratch\nCOPY t /t\nCMD [\"/t\"]\n",
		map[string][]byte{"t": []byte("not a program")}); err != nil {
		t.Fatal(err)
	}
	spec := e.spec(5)
	spec.Image = ref
	want := fmt.Sprintf("image %s is linux/%s, host is %s: choose an %s or multi-arch image", ref, other, r.HostPlatform(), runtime.GOARCH)
	err := r.Preflight(ctx, spec)
	if suanli.ErrorCode(err) != suanli.EINVALID || suanli.ErrorMessage(err) != want {
		t.Errorf("Preflight = %v, want invalid: %q", err, want)
	}
	err = r.Ensure(ctx, spec)
	if suanli.ErrorCode(err) != suanli.EINVALID || suanli.ErrorMessage(err) != want {
		t.Errorf("Ensure = %v, want invalid: %q", err, want)
	}
	if _, err := e.cli.ContainerInspect(ctx, e.containerName(5), client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("a refused instance left a container: %v", err)
	}
	if _, err := e.cli.NetworkInspect(ctx, e.networkName(5), client.NetworkInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("a refused instance left a network: %v", err)
	}
	if err := r.Preflight(ctx, e.spec(6)); err != nil {
		t.Errorf("Preflight of the host-arch test image: %v", err)
	}
}

// Bad specs and images that cannot be had are refused with a message that
// says so.
func TestRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runtime()
	ctx := t.Context()
	reg := NewRegistry(t)
	tests := []struct {
		name string
		edit func(*suanli.InstanceSpec)
		code string
		msg  string // regexp
	}{
		{"no image", func(s *suanli.InstanceSpec) { s.Image = "" }, suanli.EINVALID, `names no image`},
		{"bad port", func(s *suanli.InstanceSpec) { s.Env[docker.EnvPorts] = "8080,http" }, suanli.EINVALID, `"http" is not a TCP port`},
		{"bad desired", func(s *suanli.InstanceSpec) { s.Desired = "paused" }, suanli.EINVALID, `want running or stopped`},
		{"not in registry", func(s *suanli.InstanceSpec) { s.Image = reg.Host + "/suanli-test/absent:v1" }, suanli.EINVALID,
			`image 127\.0\.0\.1:\d+/suanli-test/absent:v1: registry 127\.0\.0\.1:\d+ has no repository suanli-test/absent \(.*\): check the image name`},
		{"huge disk", func(s *suanli.InstanceSpec) { s.DiskGB = 1 << 30 }, suanli.ECONFLICT, `asks 1073741824 GB of disk, the host has .* free`},
	}
	for _, tt := range tests {
		spec := e.spec(7)
		tt.edit(&spec)
		err := r.Ensure(ctx, spec)
		if suanli.ErrorCode(err) != tt.code || !regexp.MustCompile(tt.msg).MatchString(suanli.ErrorMessage(err)) {
			t.Errorf("%s: Ensure = %v (%s), want %s matching %q", tt.name, err, suanli.ErrorCode(err), tt.code, tt.msg)
		}
	}
	if reps, _ := r.Status(ctx); len(reps) != 0 {
		t.Errorf("refused instances left %+v", reps)
	}
}

// Pulling: Status reports progress while the layer downloads, Preflight asks
// the registry for the platform without pulling, and an image for another
// architecture is refused before its layers are fetched.
func TestPull(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runtime()
	ctx := t.Context()
	reg := NewRegistry(t)
	ref := reg.AddImage("suanli-test/pull-"+e.ns, "v1", "linux", runtime.GOARCH, 3<<20, true)
	trackImage(ref)
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	armRef := reg.AddImage("suanli-test/pull-arm-"+e.ns, "v1", "linux", other, 1000, false)

	if err := r.Preflight(ctx, suanli.InstanceSpec{ID: 8, Image: ref}); err != nil {
		t.Errorf("Preflight(%s) = %v", ref, err)
	}
	err := r.Preflight(ctx, suanli.InstanceSpec{ID: 8, Image: armRef})
	if want := "is linux/" + other + ", host is"; suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(suanli.ErrorMessage(err), want) {
		t.Errorf("Preflight(%s) = %v, want invalid containing %q", armRef, err, want)
	}

	spec := e.spec(8)
	spec.Image = ref
	spec.Desired = suanli.DesiredStopped // the image holds no program; created is enough
	done := make(chan error, 1)
	go func() { done <- r.Ensure(ctx, spec) }()
	waitFor(t, 20*time.Second, func() (bool, string) {
		reps, err := r.Status(ctx)
		if err != nil || len(reps) == 0 {
			return false, fmt.Sprintf("Status = %+v, %v; want pulling", reps, err)
		}
		ok := reps[0].Status == suanli.StatusPulling && regexp.MustCompile(`^pulling \d+% of 3\.\d MB$`).MatchString(reps[0].Message)
		return ok, fmt.Sprintf("report = %+v, want pulling N%% of 3.x MB", reps[0])
	})
	reg.Release()
	if err := <-done; err != nil {
		t.Fatalf("Ensure after pull: %v", err)
	}
	if rep := report(t, r, 8); rep.Status != suanli.StatusStopped {
		t.Errorf("after pull: %+v, want stopped (created)", rep)
	}
}

// Two instances cannot reach each other; the host can reach both. Their
// networks come from the subnet pool.
func TestIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pool := netip.MustParsePrefix("172.16.240.0/20")
	r := e.runtime(func(o *docker.Options) { o.SubnetPool = pool.String() })
	ctx := t.Context()
	MustEnsure(t, r, e.spec(10))
	MustEnsure(t, r, e.spec(11))
	ip := func(id int64) string {
		ins, err := e.cli.ContainerInspect(ctx, e.containerName(id), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ep := ins.Container.NetworkSettings.Networks[e.networkName(id)]
		if ep == nil || !ep.IPAddress.IsValid() {
			t.Fatalf("instance %d has no address on %s", id, e.networkName(id))
		}
		if !pool.Contains(ep.IPAddress) {
			t.Errorf("instance %d has address %s, want one in the pool %s", id, ep.IPAddress, pool)
		}
		return ep.IPAddress.String()
	}
	a, b := ip(10), ip(11)
	waitLog(t, r, 11, "hello")
	// The control: B serves, and the host reaches it.
	if body := httpGet(t, "http://"+net.JoinHostPort(b, "8080")+"/id"); body != "11" {
		t.Fatalf("host → instance 11 at %s: %q", b, body)
	}
	// A reaches itself but not B.
	if code, out := execOut(t, r, 10, "/t", "dial", net.JoinHostPort(a, "8080")); code != 0 {
		t.Errorf("instance 10 → itself: exit %d, %s", code, out)
	}
	if code, out := execOut(t, r, 10, "/t", "dial", net.JoinHostPort(b, "8080")); code == 0 {
		t.Errorf("instance 10 → instance 11 at %s: connected (%s), want refused", b, out)
	}
	if code, out := execOut(t, r, 11, "/t", "dial", net.JoinHostPort(a, "8080")); code == 0 {
		t.Errorf("instance 11 → instance 10 at %s: connected (%s), want refused", a, out)
	}
}

// A fresh Runtime (an agent restart) re-adopts running and stopped
// instances, keeps log offsets without duplicating lines, and tells stopped
// from exited.
func TestReadopt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r1 := e.runtime()
	ctx := t.Context()
	MustEnsure(t, r1, e.spec(12))
	stopped := e.spec(13)
	MustEnsure(t, r1, stopped)
	stopped.Desired = suanli.DesiredStopped
	MustEnsure(t, r1, stopped)
	log1 := waitLog(t, r1, 12, "stderr of instance 12")
	tx1, _ := r1.Usage(ctx)
	ins1, _ := e.cli.ContainerInspect(ctx, e.containerName(12), client.ContainerInspectOptions{})
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}

	r2 := e.runtime()
	reps, err := r2.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 2 || reps[0].ID != 12 || reps[0].Status != suanli.StatusRunning || reps[1].ID != 13 || reps[1].Status != suanli.StatusStopped {
		t.Fatalf("Status after restart = %+v, want 12 running and 13 stopped", reps)
	}
	MustEnsure(t, r2, e.spec(12))
	ins2, _ := e.cli.ContainerInspect(ctx, e.containerName(12), client.ContainerInspectOptions{})
	if ins2.Container.ID != ins1.Container.ID || ins2.Container.State.StartedAt != ins1.Container.State.StartedAt {
		t.Errorf("Ensure after restart replaced or restarted the container")
	}
	// New output lands after the old, nothing twice.
	if code, _ := execOut(t, r2, 12, "/t", "exit", "0"); code != 0 {
		t.Fatal("exec failed")
	}
	spec := e.spec(12)
	spec.Desired = suanli.DesiredStopped
	MustEnsure(t, r2, spec)
	log2 := waitLog(t, r2, 12, "got SIGTERM, bye\n")
	if !strings.HasPrefix(log2, log1) || strings.Count(log2, "hello from instance 12") != 1 {
		t.Errorf("log after restart = %q, want %q then the rest once", log2, log1)
	}
	tx2, _ := r2.Usage(ctx)
	if tx2[12].TxBytes < tx1[12].TxBytes {
		t.Errorf("traffic counters went back across the restart: %d → %d", tx1[12].TxBytes, tx2[12].TxBytes)
	}
}

// With ReadOnlyRootfs the image's files cannot be changed; /tmp can.
func TestReadOnlyRootfs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runtime(func(o *docker.Options) { o.ReadOnlyRootfs = true; o.PidsLimit = 64 })
	MustEnsure(t, r, e.spec(14))
	if code, _ := execOut(t, r, 14, "/t", "write", "/x", "no"); code == 0 {
		t.Errorf("write to / succeeded on a read-only root filesystem")
	}
	if code, _ := execOut(t, r, 14, "/t", "write", "/tmp/x", "yes"); code != 0 {
		t.Errorf("write to /tmp exited %d, want 0", code)
	}
	ins, err := e.cli.ContainerInspect(t.Context(), e.containerName(14), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hc := ins.Container.HostConfig; !hc.ReadonlyRootfs || hc.PidsLimit == nil || *hc.PidsLimit != 64 {
		t.Errorf("ReadonlyRootfs, PidsLimit = %v, %v; want true, 64", hc.ReadonlyRootfs, hc.PidsLimit)
	}
}

// With BlockHostAccess an instance cannot open connections to the host's
// own ports (the agent's), while its published ports still work; without
// it, it can. Remove deletes the rule.
func TestBlockHostAccess(t *testing.T) {
	t.Parallel()
	if out, err := exec.Command("iptables", "-w", "5", "-S", "INPUT").CombinedOutput(); err != nil {
		testreq.Missing(t, "docker", fmt.Sprintf("iptables not usable (%v: %s): run as root", err, out))
	}
	l, err := net.Listen("tcp", ":0") // stands for the agent's own port
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)

	blocked, open := newEnv(t), newEnv(t)
	rb := blocked.runtime(func(o *docker.Options) { o.BlockHostAccess = true })
	ro := open.runtime()
	MustEnsure(t, rb, blocked.spec(15))
	MustEnsure(t, ro, open.spec(16))
	gateway := func(e *testEnv, id int64) string {
		ins, err := e.cli.ContainerInspect(t.Context(), e.containerName(id), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ins.Container.NetworkSettings.Networks[e.networkName(id)].Gateway.String()
	}
	if code, out := execOut(t, ro, 16, "/t", "dial", net.JoinHostPort(gateway(open, 16), port)); code != 0 {
		t.Fatalf("control: an instance without blocking cannot reach the host port: %s", out)
	}
	if code, out := execOut(t, rb, 15, "/t", "dial", net.JoinHostPort(gateway(blocked, 15), port)); code == 0 {
		t.Errorf("instance with host blocking reached the host's port %s: %s", port, out)
	}
	// Published ports are public, so an instance without blocking reaches
	// another's through the host; with blocking, not even that.
	po, _ := ro.Ports(t.Context(), 16)
	if code, out := execOut(t, rb, 15, "/t", "dial", net.JoinHostPort(gateway(blocked, 15), strconv.Itoa(po[8080]))); code == 0 {
		t.Errorf("instance with host blocking reached another's published port %d through the host: %s", po[8080], out)
	}
	ports, _ := rb.Ports(t.Context(), 15)
	if body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/id", ports[8080])); body != "15" {
		t.Errorf("published port of a blocked instance answered %q, want 15", body)
	}

	ins, _ := blocked.cli.NetworkInspect(t.Context(), blocked.networkName(15), client.NetworkInspectOptions{})
	bridge := ins.Network.Options["com.docker.network.bridge.name"]
	if err := rb.Remove(t.Context(), 15); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("iptables", "-w", "5", "-S", "INPUT").CombinedOutput(); err != nil || bridge == "" || strings.Contains(string(out), bridge) {
		t.Errorf("after Remove, INPUT still names bridge %q (or none was set): %s", bridge, out)
	}
}

// Available answers for the daemon the tests use.
func TestAvailable(t *testing.T) {
	MustDocker(t)
	if !docker.Available(t.Context()) {
		t.Errorf("Available = false with a daemon answering")
	}
}

func httpGet(tb testing.TB, url string) string {
	tb.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	var last error
	for range 50 { // the port opens a moment after the container starts
		resp, err := c.Get(url)
		if err == nil {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				tb.Fatalf("GET %s: %v", url, err)
			}
			return string(b)
		}
		last = err
		if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "connection re") && !strings.Contains(err.Error(), "server closed idle connection") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("GET %s: %v", url, last)
	return ""
}

// TestVolumeSurvivesDestroy: a volume mounted into an instance keeps what
// the workload wrote after the instance is destroyed, is mounted again into
// a new instance, and is wiped and removed on RemoveVolume.
func TestVolumeSurvivesDestroy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runtime()
	ctx := t.Context()
	var _ agent.VolumeManager = r
	var _ agent.Preflighter = r
	var _ agent.Execer = r
	vol := suanli.VolumeSpec{ID: 7000 + int64(os.Getpid()%1000), Name: "data", SizeGB: 1}
	if err := r.EnsureVolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.RemoveVolume(context.Background(), vol.ID) })
	spec := e.spec(31)
	spec.Volumes = []suanli.VolumeMount{{Name: "data", Path: "/data", ID: vol.ID}}
	MustEnsure(t, r, spec)
	if code, _ := execOut(t, r, 31, "/t", "write", "/data/kept.txt", "survives"); code != 0 {
		t.Fatalf("write to the volume exited %d", code)
	}
	if err := r.Remove(ctx, 31); err != nil {
		t.Fatal(err)
	}
	ids, err := r.Volumes(ctx)
	if err != nil || !slices.Contains(ids, vol.ID) {
		t.Fatalf("Volumes after destroy = %v, %v: the volume must survive its instance", ids, err)
	}
	spec2 := e.spec(32)
	spec2.Volumes = spec.Volumes
	MustEnsure(t, r, spec2)
	if code, out := execOut(t, r, 32, "/t", "cat", "/data/kept.txt"); code != 0 || out != "survives" {
		t.Fatalf("second instance reads %d %q", code, out)
	}
	if err := r.Remove(ctx, 32); err != nil {
		t.Fatal(err)
	}
	rel, err := r.RemoveVolume(ctx, vol.ID)
	if err != nil || rel.ID != vol.ID || rel.Kind != suanli.ReleaseVolume || (rel.Method != suanli.ReleaseOverwrite && os.Geteuid() == 0) {
		t.Fatalf("RemoveVolume: %+v %v (as root the agent reaches the mount point: it must overwrite)", rel, err)
	}
	if ids, _ := r.Volumes(ctx); slices.Contains(ids, vol.ID) {
		t.Errorf("volume still listed after RemoveVolume")
	}
}

// checkTTY runs a command on a terminal in instance 1 (docker exec -t):
// it sees a terminal of the asked size and TERM, a window change reaches it
// as SIGWINCH with the new size, input reaches it, and its exit code comes
// back. Without a terminal the same command says so.
func checkTTY(t *testing.T, r *docker.Runtime) {
	t.Helper()
	if code, out := execOut(t, r, 1, "/t", "tty"); code != 3 || out != "no tty\n" {
		t.Errorf("exec tty without a terminal = %d, %q; want 3, no tty", code, out)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	resize := make(chan [2]uint16, 1)
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := r.ExecTTY(t.Context(), 1, []string{"/t", "tty"}, nil, docker.Terminal{Term: "xterm-256color", Cols: 101, Rows: 33, Resize: resize}, inR, outW)
		outW.Close()
		done <- result{code, err}
	}()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- strings.TrimRight(sc.Text(), "\r")
		}
		close(lines)
	}()
	var seen []string
	expect := func(what string, ok func(line string) bool) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case l, open := <-lines:
				if !open {
					t.Fatalf("terminal closed before %s; it said %q", what, seen)
				}
				seen = append(seen, l)
				if ok(l) {
					return
				}
			case <-timeout:
				t.Fatalf("no %s from the terminal within 10 s; it said %q", what, seen)
			}
		}
	}
	// Daemons before API 1.42 size the terminal just after the start, so
	// the size may come as the first line or as a window change after it.
	expect("terminal with TERM", func(l string) bool { return strings.HasPrefix(l, "tty ") && strings.HasSuffix(l, " xterm-256color") })
	if !strings.Contains(seen[len(seen)-1], " 101x33 ") {
		expect("size 101x33", func(l string) bool { return l == "winch 101x33" })
	}
	resize <- [2]uint16{140, 50}
	expect("window change to 140x50", func(l string) bool { return l == "winch 140x50" })
	io.WriteString(inW, "bye\n")
	expect("bye", func(l string) bool { return l == "bye" })
	inW.Close()
	select {
	case res := <-done:
		if res.err != nil || res.code != 0 {
			t.Errorf("ExecTTY = %d, %v; want 0", res.code, res.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ExecTTY did not return after the command exited")
	}
}

// TestEncryptedWorkspace: with a vault, an instance gets an encrypted
// workspace at /workspace and an encrypted volume (a real loop image and the
// kernel's fscrypt). The workload reads and writes plaintext, the image holds
// none of it, stop/start keeps it, and destroy and volume delete are
// crypto-erases that say what stayed outside (the writable layer).
func TestEncryptedWorkspace(t *testing.T) {
	v, vdir := vaulttest.Open(t)
	e := newEnv(t)
	r := e.runtime(func(o *docker.Options) { o.Vault = v })
	ctx := t.Context()
	vol := suanli.VolumeSpec{ID: 8000 + int64(os.Getpid()%1000), Name: "data", SizeGB: 1, Key: vaulttest.Key(t)}
	if err := r.EnsureVolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.RemoveVolume(context.Background(), vol.ID) })
	spec := e.spec(41)
	spec.DiskKey = vaulttest.Key(t)
	spec.Volumes = []suanli.VolumeMount{{Name: "data", Path: "/data", ID: vol.ID}}
	MustEnsure(t, r, spec)
	marker := strings.Repeat("secret-"+randHex(8)+";", 64)
	for _, p := range []string{"/workspace/w.txt", "/data/v.txt"} {
		if code, out := execOut(t, r, 41, "/t", "write", p, marker); code != 0 {
			t.Fatalf("write %s exited %d: %s", p, code, out)
		}
	}
	if _, out := execOut(t, r, 41, "/t", "env", "SUANLI_WORKSPACE"); out != "/workspace" {
		t.Errorf("the workload is not told where its encrypted disk is: %s", out)
	}
	exec.Command("sync").Run()
	img, err := os.ReadFile(filepath.Join(vdir, "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(img), marker[:40]) {
		t.Fatalf("plaintext on the vault's image: the workspace or the volume is not encrypted")
	}
	spec.Desired = suanli.DesiredStopped
	MustEnsure(t, r, spec)
	spec.Desired = suanli.DesiredRunning
	MustEnsure(t, r, spec)
	if code, out := execOut(t, r, 41, "/t", "cat", "/workspace/w.txt"); code != 0 || out != marker {
		t.Fatalf("after stop and start the workspace reads %d %.40q", code, out)
	}
	rel, err := r.Release(ctx, 41)
	if err != nil || rel.Method != suanli.ReleaseCryptoErase || !strings.Contains(rel.Detail, "writable layer") {
		t.Fatalf("Release = %+v, %v; want a crypto-erase that names the writable layer", rel, err)
	}
	if objs, _ := v.Objects(); slices.Contains(objs, "instance-41") {
		t.Errorf("the workspace is still in the vault: %v", objs)
	}
	spec2 := e.spec(42)
	spec2.DiskKey = vaulttest.Key(t)
	spec2.Volumes = spec.Volumes
	MustEnsure(t, r, spec2)
	if code, out := execOut(t, r, 42, "/t", "cat", "/data/v.txt"); code != 0 || out != marker {
		t.Fatalf("the encrypted volume after its first instance's release reads %d %.40q", code, out)
	}
	if code, _ := execOut(t, r, 42, "/t", "cat", "/workspace/w.txt"); code == 0 {
		t.Errorf("a new instance sees the released instance's workspace")
	}
	if err := r.Remove(ctx, 42); err != nil {
		t.Fatal(err)
	}
	vrel, err := r.RemoveVolume(ctx, vol.ID)
	if err != nil || vrel.Method != suanli.ReleaseCryptoErase {
		t.Fatalf("RemoveVolume = %+v, %v; want a crypto-erase", vrel, err)
	}
	if ids, _ := r.Volumes(ctx); slices.Contains(ids, vol.ID) {
		t.Errorf("volume still listed after RemoveVolume")
	}
}

// TestFence: the watchdog's Fence, from outside the runtime, stops the
// namespace's running containers, and the runtime then reports them
// stopped (not exited); another namespace's containers are left alone.
func TestFence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runtime()
	MustEnsure(t, r, e.spec(51))
	other := newEnv(t)
	ro := other.runtime()
	MustEnsure(t, ro, other.spec(51))
	n, err := docker.Fence(t.Context(), docker.Options{DataDir: e.dataDir, Namespace: e.ns}, 2*time.Second)
	if err != nil || n != 1 {
		t.Fatalf("Fence = %d, %v; want 1 container stopped", n, err)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		rep := report(t, r, 51)
		return rep.Status == suanli.StatusStopped, "instance 51 " + rep.Status
	})
	if rep := report(t, ro, 51); rep.Status != suanli.StatusRunning {
		t.Errorf("the other namespace's instance is %s, want running", rep.Status)
	}
}
