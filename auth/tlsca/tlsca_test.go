package tlsca_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli/auth/tlsca"
)

func serve(t *testing.T, b *tlsca.Bundle) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	srv.TLS = b.ServerConfig()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func get(cfg *tls.Config, url string) error {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

func TestPinnedCA(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	b, err := tlsca.LoadOrCreate(dir, []string{"localhost", "127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{tlsca.CAKeyFile, tlsca.ServerKeyFile} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, %v; want 0600", f, fi.Mode().Perm(), err)
		}
	}
	srv := serve(t, b)
	cfg, err := tlsca.ClientConfig(b.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(cfg, srv.URL); err != nil {
		t.Errorf("client pinning the CA: %v", err)
	}
	if err := get(&tls.Config{}, srv.URL); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client without the CA: %v, want a certificate error", err)
	}
	other, _ := tlsca.LoadOrCreate(t.TempDir(), []string{"127.0.0.1"}, now)
	ocfg, _ := tlsca.ClientConfig(other.CAPEM)
	if err := get(ocfg, srv.URL); err == nil {
		t.Error("a client pinning another CA connected")
	}

	// The fingerprint fetches the CA; a wrong one does not.
	addr := strings.TrimPrefix(srv.URL, "https://")
	pemCA, err := tlsca.FetchCA(context.Background(), addr, "127.0.0.1", b.Fingerprint())
	if err != nil || !tlsca.SameCA(pemCA, b.CAPEM) {
		t.Errorf("FetchCA = %v", err)
	}
	if _, err := tlsca.FetchCA(context.Background(), addr, "127.0.0.1", other.Fingerprint()); err == nil {
		t.Error("FetchCA accepted a wrong fingerprint")
	}
	if _, err := tlsca.FetchCA(context.Background(), addr, "other.example", b.Fingerprint()); err == nil {
		t.Error("FetchCA accepted a certificate for another name")
	}

	// Reload keeps the CA; a new host renews the server certificate under it.
	again, err := tlsca.LoadOrCreate(dir, []string{"localhost", "127.0.0.1", "10.9.8.7"}, now)
	if err != nil || again.Fingerprint() != b.Fingerprint() {
		t.Fatalf("reload changed the CA (%v)", err)
	}
	if again.Cert.Leaf.VerifyHostname("10.9.8.7") != nil {
		t.Error("server certificate not renewed for the new host")
	}
}

func TestParseFingerprint(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for _, in := range []string{"sha256:" + h, h, strings.ToUpper(h), "SHA256:" + h} {
		if got, err := tlsca.ParseFingerprint(in); err != nil || got != "sha256:"+h {
			t.Errorf("ParseFingerprint(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "sha256:abc", "md5:" + h} {
		if _, err := tlsca.ParseFingerprint(in); err == nil {
			t.Errorf("ParseFingerprint(%q) succeeded", in)
		}
	}
}
