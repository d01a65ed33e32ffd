package main_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/internal/testreq"
)

// buildImage builds a FROM scratch image holding the docker runtime's test
// program, for platform, with the daemon's builder (there is no registry).
func buildImage(t *testing.T, cli *client.Client, ref, platform string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "t")
	arch := strings.TrimPrefix(platform, "linux/")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "../../agent/docker/testdata/testimg")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build test program: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(bin)
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	for name, data := range map[string][]byte{"t": b, "Dockerfile": []byte("FROM scratch\nCOPY t /t\nENTRYPOINT [\"/t\"]\nCMD [\"serve\"]\n")} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data))})
		tw.Write(data)
	}
	tw.Close()
	res, err := cli.ImageBuild(context.Background(), &ctxTar, client.ImageBuildOptions{Tags: []string{ref}, Remove: true, ForceRemove: true,
		Platforms: []ocispec.Platform{{OS: "linux", Architecture: arch}}})
	if err != nil {
		t.Fatalf("build %s: %v", ref, err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if bytes.Contains(out, []byte(`"error"`)) {
		t.Fatalf("build %s: %s", ref, out)
	}
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
}

// TestDockerEndToEnd runs a container through the real binary and the real
// Docker Engine: published port reachable, exec, logs, stop/start keeps
// files, destroy removes the container, and an image of the wrong
// architecture is refused before anything is reserved or billed.
func TestDockerEndToEnd(t *testing.T) {
	cli, err := client.New(client.FromEnv)
	if err == nil {
		_, err = cli.Ping(context.Background(), client.PingOptions{})
	}
	if err != nil {
		testreq.Missing(t, "docker", "no Docker Engine reachable: "+err.Error())
	}
	defer cli.Close()
	tag := make([]byte, 4)
	rand.Read(tag)
	ns := "e2e" + hex.EncodeToString(tag)
	app, arm := "suanli-e2e/app:"+ns, "suanli-e2e/arm:"+ns
	buildImage(t, cli, app, "linux/"+runtime.GOARCH)
	other := "linux/arm64"
	if runtime.GOARCH == "arm64" {
		other = "linux/amd64"
	}
	buildImage(t, cli, arm, other)

	m, _ := startUp(t, t.TempDir(), "--runtime", "docker", "--docker-namespace", ns, "--block-host-access", "off")
	start := time.Now()
	var in suanli.Instance
	m.mustJSON(&in, "create", "1", "--image", app, "--gpus", "1", "-p", "8080")
	id := fmt.Sprint(in.ID)
	running := waitStatus(t, m, id, suanli.StatusRunning, 60*time.Second)
	t.Logf("docker create → running: %s", time.Since(start))
	t.Cleanup(func() {
		cli.ContainerRemove(context.Background(), "suanli-"+ns+"-"+id, client.ContainerRemoveOptions{Force: true})
	})

	// The port map reaches show; the published port answers.
	deadline := time.Now().Add(20 * time.Second)
	for running.PortMap[8080] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no host port for 8080 in show: %+v", running.PortMap)
		}
		time.Sleep(200 * time.Millisecond)
		m.mustJSON(&running, "show", id)
	}
	var body string
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/id", running.PortMap[8080]))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("published port %d not reachable: %v", running.PortMap[8080], err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if body != id {
		t.Errorf("GET /id on the published port = %q, want %q", body, id)
	}
	// exec inside the container, exit code propagated.
	cmd := exec.Command(binary, "exec", id, "--", "/t", "write", "/keep.txt", "kept")
	cmd.Env = append(os.Environ(), "SUANLI_HOME="+m.home)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("exec write: %v %s", err, out)
	}
	cmd = exec.Command(binary, "exec", id, "--", "/t", "exit", "3")
	cmd.Env = append(os.Environ(), "SUANLI_HOME="+m.home)
	cmd.Run()
	if cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("exec exit 3: suanli exited %d", cmd.ProcessState.ExitCode())
	}
	out, _ := m.run("logs", id)
	if !strings.Contains(out, "hello from instance "+id) {
		t.Errorf("logs = %q", out)
	}
	// Stop and start keep the container's files.
	m.run("stop", id)
	waitStatus(t, m, id, suanli.StatusStopped, 30*time.Second)
	m.run("start", id)
	waitStatus(t, m, id, suanli.StatusRunning, 30*time.Second)
	cmd = exec.Command(binary, "exec", id, "--", "/t", "cat", "/keep.txt")
	cmd.Env = append(os.Environ(), "SUANLI_HOME="+m.home)
	if got, err := cmd.Output(); err != nil || string(got) != "kept" {
		t.Errorf("file after stop/start = %q (%v)", got, err)
	}
	// Another architecture is refused before anything is reserved or billed.
	var before []suanli.Instance
	m.mustJSON(&before, "ls", "--all")
	_, err = m.run("create", "1", "--image", arm, "--gpus", "1")
	if err == nil || !strings.Contains(err.Error(), "pre-flight") || !strings.Contains(err.Error(), "nothing was reserved") {
		t.Errorf("create with a %s image: %v, want a pre-flight refusal", other, err)
	}
	var after []suanli.Instance
	m.mustJSON(&after, "ls", "--all")
	if len(after) != len(before) {
		t.Errorf("a refused create left an instance behind: %d → %d", len(before), len(after))
	}
	// Destroy removes the container.
	m.run("destroy", id)
	deadline = time.Now().Add(30 * time.Second)
	for {
		if _, err := cli.ContainerInspect(context.Background(), "suanli-"+ns+"-"+id, client.ContainerInspectOptions{}); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("container still exists after destroy")
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = json.Valid
}
