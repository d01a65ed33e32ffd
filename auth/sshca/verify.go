package sshca

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Verifier checks user certificates for the agent's SSH endpoint. Its
// authorities are set from the control plane's sync replies; until they are,
// every login is refused. It is safe for concurrent use; the zero value
// trusts nobody.
type Verifier struct {
	// Now returns the current time (time.Now when nil).
	Now func() time.Time

	mu          sync.RWMutex
	authorities []ssh.PublicKey
}

// SetAuthorities replaces the trusted CA keys (authorized_keys format). A
// line that does not parse is an error and leaves the set unchanged.
func (v *Verifier) SetAuthorities(lines []string) error {
	keys := make([]ssh.PublicKey, 0, len(lines))
	for _, l := range lines {
		k, _, err := ParseAuthorizedKey(l)
		if err != nil {
			return fmt.Errorf("SSH CA key %q: %w", l, err)
		}
		keys = append(keys, k)
	}
	v.mu.Lock()
	v.authorities = keys
	v.mu.Unlock()
	return nil
}

// Authorities returns how many CA keys are trusted.
func (v *Verifier) Authorities() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.authorities)
}

func (v *Verifier) isAuthority(k ssh.PublicKey) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	m := k.Marshal()
	for _, a := range v.authorities {
		if bytes.Equal(a.Marshal(), m) {
			return true
		}
	}
	return false
}

// Verify checks that key is a user certificate signed by a trusted CA, valid
// now, whose only principal is user, and whose critical options hold for
// this login (CheckOptions against the TCP peer). It returns the grant the
// certificate carries. It has no side effects, so calling it for keys a
// client only offers is harmless; the caller must authorise from the grant
// of the key that actually authenticated (ssh.ServerConn.Permissions), never
// from a key seen earlier.
func (v *Verifier) Verify(user string, peer net.Addr, key ssh.PublicKey) (*Grant, error) {
	cert, ok := key.(*ssh.Certificate)
	if !ok {
		return nil, fmt.Errorf("plain %s key refused: this endpoint accepts only Suanli certificates (use `suanli ssh`)", key.Type())
	}
	if cert.CertType != ssh.UserCert {
		return nil, fmt.Errorf("host certificate offered as a user certificate")
	}
	if !v.isAuthority(cert.SignatureKey) {
		return nil, fmt.Errorf("certificate signed by an unknown authority %s", ssh.FingerprintSHA256(cert.SignatureKey))
	}
	if len(cert.ValidPrincipals) != 1 {
		return nil, fmt.Errorf("certificate names %d principals: Suanli certificates name exactly one instance", len(cert.ValidPrincipals))
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	checker := &ssh.CertChecker{
		IsUserAuthority:          v.isAuthority,
		SupportedCriticalOptions: []string{OptionInstance},
		Clock:                    now,
	}
	// Authenticate checks the authority, the principal, the validity window,
	// that every critical option is known, and the CA's signature.
	if _, err := checker.Authenticate(connMeta{user: user, remote: peer}, cert); err != nil {
		return nil, err
	}
	tcp, ok := peer.(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("peer %v is not a TCP address", peer)
	}
	addr, _ := netip.AddrFromSlice(tcp.IP)
	b, err := CheckOptions(cert.CriticalOptions, user, addr)
	if err != nil {
		return nil, err
	}
	_, pty := cert.Extensions[ExtensionPTY]
	return &Grant{
		InstanceID:  b.InstanceID,
		Key:         cert.Key,
		Sources:     b.Sources,
		ValidAfter:  time.Unix(int64(cert.ValidAfter), 0).UTC(),
		ValidBefore: time.Unix(int64(cert.ValidBefore), 0).UTC(),
		KeyID:       cert.KeyId,
		PTY:         pty,
		Serial:      cert.Serial,
	}, nil
}

// connMeta is the part of a connection CertChecker.Authenticate reads.
type connMeta struct {
	user   string
	remote net.Addr
}

func (c connMeta) User() string          { return c.user }
func (c connMeta) SessionID() []byte     { return nil }
func (c connMeta) ClientVersion() []byte { return nil }
func (c connMeta) ServerVersion() []byte { return nil }
func (c connMeta) RemoteAddr() net.Addr  { return c.remote }
func (c connMeta) LocalAddr() net.Addr   { return nil }
