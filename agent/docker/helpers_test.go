package docker_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/docker"
	"github.com/suanli/suanli/internal/testreq"
)

// Images built (or pulled) by the tests, removed by TestMain at the end.
var (
	imagesMu sync.Mutex
	images   []string
	tmpDirs  []string
)

func TestMain(m *testing.M) {
	code := m.Run()
	imagesMu.Lock()
	if len(images) > 0 {
		if cli, err := client.New(client.FromEnv); err == nil {
			for _, img := range images {
				cli.ImageRemove(context.Background(), img, client.ImageRemoveOptions{Force: true, PruneChildren: true})
			}
			cli.Close()
		}
	}
	for _, d := range tmpDirs {
		os.RemoveAll(d)
	}
	imagesMu.Unlock()
	os.Exit(code)
}

func trackImage(ref string) {
	imagesMu.Lock()
	images = append(images, ref)
	imagesMu.Unlock()
}

// MustDocker returns a client of the daemon in the environment, or ends the
// test through testreq.Missing when none answers.
func MustDocker(tb testing.TB) *client.Client {
	tb.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		testreq.Missing(tb, "docker", "docker client: "+err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		testreq.Missing(tb, "docker", "no Docker daemon answers at DOCKER_HOST or /var/run/docker.sock: start dockerd ("+err.Error()+")")
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// testEnv is one test's runtime namespace on the shared daemon.
type testEnv struct {
	t       *testing.T
	cli     *client.Client
	ns      string
	dataDir string
	image   string
}

// newEnv prepares a namespace, a data dir and the test image, and sweeps
// every container and network of the namespace at the end.
func newEnv(t *testing.T) *testEnv {
	t.Helper()
	cli := MustDocker(t)
	e := &testEnv{t: t, cli: cli, ns: "t" + randHex(4), dataDir: t.TempDir()}
	e.image = MustTestImage(t, cli)
	t.Cleanup(e.sweep)
	return e
}

// sweep removes what the namespace left behind (a failed test's instances).
func (e *testEnv) sweep() {
	ctx := context.Background()
	f := client.Filters{}.Add("label", docker.LabelNamespace+"="+e.ns)
	cs, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err == nil {
		for _, c := range cs.Items {
			e.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
	ns, err := e.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err == nil {
		for _, n := range ns.Items {
			e.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			if b := n.Options["com.docker.network.bridge.name"]; b != "" {
				deleteRules(b)
			}
		}
	}
}

// deleteRules deletes the INPUT rules that name bridge (a failed
// BlockHostAccess test's).
func deleteRules(bridge string) {
	out, err := exec.Command("iptables", "-w", "5", "-S", "INPUT").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "-A INPUT ") && strings.Contains(line, " "+bridge+" ") {
			// The comment is the only quoted argument; keep it whole.
			args := strings.Fields(strings.TrimPrefix(line, "-A "))
			if i := strings.Index(line, `"`); i >= 0 {
				j := strings.LastIndex(line, `"`)
				args = append(strings.Fields(strings.TrimPrefix(line[:i], "-A ")), line[i+1:j])
				args = append(args, strings.Fields(line[j+1:])...)
			}
			exec.Command("iptables", append([]string{"-w", "5", "-D"}, args...)...).Run()
		}
	}
}

// runtime starts a Runtime on the env's namespace and data dir, closed at
// the end of the test.
func (e *testEnv) runtime(edits ...func(*docker.Options)) *docker.Runtime {
	e.t.Helper()
	opts := docker.Options{
		Logger:    slog.New(slog.NewTextHandler(e.t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		DataDir:   e.dataDir,
		Namespace: e.ns,
	}
	for _, edit := range edits {
		edit(&opts)
	}
	r, err := docker.New(e.t.Context(), opts)
	if err != nil {
		e.t.Fatalf("docker.New: %v", err)
	}
	e.t.Cleanup(func() { r.Close() })
	return r
}

// spec is a small running instance of the test image serving on 8080.
func (e *testEnv) spec(id int64) suanli.InstanceSpec {
	return suanli.InstanceSpec{
		ID:        id,
		Desired:   suanli.DesiredRunning,
		Image:     e.image,
		Env:       map[string]string{docker.EnvPorts: "8080"},
		DiskGB:    1,
		CPUCores:  1,
		RAMMB:     128,
		StopGrace: 3 * time.Second,
		Simulated: true,
	}
}

func (e *testEnv) containerName(id int64) string { return fmt.Sprintf("suanli-%s-%d", e.ns, id) }
func (e *testEnv) networkName(id int64) string   { return fmt.Sprintf("suanli-net-%s-%d", e.ns, id) }

// MustEnsure calls Ensure and fails the test on error.
func MustEnsure(tb testing.TB, r *docker.Runtime, spec suanli.InstanceSpec) {
	tb.Helper()
	if err := r.Ensure(tb.Context(), spec); err != nil {
		tb.Fatalf("Ensure(%d, %s): %v", spec.ID, spec.Desired, err)
	}
}

// report returns the instance's report from Status, failing when absent.
func report(tb testing.TB, r *docker.Runtime, id int64) suanli.InstanceReport {
	tb.Helper()
	reps, err := r.Status(tb.Context())
	if err != nil {
		tb.Fatalf("Status: %v", err)
	}
	for _, rep := range reps {
		if rep.ID == id {
			return rep
		}
	}
	tb.Fatalf("Status lists no instance %d (got %+v)", id, reps)
	return suanli.InstanceReport{}
}

// waitFor polls cond (every 20 ms, up to d) until it holds; what describes
// the last state for the failure message.
func waitFor(tb testing.TB, d time.Duration, cond func() (ok bool, what string)) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, what := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLog waits until the instance's log from offset 0 contains want, and
// returns the whole log.
func waitLog(tb testing.TB, r *docker.Runtime, id int64, want string) string {
	tb.Helper()
	var log string
	waitFor(tb, 10*time.Second, func() (bool, string) {
		b, err := r.ReadLog(tb.Context(), id, 0, 1<<20)
		if err != nil {
			return false, fmt.Sprintf("ReadLog(%d): %v", id, err)
		}
		log = string(b)
		return strings.Contains(log, want), fmt.Sprintf("log of instance %d = %q, want it to contain %q", id, log, want)
	})
	return log
}

// execOut runs cmd in the instance and returns its exit code and stdout.
func execOut(tb testing.TB, r *docker.Runtime, id int64, cmd ...string) (int, string) {
	tb.Helper()
	var out, errb bytes.Buffer
	code, err := r.Exec(tb.Context(), id, cmd, nil, &out, &errb)
	if err != nil {
		tb.Fatalf("Exec(%d, %q): %v", id, cmd, err)
	}
	return code, out.String()
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// The test image: testdata/testimg built static into a FROM scratch image,
// once per test binary.
var (
	testImageOnce sync.Once
	testImageRef  string
	testImageErr  error
)

// MustTestImage returns the tag of the test image, building it on first use.
func MustTestImage(tb testing.TB, cli *client.Client) string {
	tb.Helper()
	testImageOnce.Do(func() {
		dir, err := os.MkdirTemp("", "suanli-testimg-")
		if err != nil {
			testImageErr = err
			return
		}
		imagesMu.Lock()
		tmpDirs = append(tmpDirs, dir)
		imagesMu.Unlock()
		bin := filepath.Join(dir, "t")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./testdata/testimg")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		if out, err := cmd.CombinedOutput(); err != nil {
			testImageErr = fmt.Errorf("go build testimg: %v\n%s", err, out)
			return
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			testImageErr = err
			return
		}
		// A tag of this test process: other test runs may share the daemon.
		testImageRef = "suanli-test/runtime:" + randHex(6)
		testImageErr = BuildImage(context.Background(), cli, testImageRef, "linux/"+runtime.GOARCH,
			"FROM scratch\nCOPY t /t\nVOLUME /vol\nENTRYPOINT [\"/t\"]\nCMD [\"serve\"]\n",
			map[string][]byte{"t": b})
	})
	if testImageErr != nil {
		tb.Fatalf("test image: %v", testImageErr)
	}
	return testImageRef
}

// BuildImage builds an image from a Dockerfile and files (mode 0755) with
// the daemon's builder, for platform ("linux/arm64"), and tags it ref.
func BuildImage(ctx context.Context, cli *client.Client, ref, platform, dockerfile string, files map[string][]byte) error {
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	files["Dockerfile"] = []byte(dockerfile)
	for name, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(b))}); err != nil {
			return err
		}
		tw.Write(b)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	os, arch, _ := strings.Cut(platform, "/")
	res, err := cli.ImageBuild(ctx, &ctxTar, client.ImageBuildOptions{
		Tags:        []string{ref},
		Remove:      true,
		ForceRemove: true,
		Platforms:   []ocispec.Platform{{OS: os, Architecture: arch}},
	})
	if err != nil {
		return fmt.Errorf("build %s: %w", ref, err)
	}
	defer res.Body.Close()
	trackImage(ref)
	dec := json.NewDecoder(res.Body)
	var log strings.Builder
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("build %s: %w", ref, err)
		}
		log.WriteString(m.Stream)
		if m.Error != nil {
			return fmt.Errorf("build %s: %s\n%s", ref, m.Error.Message, log.String())
		}
	}
	return nil
}

// Registry is a read-only Docker registry (API v2) on 127.0.0.1, which the
// daemon treats as insecure and so pulls from over plain HTTP. It serves
// images of one layer; a layer's download can be held half-way until
// Release, so a test can watch the pull's progress. A repository can be
// made private (RequireAuth); a registry with one asks every client for
// HTTP Basic credentials (401 with a challenge at /v2/, as Docker Hub-like
// registries do) and refuses the private repository's manifests and blobs
// without the right ones.
type Registry struct {
	Server  *httptest.Server
	Host    string // "127.0.0.1:PORT"
	mu      sync.Mutex
	repos   map[string][]byte    // "name:tag" → manifest
	blobs   map[string][]byte    // digest → content
	hold    map[string]bool      // layer digests to hold half-way
	auth    map[string][2]string // private repository → user, password
	release chan struct{}
	once    sync.Once
}

func NewRegistry(tb testing.TB) *Registry {
	tb.Helper()
	g := &Registry{repos: map[string][]byte{}, blobs: map[string][]byte{},
		hold: map[string]bool{}, auth: map[string][2]string{}, release: make(chan struct{})}
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	g.Host = strings.TrimPrefix(g.Server.URL, "http://")
	tb.Cleanup(func() {
		g.Release()
		g.Server.Close()
	})
	return g
}

// RequireAuth makes the repository name private: its manifests and blobs
// are served only to requests with HTTP Basic credentials user:password.
func (g *Registry) RequireAuth(name, user, password string) {
	g.mu.Lock()
	g.auth[name] = [2]string{user, password}
	g.mu.Unlock()
}

// authorized reports whether r may read repository name (any repository
// when name is "", as for the /v2/ ping: then any known credential will do).
func (g *Registry) authorized(r *http.Request, name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.auth) == 0 {
		return true
	}
	user, pass, ok := r.BasicAuth()
	if name == "" {
		if !ok {
			return false
		}
		for _, c := range g.auth {
			if c == [2]string{user, pass} {
				return true
			}
		}
		return false
	}
	c, private := g.auth[name]
	return !private || ok && c == [2]string{user, pass}
}

// unauthorized answers as a registry does to a request without the right
// credentials.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="suanli test registry"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
}

// Release lets held layer downloads finish.
func (g *Registry) Release() { g.once.Do(func() { close(g.release) }) }

// AddImage publishes name:tag for os/arch with one layer holding a file of
// layerSize random bytes, and returns the full reference.
func (g *Registry) AddImage(name, tag, osName, arch string, layerSize int, hold bool) string {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	data := make([]byte, layerSize)
	rand.Read(data)
	tw.WriteHeader(&tar.Header{Name: "data.bin", Mode: 0o644, Size: int64(len(data))})
	tw.Write(data)
	tw.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw.Bytes())
	zw.Close()
	layer := gz.Bytes()
	diffID := digest(raw.Bytes())
	config, _ := json.Marshal(map[string]any{
		"architecture": arch,
		"os":           osName,
		"config":       map[string]any{"Cmd": []string{"/data.bin"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history":      []map[string]any{{"created_by": "suanli test registry"}},
	})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.docker.distribution.manifest.v2+json",
		"config":        map[string]any{"mediaType": "application/vnd.docker.container.image.v1+json", "size": len(config), "digest": digest(config)},
		"layers":        []map[string]any{{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": len(layer), "digest": digest(layer)}},
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	g.blobs[digest(config)] = config
	g.blobs[digest(layer)] = layer
	g.hold[digest(layer)] = hold
	g.repos[name+":"+tag] = manifest
	return g.Host + "/" + name + ":" + tag
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func (g *Registry) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	p := strings.TrimPrefix(r.URL.Path, "/v2/")
	if r.URL.Path == "/v2/" || r.URL.Path == "/v2" {
		if !g.authorized(r, "") {
			unauthorized(w)
		}
		return
	}
	if i := strings.LastIndex(p, "/manifests/"); i >= 0 {
		name, ref := p[:i], p[i+len("/manifests/"):]
		if !g.authorized(r, name) {
			unauthorized(w)
			return
		}
		g.mu.Lock()
		m, ok := g.repos[name+":"+ref]
		if !ok {
			for _, mm := range g.repos {
				if digest(mm) == ref {
					m, ok = mm, true
				}
			}
		}
		known := false
		for k := range g.repos {
			known = known || strings.HasPrefix(k, name+":")
		}
		g.mu.Unlock()
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			if known {
				io.WriteString(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`)
			} else {
				io.WriteString(w, `{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry"}]}`)
			}
			return
		}
		w.Header().Set("Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
		w.Header().Set("Docker-Content-Digest", digest(m))
		w.Header().Set("Content-Length", fmt.Sprint(len(m)))
		if r.Method != http.MethodHead {
			w.Write(m)
		}
		return
	}
	if i := strings.LastIndex(p, "/blobs/"); i >= 0 {
		d := p[i+len("/blobs/"):]
		if !g.authorized(r, p[:i]) {
			unauthorized(w)
			return
		}
		g.mu.Lock()
		b, ok := g.blobs[d]
		hold := g.hold[d]
		g.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Docker-Content-Digest", d)
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		if r.Method == http.MethodHead {
			return
		}
		if hold {
			half := len(b) / 2
			w.Write(b[:half])
			w.(http.Flusher).Flush()
			select {
			case <-g.release:
			case <-r.Context().Done():
				return
			}
			b = b[half:]
		}
		w.Write(b)
		return
	}
	w.WriteHeader(http.StatusNotFound)
}
