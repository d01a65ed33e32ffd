package main

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"os"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth/tlsca"
	shttp "github.com/suanli/suanli/http"
)

// pinCA makes cl trust only the CA from --ca-file / SUANLI_CA_FILE, or else
// the one pinned in the config (configPEM). With neither, HTTPS uses the
// system's roots.
func (a *app) pinCA(cl *shttp.Client, configPEM string) {
	pemCA := []byte(configPEM)
	if a.caFile != "" {
		b, err := os.ReadFile(a.caFile)
		if err != nil {
			setTransport(cl, errTransport{suanli.Errorf(suanli.EINVALID, "--ca-file: %v", err)})
			return
		}
		pemCA = b
	}
	if len(pemCA) == 0 {
		return
	}
	cfg, err := tlsca.ClientConfig(pemCA)
	if err != nil {
		setTransport(cl, errTransport{err})
		return
	}
	setTransport(cl, tlsTransport(cfg))
}

// tlsTransport is the default transport with cfg for TLS.
func tlsTransport(cfg *tls.Config) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return tr
}

func setTransport(cl *shttp.Client, rt http.RoundTripper) {
	cl.HTTP.Transport = rt
	cl.Long.Transport = rt
}

// errTransport fails every request with err (a CA that could not be read),
// so that the command reports it at its first call.
type errTransport struct{ err error }

func (t errTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, t.err }

// tlsHosts is what the server certificate names: the listen host (unless it
// is a wildcard), this machine's hostname, the loopback names, and extra.
func tlsHosts(addr string, extra []string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, _, err := net.SplitHostPort(addr); err == nil && h != "" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			hosts = append(hosts, h)
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	return append(hosts, extra...)
}

// joinCA is the CA an agent pins on its first contact with an HTTPS
// control plane: the one it was handed (up), --ca-file, or the one the
// server presents whose fingerprint is --ca-fingerprint. nil: use the
// system's roots (or plain HTTP).
func joinCA(ctx context.Context, c agentConfig, server string) ([]byte, error) {
	switch {
	case len(c.caPEM) > 0:
		return c.caPEM, nil
	case c.CAFile != "":
		b, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, suanli.FieldErrorf("ca-file", "%v", err)
		}
		return b, nil
	case c.CAFingerprint != "":
		u, err := url.Parse(server)
		if err != nil || u.Scheme != "https" {
			return nil, suanli.FieldErrorf("ca-fingerprint", "the server URL %q is not https://…: a CA fingerprint pins HTTPS only", server)
		}
		port := u.Port()
		if port == "" {
			port = "443"
		}
		return tlsca.FetchCA(ctx, net.JoinHostPort(u.Hostname(), port), u.Hostname(), c.CAFingerprint)
	}
	return nil, nil
}

// pinClient makes cl trust only the CA in caPEM; nothing when it is empty.
func pinClient(cl *shttp.Client, caPEM []byte) error {
	if len(caPEM) == 0 {
		return nil
	}
	cfg, err := tlsca.ClientConfig(caPEM)
	if err != nil {
		return err
	}
	setTransport(cl, tlsTransport(cfg))
	return nil
}

// pinnedCAFingerprint is the fingerprint of the CA this client pins ("" for
// none), for the agent command that join-token prints.
func (a *app) pinnedCAFingerprint() string {
	c, _ := readClientConfig(a.configPath())
	pemCA := []byte(c.CAPEM)
	if a.caFile != "" {
		pemCA, _ = os.ReadFile(a.caFile)
	}
	ca, err := tlsca.ParseCertPEM(pemCA)
	if err != nil {
		return ""
	}
	return tlsca.Fingerprint(ca)
}
