package control_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth/sshca"
	"github.com/suanli/suanli/control"
)

func pubKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := ssh.NewPublicKey(pub)
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " me@laptop"
}

// TestSignSSHCertificate walks the certificate policy: only the owner's
// running instance, only registered keys, only hosts with an endpoint; the
// certificate binds the instance and the allowlist (or the caller's address).
func TestSignSSHCertificate(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	ca := sshca.New(mustSigner(t))
	ca.Now = f.clk.Now
	f.svc.SSHAuthority = ca
	in := f.create(t, suanli.InstanceCreate{})
	key := pubKey(t)
	req := suanli.SSHCertRequest{InstanceID: in.ID, PublicKey: key, ClientAddr: "198.51.100.7"}
	code := func(err error) string { return suanli.ErrorCode(err) }

	if _, err := f.svc.SignSSHCertificate(f.renter, req); code(err) != suanli.ECONFLICT {
		t.Errorf("pending instance: %v, want conflict", err)
	}
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	if _, err := f.svc.SignSSHCertificate(f.renter, req); code(err) != suanli.EFORBIDDEN || !strings.Contains(err.Error(), "ssh-keys add") {
		t.Errorf("unregistered key: %v, want forbidden naming the fix", err)
	}
	k, err := f.svc.AddSSHKey(f.renter, "", key)
	if err != nil || k.Name != "me@laptop" || !strings.HasPrefix(k.Fingerprint, "SHA256:") {
		t.Fatalf("AddSSHKey = %+v, %v", k, err)
	}
	if _, err := f.svc.AddSSHKey(f.renter, "", key); code(err) != suanli.ECONFLICT {
		t.Errorf("adding a key twice: %v", err)
	}
	if _, err := f.svc.SignSSHCertificate(f.renter, req); code(err) != suanli.EUNAVAILABLE {
		t.Errorf("host without an SSH endpoint: %v, want unavailable", err)
	}
	hostKey := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(mustSigner(t).PublicKey())))
	if _, err := f.svc.Sync(f.agent, &suanli.SyncRequest{SSH: &suanli.SSHEndpoint{Host: "192.0.2.10", Port: 2222, HostKey: hostKey}}); err != nil {
		t.Fatal(err)
	}

	// The host (another tenant) and even its owner cannot get in.
	if _, err := f.svc.AddSSHKey(f.host, "", key); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SignSSHCertificate(f.host, req); code(err) != suanli.ENOTFOUND {
		t.Errorf("another tenant: %v, want not found", err)
	}
	op := principalCtx(f.renterID+100, suanli.RoleOperator, suanli.ScopeAll)
	if _, err := f.svc.SignSSHCertificate(op, req); code(err) != suanli.ENOTFOUND {
		t.Error("an operator got a certificate for a renter's instance")
	}

	cert, err := f.svc.SignSSHCertificate(f.renter, req)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Host != "192.0.2.10" || cert.Port != 2222 || cert.HostKey != hostKey || cert.User != sshca.User(in.ID) {
		t.Errorf("certificate reply = %+v", cert)
	}
	if len(cert.SourceAddress) != 1 || cert.SourceAddress[0] != "198.51.100.7/32" {
		t.Errorf("no allowlist: source = %v, want the caller's address", cert.SourceAddress)
	}
	if got := cert.ValidBefore.Sub(f.clk.Now()); got != suanli.DefaultSSHCertTTL {
		t.Errorf("lifetime = %v", got)
	}
	parsed, _, err := sshca.ParseAuthorizedKey(cert.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	c := parsed.(*ssh.Certificate)
	if c.CriticalOptions[sshca.OptionInstance] != sshca.User(in.ID) || len(c.ValidPrincipals) != 1 {
		t.Errorf("certificate options = %v, principals %v", c.CriticalOptions, c.ValidPrincipals)
	}

	// With an allowlist, the certificate carries it instead.
	for _, n := range []string{"203.0.113.0/24", "2001:db8::1"} {
		if _, err := f.svc.AddAllowedNetwork(f.renter, n, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.svc.AddAllowedNetwork(f.renter, "10.0.0.1/8", ""); code(err) != suanli.EINVALID {
		t.Errorf("a CIDR with host bits: %v", err)
	}
	cert, err = f.svc.SignSSHCertificate(f.renter, req)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cert.SourceAddress, ",") != "203.0.113.0/24,2001:db8::1/128" {
		t.Errorf("allowlist: source = %v", cert.SourceAddress)
	}
	for _, ttl := range []int64{1, 7200} {
		r := req
		r.TTLSeconds = ttl
		if _, err := f.svc.SignSSHCertificate(f.renter, r); code(err) != suanli.EINVALID {
			t.Errorf("ttl %ds: %v, want invalid", ttl, err)
		}
	}

	// A removed key gets nothing more.
	if err := f.svc.RemoveSSHKey(f.renter, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SignSSHCertificate(f.renter, req); code(err) != suanli.EFORBIDDEN {
		t.Errorf("removed key: %v", err)
	}
	// Agents learn the CA from every sync.
	resp, err := f.svc.Sync(f.agent, &suanli.SyncRequest{})
	if err != nil || len(resp.SSHCAKeys) != 1 || resp.SSHCAKeys[0] != ca.AuthorizedKey() {
		t.Errorf("sync CA keys = %v, %v", resp.SSHCAKeys, err)
	}
}

func mustSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
