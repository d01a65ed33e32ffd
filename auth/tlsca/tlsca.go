package tlsca

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// Lifetimes of what LoadOrCreate makes. A server certificate is renewed
// when it has less than RenewBefore left or does not name every host.
const (
	CALifetime     = 10 * 365 * 24 * time.Hour
	ServerLifetime = 397 * 24 * time.Hour
	RenewBefore    = 30 * 24 * time.Hour
)

// File names under the directory LoadOrCreate keeps.
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	ServerFile    = "server.pem"
	ServerKeyFile = "server-key.pem"
)

// Bundle is a CA and the server certificate it signed.
type Bundle struct {
	CA    *x509.Certificate
	CAPEM []byte
	// Cert is the server certificate with the CA in its chain, so that a
	// client that knows only the CA's fingerprint can find it.
	Cert tls.Certificate
}

// Fingerprint returns the CA's fingerprint ("sha256:…").
func (b *Bundle) Fingerprint() string { return Fingerprint(b.CA) }

// ServerConfig returns the tls.Config to serve with.
func (b *Bundle) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{b.Cert}, MinVersion: tls.VersionTLS12}
}

// Fingerprint returns a certificate's SHA-256 fingerprint as "sha256:" and
// lowercase hex.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// LoadOrCreate loads the CA and server certificate from dir, creating the
// CA when there is none, and (re)issuing the server certificate when it is
// missing, about to expire, or does not name every one of hosts (DNS names
// or IP addresses).
func LoadOrCreate(dir string, hosts []string, now time.Time) (*Bundle, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create TLS directory: %w", err)
	}
	caCert, caKey, err := loadPair(filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		caCert, caKey, err = createCA(dir, now)
	}
	if err != nil {
		return nil, err
	}
	leaf, leafKey, err := loadPair(filepath.Join(dir, ServerFile), filepath.Join(dir, ServerKeyFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil || !covers(leaf, hosts) || now.Add(RenewBefore).After(leaf.NotAfter) || leaf.CheckSignatureFrom(caCert) != nil {
		if leaf, leafKey, err = createServer(dir, caCert, caKey, hosts, now); err != nil {
			return nil, err
		}
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw})
	return &Bundle{CA: caCert, CAPEM: caPEM,
		Cert: tls.Certificate{Certificate: [][]byte{leaf.Raw, caCert.Raw}, PrivateKey: leafKey, Leaf: leaf}}, nil
}

func covers(c *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if c.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

func loadPair(certPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cert, err := ParseCertPEM(cb)
	if err != nil {
		return nil, nil, suanli.Errorf(suanli.EINVALID, "%s: %v: move the TLS directory away to start a new CA", certPath, err)
	}
	block, _ := pem.Decode(kb)
	if block == nil {
		return nil, nil, suanli.Errorf(suanli.EINVALID, "%s: no PEM key in it", keyPath)
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, suanli.Errorf(suanli.EINVALID, "%s: %v", keyPath, err)
	}
	return cert, key, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func createCA(dir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Suanli CA (" + host + ")", Organization: []string{"Suanli"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return writePair(dir, CAFile, CAKeyFile, tmpl, tmpl, key, key)
}

func createServer(dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, hosts []string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "suanli server"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(ServerLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" && !slices.Contains(tmpl.DNSNames, h) {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return writePair(dir, ServerFile, ServerKeyFile, tmpl, ca, key, caKey)
}

func writePair(dir, certName, keyName string, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := writeFile(filepath.Join(dir, keyName), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return nil, nil, err
	}
	if err := writeFile(filepath.Join(dir, certName), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func writeFile(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	if err := os.Chmod(tmp, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ParseCertPEM returns the first certificate in PEM data.
func ParseCertPEM(b []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, errors.New("no PEM certificate found")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// ClientConfig returns a client tls.Config that trusts only the CA in
// caPEM (the pinned CA), not the system's roots.
func ClientConfig(caPEM []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, suanli.Errorf(suanli.EINVALID, "the pinned CA is not a PEM certificate: give the server's ca.pem (HOME/tls/ca.pem)")
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// ParseFingerprint normalises a fingerprint given as "sha256:HEX", "HEX" or
// with colons between bytes.
func ParseFingerprint(s string) (string, error) {
	h := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "sha256:")
	h = strings.ReplaceAll(h, ":", "")
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return "", suanli.FieldErrorf("ca-fingerprint", "%q is not a SHA-256 fingerprint: copy it from `suanli host join-token` (sha256:64 hex digits)", s)
	}
	return "sha256:" + h, nil
}

// FetchCA connects to the server at addr (host:port) and returns the PEM of
// the CA certificate in its chain whose fingerprint is fingerprint, after
// checking that the server's certificate is signed by it and valid for
// serverName. It is how an agent pins the CA on first contact.
func FetchCA(ctx context.Context, addr, serverName, fingerprint string) ([]byte, error) {
	want, err := ParseFingerprint(fingerprint)
	if err != nil {
		return nil, err
	}
	var found *x509.Certificate
	cfg := &tls.Config{
		ServerName:         serverName,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // verified below, against the pinned CA only
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			for _, c := range cs.PeerCertificates {
				if Fingerprint(c) == want {
					found = c
				}
			}
			if found == nil {
				return fmt.Errorf("no certificate in the server's chain has fingerprint %s", want)
			}
			roots := x509.NewCertPool()
			roots.AddCert(found)
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, DNSName: serverName})
			return err
		},
	}
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, suanli.Errorf(suanli.EUNAVAILABLE, "pin the server's CA at %s: %v", addr, err)
	}
	conn.Close()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: found.Raw}), nil
}

// SameCA reports whether two PEM CA certificates are the same certificate.
func SameCA(a, b []byte) bool {
	ca, err1 := ParseCertPEM(a)
	cb, err2 := ParseCertPEM(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca.Raw, cb.Raw)
}
