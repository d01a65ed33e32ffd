package sshca_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/suanli/suanli/auth/sshca"
)

func newSigner(tb testing.TB) ssh.Signer {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func tcp(s string) net.Addr {
	ap := netip.MustParseAddrPort(s)
	return net.TCPAddrFromAddrPort(ap)
}

// fixture is a CA, a verifier that trusts it, and a user key.
type fixture struct {
	ca   *sshca.CA
	v    *sshca.Verifier
	user ssh.Signer
	now  time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{ca: sshca.New(newSigner(t)), user: newSigner(t), now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	f.ca.Now = func() time.Time { return f.now }
	f.v = &sshca.Verifier{Now: func() time.Time { return f.now }}
	if err := f.v.SetAuthorities([]string{f.ca.AuthorizedKey()}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) sign(t *testing.T, id int64, sources ...string) *ssh.Certificate {
	t.Helper()
	var ps []netip.Prefix
	for _, s := range sources {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	cert, _, err := f.ca.Sign(sshca.Grant{InstanceID: id, AccountID: 7, Key: f.user.PublicKey(), Sources: ps}, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestSignVerify(t *testing.T) {
	f := newFixture(t)
	cert := f.sign(t, 42, "127.0.0.1/32", "10.0.0.0/8")
	g, err := f.v.Verify("42", tcp("10.1.2.3:5555"), cert)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if g.InstanceID != 42 || !g.PTY || len(g.Sources) != 2 || !strings.Contains(g.KeyID, "instance=42 account=7") {
		t.Errorf("grant = %+v", g)
	}
	// The certificate survives the text round trip the CLI makes.
	k, _, err := sshca.ParseAuthorizedKey(sshca.MarshalCert(cert))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.v.Verify("42", tcp("127.0.0.1:1"), k); err != nil {
		t.Errorf("Verify(parsed) = %v", err)
	}
}

func TestVerifyRefuses(t *testing.T) {
	f := newFixture(t)
	good := f.sign(t, 42, "127.0.0.1/32")
	other := sshca.New(newSigner(t))
	foreign, _, _ := other.Sign(sshca.Grant{InstanceID: 42, Key: f.user.PublicKey(), Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, time.Hour)

	custom := func(mut func(c *ssh.Certificate)) *ssh.Certificate {
		c := &ssh.Certificate{Key: f.user.PublicKey(), CertType: ssh.UserCert, ValidPrincipals: []string{"42"},
			ValidAfter: uint64(f.now.Add(-time.Minute).Unix()), ValidBefore: uint64(f.now.Add(time.Minute).Unix()),
			Permissions: ssh.Permissions{CriticalOptions: map[string]string{sshca.OptionInstance: "42", sshca.OptionSourceAddress: "127.0.0.1/32"}}}
		mut(c)
		caSigner := newSigner(t)
		f.v.SetAuthorities([]string{f.ca.AuthorizedKey(), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(caSigner.PublicKey())))})
		if err := c.SignCert(rand.Reader, caSigner); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name string
		user string
		peer string
		key  func() ssh.PublicKey
		want string
	}{
		{"plain key", "42", "127.0.0.1:1", func() ssh.PublicKey { return f.user.PublicKey() }, "plain"},
		{"other CA", "42", "127.0.0.1:1", func() ssh.PublicKey { return foreign }, "unknown authority"},
		{"other instance", "43", "127.0.0.1:1", func() ssh.PublicKey { return good }, "principal"},
		{"outside source", "42", "127.0.0.2:1", func() ssh.PublicKey { return good }, "outside"},
		{"unknown option", "42", "127.0.0.1:1", func() ssh.PublicKey {
			return custom(func(c *ssh.Certificate) { c.CriticalOptions["force-command"] = "true" })
		}, "unsupported critical option"},
		{"no instance option", "42", "127.0.0.1:1", func() ssh.PublicKey {
			return custom(func(c *ssh.Certificate) { delete(c.CriticalOptions, sshca.OptionInstance) })
		}, "not bound"},
		{"no source-address", "42", "127.0.0.1:1", func() ssh.PublicKey {
			return custom(func(c *ssh.Certificate) { delete(c.CriticalOptions, sshca.OptionSourceAddress) })
		}, "no source-address"},
		{"option names other instance", "42", "127.0.0.1:1", func() ssh.PublicKey {
			return custom(func(c *ssh.Certificate) { c.CriticalOptions[sshca.OptionInstance] = "43" })
		}, "instance 43"},
		{"two principals", "42", "127.0.0.1:1", func() ssh.PublicKey {
			return custom(func(c *ssh.Certificate) { c.ValidPrincipals = []string{"42", "43"} })
		}, "2 principals"},
		{"host cert", "42", "127.0.0.1:1", func() ssh.PublicKey {
			return custom(func(c *ssh.Certificate) { c.CertType = ssh.HostCert })
		}, "host certificate"},
		{"tampered", "42", "127.0.0.1:1", func() ssh.PublicKey {
			c := *good
			c.Permissions.CriticalOptions = map[string]string{sshca.OptionInstance: "42", sshca.OptionSourceAddress: "0.0.0.0/0"}
			return &c
		}, "signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.v.Verify(tc.user, tcp(tc.peer), tc.key())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Verify = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestVerifyWindow(t *testing.T) {
	f := newFixture(t)
	cert := f.sign(t, 1, "127.0.0.1/32")
	for _, tc := range []struct {
		at time.Duration
		ok bool
	}{{-2 * time.Minute, false}, {-30 * time.Second, true}, {4 * time.Minute, true}, {5 * time.Minute, false}, {time.Hour, false}} {
		now := f.now
		f.v.Now = func() time.Time { return now.Add(tc.at) }
		_, err := f.v.Verify("1", tcp("127.0.0.1:1"), cert)
		if (err == nil) != tc.ok {
			t.Errorf("Verify at now%+v = %v, want ok=%v", tc.at, err, tc.ok)
		}
	}
}

func TestVerifyTrustsNobodyAtFirst(t *testing.T) {
	f := newFixture(t)
	cert := f.sign(t, 1, "127.0.0.1/32")
	var v sshca.Verifier
	if _, err := v.Verify("1", tcp("127.0.0.1:1"), cert); err == nil {
		t.Fatal("a verifier with no authorities accepted a certificate")
	}
}

func TestSignRefuses(t *testing.T) {
	f := newFixture(t)
	src := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	cert := f.sign(t, 1, "127.0.0.1/32")
	for name, g := range map[string]sshca.Grant{
		"no sources":  {InstanceID: 1, Key: f.user.PublicKey()},
		"no instance": {Key: f.user.PublicKey(), Sources: src},
		"cert as key": {InstanceID: 1, Key: cert, Sources: src},
	} {
		if _, _, err := f.ca.Sign(g, time.Minute); err == nil {
			t.Errorf("Sign(%s) succeeded", name)
		}
	}
}

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ca", "ssh_ca")
	a, err := sshca.LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	b, err := sshca.LoadOrCreate(path)
	if err != nil || b.AuthorizedKey() != a.AuthorizedKey() {
		t.Fatalf("reload gave another key (%v)", err)
	}
	os.Chmod(path, 0o644)
	if _, err := sshca.LoadOrCreate(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable CA key was accepted: %v", err)
	}
}

func TestParseSourceAddress(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"127.0.0.1", "127.0.0.1/32", true},
		{"10.0.0.0/8,127.0.0.1/32", "10.0.0.0/8,127.0.0.1/32", true},
		{"127.0.0.1/32,10.0.0.0/8,10.0.0.0/8", "10.0.0.0/8,127.0.0.1/32", true},
		{"2001:db8::/32", "2001:db8::/32", true},
		{"::1", "::1/128", true},
		{"", "", false},
		{"10.0.0.1/8", "", false},
		{"10.0.0.0/8,", "", false},
		{" 10.0.0.0/8", "", false},
		{"fe80::1%eth0", "", false},
		{"::ffff:127.0.0.1", "", false},
		{"host.example", "", false},
		{"10.0.0.0/33", "", false},
		{"*", "", false},
	} {
		ps, err := sshca.ParseSourceAddress(tc.in)
		if (err == nil) != tc.ok || (tc.ok && sshca.FormatSourceAddress(ps) != tc.want) {
			t.Errorf("ParseSourceAddress(%q) = %v, %v; want %q ok=%v", tc.in, sshca.FormatSourceAddress(ps), err, tc.want, tc.ok)
		}
	}
	if !sshca.Allowed([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, netip.MustParseAddr("::ffff:127.0.0.5")) {
		t.Error("an IPv4-mapped peer did not match its IPv4 network")
	}
}

func TestCheckUserKey(t *testing.T) {
	f := newFixture(t)
	if err := sshca.CheckUserKey(f.user.PublicKey()); err != nil {
		t.Errorf("ed25519 refused: %v", err)
	}
	for _, bad := range []string{"", "ssh-ed25519", "command=\"x\" " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(f.user.PublicKey()))), "a\nb"} {
		if _, _, err := sshca.ParseAuthorizedKey(bad); err == nil {
			t.Errorf("ParseAuthorizedKey(%q) succeeded", bad)
		}
	}
}
