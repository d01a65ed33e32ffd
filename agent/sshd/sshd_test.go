package sshd_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/process"
	"github.com/suanli/suanli/agent/sshd"
	"github.com/suanli/suanli/auth/sshca"
	"github.com/suanli/suanli/internal/testreq"
)

// env is a running SSH endpoint over the process runtime with two running
// instances (1 and 2), a CA it trusts, and a user key on disk.
type env struct {
	t       *testing.T
	dir     string
	ca      *sshca.CA
	rt      *process.Runtime
	addr    *net.TCPAddr
	hostKey ssh.PublicKey
	key     string // private key file
	signer  ssh.Signer
	known   string // known_hosts file
	caKey   ssh.Signer
	logs    *syncBuffer
}

func needSSH(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ssh")
	if err != nil {
		testreq.Missing(t, "openssh", "no ssh binary in PATH (apt-get install openssh-client)")
	}
	return p
}

func newSigner(t *testing.T) (ssh.Signer, []byte) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return s, pem.EncodeToMemory(block)
}

func startEnv(t *testing.T) *env {
	t.Helper()
	needSSH(t)
	dir := t.TempDir()
	caSigner, _ := newSigner(t)
	e := &env{t: t, dir: dir, ca: sshca.New(caSigner), caKey: caSigner, logs: &syncBuffer{}}
	e.rt = process.New(filepath.Join(dir, "agent"), nil)
	for _, id := range []int64{1, 2} {
		if err := e.rt.Ensure(t.Context(), suanli.InstanceSpec{ID: id, Desired: suanli.DesiredRunning, Cmd: []string{"sleep", "600"},
			Env: map[string]string{"GREETING": "hello from " + strconv.FormatInt(id, 10)}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, id := range []int64{1, 2} {
			e.rt.Remove(ctx, id)
		}
	})
	host, err := sshd.LoadOrCreateHostKey(filepath.Join(dir, "host_key"))
	if err != nil {
		t.Fatal(err)
	}
	e.hostKey = host.PublicKey()
	v := &sshca.Verifier{}
	if err := v.SetAuthorities([]string{e.ca.AuthorizedKey()}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().(*net.TCPAddr)
	srv := &sshd.Server{HostKey: host, Verifier: v, Target: sshd.ProcessTarget{Runtime: e.rt},
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&testWriter{t}, e.logs), nil)), CheckEvery: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	var pemKey []byte
	e.signer, pemKey = newSigner(t)
	e.key = filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(e.key, pemKey, 0o600); err != nil {
		t.Fatal(err)
	}
	e.known = filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(e.known, []byte("suanli-test "+sshd.AuthorizedKey(e.hostKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

type testWriter struct{ t *testing.T }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// cert signs the env's user key for instance id from sources, and writes it
// to a file.
func (e *env) cert(id int64, ttl time.Duration, sources ...string) string {
	e.t.Helper()
	return e.certFor(e.ca, e.signer.PublicKey(), id, ttl, sources...)
}

func (e *env) certFor(ca *sshca.CA, key ssh.PublicKey, id int64, ttl time.Duration, sources ...string) string {
	e.t.Helper()
	var ps []netip.Prefix
	for _, s := range sources {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	c, _, err := ca.Sign(sshca.Grant{InstanceID: id, AccountID: 1, Key: key, Sources: ps}, ttl)
	if err != nil {
		e.t.Fatal(err)
	}
	f, err := os.CreateTemp(e.dir, "cert-*.pub")
	if err != nil {
		e.t.Fatal(err)
	}
	f.WriteString(sshca.MarshalCert(c) + "\n")
	f.Close()
	return f.Name()
}

// sshArgs are the options every client here uses: only this key and
// certificate, the pinned host key, no agent, no prompts.
func (e *env) sshArgs(cert string) []string {
	args := []string{"-F", "/dev/null", "-i", e.key, "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
		"-o", "UserKnownHostsFile=" + e.known, "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes",
		"-o", "HostKeyAlias=suanli-test", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10"}
	if cert != "" {
		args = append(args, "-o", "CertificateFile="+cert)
	}
	return args
}

// ssh runs the ssh client as user (the instance id) and returns stdout,
// stderr and the exit code.
func (e *env) ssh(cert, user string, extra []string, command ...string) (string, string, int) {
	e.t.Helper()
	args := append(e.sshArgs(cert), extra...)
	args = append(args, "-p", strconv.Itoa(e.addr.Port), user+"@127.0.0.1")
	args = append(args, command...)
	return run(e.t, "ssh", args...)
}

func run(t *testing.T, name string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out.String(), errb.String(), code
}

func TestSSHRunsCommand(t *testing.T) {
	e := startEnv(t)
	cert := e.cert(1, 5*time.Minute, "127.0.0.1/32")
	out, errOut, code := e.ssh(cert, "1", nil, `echo "$GREETING"; echo "id=$SUANLI_INSTANCE_ID"; pwd; echo oops >&2; exit 7`)
	if code != 7 {
		t.Fatalf("exit code = %d, want 7 (stderr %q)", code, errOut)
	}
	if !strings.Contains(out, "hello from 1\n") || !strings.Contains(out, "id=1\n") || !strings.Contains(out, filepath.Join("instances", "1", "work")) {
		t.Errorf("stdout = %q: want the instance's environment and work directory", out)
	}
	if !strings.Contains(errOut, "oops") {
		t.Errorf("stderr = %q, want oops", errOut)
	}
	// stdin reaches the command and EOF ends it.
	cmd := exec.Command("ssh", append(append(e.sshArgs(cert), "-p", strconv.Itoa(e.addr.Port), "1@127.0.0.1"), "wc -c")...)
	cmd.Stdin = strings.NewReader("12345")
	b, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(b)) != "5" {
		t.Errorf("wc -c over ssh = %q, %v; want 5", b, err)
	}
}

func TestSSHTerminal(t *testing.T) {
	e := startEnv(t)
	cert := e.cert(1, 5*time.Minute, "127.0.0.1/32")
	out, errOut, code := e.ssh(cert, "1", []string{"-tt"}, "tty; echo TERM=$TERM; stty size; exit 3")
	if code != 3 {
		t.Fatalf("exit code = %d, want 3 (stderr %q)", code, errOut)
	}
	if !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "TERM=") {
		t.Errorf("output = %q: want a pseudo-terminal", out)
	}
}

func TestSSHRefuses(t *testing.T) {
	e := startEnv(t)
	otherCA, _ := newSigner(t)
	past := sshca.New(e.caKey)
	past.Now = func() time.Time { return time.Now().Add(-time.Hour) }
	for _, tc := range []struct {
		name  string
		cert  func() string
		user  string
		extra []string
		why   string // in the server's log or the client's stderr
	}{
		{"plain key", func() string { return "" }, "1", nil, "plain ssh-ed25519 key refused"},
		{"wrong key", func() string {
			other, _ := newSigner(t)
			return e.certFor(e.ca, other.PublicKey(), 1, 5*time.Minute, "127.0.0.1/32")
		}, "1", nil, "key refused"},
		{"other CA", func() string {
			return e.certFor(sshca.New(otherCA), e.signer.PublicKey(), 1, 5*time.Minute, "127.0.0.1/32")
		}, "1", nil, "unknown authority"},
		{"source outside the allowlist", func() string { return e.cert(1, 5*time.Minute, "127.0.0.2/32") }, "1", nil, "outside the certificate's source-address"},
		{"expired", func() string { return e.certFor(past, e.signer.PublicKey(), 1, 5*time.Minute, "127.0.0.1/32") }, "1", nil, "expired"},
		{"other instance", func() string { return e.cert(2, 5*time.Minute, "127.0.0.1/32") }, "1", nil, "principal"},
		{"unknown instance", func() string { return e.cert(3, 5*time.Minute, "127.0.0.1/32") }, "3", nil, "instance 3 is not on this machine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.logs.String())
			out, errOut, code := e.ssh(tc.cert(), tc.user, tc.extra, "echo in")
			if code == 0 || strings.Contains(out, "in") {
				t.Fatalf("ssh got in: code %d, stdout %q, stderr %q", code, out, errOut)
			}
			if !strings.Contains(e.logs.String()[before:]+errOut, tc.why) {
				t.Errorf("refused, but not because %q; stderr %q", tc.why, errOut)
			}
		})
	}
	// The allowlisted source does get in.
	cert := e.cert(1, 5*time.Minute, "127.0.0.2/32")
	out, errOut, code := e.ssh(cert, "1", []string{"-b", "127.0.0.2"}, "echo in")
	if code != 0 || out != "in\n" {
		t.Errorf("from 127.0.0.2: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestSSHStoppedInstance(t *testing.T) {
	e := startEnv(t)
	cert := e.cert(2, 5*time.Minute, "127.0.0.1/32")
	if err := e.rt.Ensure(t.Context(), suanli.InstanceSpec{ID: 2, Desired: suanli.DesiredStopped, Cmd: []string{"sleep", "600"}, StopGrace: time.Second}); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := e.ssh(cert, "2", nil, "echo in")
	if code == 0 || !strings.Contains(errOut, "instance 2 is stopped") {
		t.Errorf("ssh into a stopped instance: code %d, stderr %q", code, errOut)
	}
}

func TestSCPAndSFTP(t *testing.T) {
	e := startEnv(t)
	if _, err := exec.LookPath("scp"); err != nil {
		testreq.Missing(t, "openssh", "no scp binary (apt-get install openssh-client)")
	}
	cert := e.cert(1, 5*time.Minute, "127.0.0.1/32")
	data := make([]byte, 300<<10)
	rand.Read(data)
	src := filepath.Join(e.dir, "payload.bin")
	os.WriteFile(src, data, 0o600)
	target := fmt.Sprintf("1@127.0.0.1:")
	port := strconv.Itoa(e.addr.Port)
	for _, mode := range []struct {
		name string
		args []string
	}{{"sftp protocol", nil}, {"legacy scp protocol", []string{"-O"}}} {
		t.Run(mode.name, func(t *testing.T) {
			name := strings.ReplaceAll(mode.name, " ", "-")
			args := append(append(e.sshArgs(cert), mode.args...), "-P", port, src, target+name+".bin")
			if _, errOut, code := run(t, "scp", args...); code != 0 {
				t.Fatalf("scp up: code %d: %s", code, errOut)
			}
			back := filepath.Join(e.dir, name+".back")
			args = append(append(e.sshArgs(cert), mode.args...), "-P", port, target+name+".bin", back)
			if _, errOut, code := run(t, "scp", args...); code != 0 {
				t.Fatalf("scp down: code %d: %s", code, errOut)
			}
			got, err := os.ReadFile(back)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("round trip changed the file (%d bytes back, %v)", len(got), err)
			}
			// The file landed in the instance's work directory.
			if out, _, _ := e.ssh(cert, "1", nil, "ls"); !strings.Contains(out, name+".bin") {
				t.Errorf("ls in the instance = %q", out)
			}
		})
	}
	batch := filepath.Join(e.dir, "batch")
	os.WriteFile(batch, []byte("pwd\nls\n"), 0o600)
	out, errOut, code := run(t, "sftp", append(e.sshArgs(cert), "-b", batch, "-P", port, "1@127.0.0.1")...)
	if code != 0 || !strings.Contains(out, "sftp-protocol.bin") {
		t.Errorf("sftp: code %d, out %q, err %q", code, out, errOut)
	}
}

func TestRsync(t *testing.T) {
	e := startEnv(t)
	if _, err := exec.LookPath("rsync"); err != nil {
		testreq.Missing(t, "rsync", "no rsync binary (apt-get install rsync)")
	}
	cert := e.cert(1, 5*time.Minute, "127.0.0.1/32")
	src := filepath.Join(e.dir, "tree")
	os.MkdirAll(filepath.Join(src, "sub"), 0o700)
	os.WriteFile(filepath.Join(src, "sub", "f.txt"), []byte("rsync me"), 0o600)
	sshCmd := "ssh " + strings.Join(e.sshArgs(cert), " ") + " -p " + strconv.Itoa(e.addr.Port)
	if _, errOut, code := run(t, "rsync", "-a", "-e", sshCmd, src+"/", "1@127.0.0.1:tree/"); code != 0 {
		t.Fatalf("rsync: code %d: %s", code, errOut)
	}
	out, _, _ := e.ssh(cert, "1", nil, "cat tree/sub/f.txt")
	if out != "rsync me" {
		t.Errorf("after rsync the instance has %q", out)
	}
}

// TestGrantFromAuthenticatingKey: the client first offers a certificate
// whose private key it cannot use (an encrypted key in batch mode: the
// server accepts the offer, the client never signs), then authenticates with
// another. The session must run on the grant of the key that signed, not
// the one offered first (CVE-2024-45337): the login is logged with its key
// id.
func TestGrantFromAuthenticatingKey(t *testing.T) {
	e := startEnv(t)
	ps := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	write := func(path string, b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, strangerPriv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(strangerPriv, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	strangerPub, _ := ssh.NewPublicKey(strangerPriv.Public())
	stranger := filepath.Join(e.dir, "stranger")
	write(stranger, pem.EncodeToMemory(block))
	theirs, tg, _ := e.ca.Sign(sshca.Grant{InstanceID: 1, Key: strangerPub, Sources: ps}, time.Minute)
	write(stranger+"-cert.pub", []byte(sshca.MarshalCert(theirs)+"\n"))
	good, gg, _ := e.ca.Sign(sshca.Grant{InstanceID: 1, Key: e.signer.PublicKey(), Sources: ps}, time.Minute)
	write(e.key+"-cert.pub", []byte(sshca.MarshalCert(good)+"\n"))

	args := []string{"-F", "/dev/null", "-i", stranger, "-i", e.key, "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
		"-o", "UserKnownHostsFile=" + e.known, "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes",
		"-o", "HostKeyAlias=suanli-test", "-o", "BatchMode=yes", "-v", "-p", strconv.Itoa(e.addr.Port), "1@127.0.0.1", "echo in"}
	out, errOut, code := run(t, "ssh", args...)
	if code != 0 || out != "in\n" {
		t.Fatalf("ssh: code %d, out %q, stderr %s", code, out, errOut)
	}
	if !strings.Contains(errOut, "Server accepts key: "+stranger) {
		t.Skipf("the client did not offer the first key as planned; stderr:\n%s", errOut)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "ssh login") || !strings.Contains(logs, gg.KeyID) {
		t.Errorf("login not logged with the signing key's id %q:\n%s", gg.KeyID, logs)
	}
	if strings.Contains(logs, "msg=\"ssh login\" instance_id=1 remote") && strings.Contains(logs, "key_id=\""+tg.KeyID) {
		t.Errorf("login logged with the offered-only key's id %q", tg.KeyID)
	}
}
