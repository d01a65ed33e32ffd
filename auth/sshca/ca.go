package sshca

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/suanli/suanli"
)

// Critical options and extensions of the certificates this CA signs.
const (
	// OptionSourceAddress is OpenSSH's standard option: a comma-separated
	// list of addresses and CIDRs the certificate may be used from.
	OptionSourceAddress = "source-address"
	// OptionInstance binds the certificate to one instance: its value is the
	// instance id in decimal. A server that does not know it must refuse the
	// certificate, as SSH requires for unknown critical options.
	OptionInstance = "instance@suanli"
	// ExtensionPTY lets the holder ask for a terminal.
	ExtensionPTY = "permit-pty"
)

// clockSkew is how far before now a certificate's validity starts, so that a
// host whose clock is a little behind still accepts it.
const clockSkew = time.Minute

// CA signs user certificates. It is safe for concurrent use. Create it with
// New or LoadOrCreate; the zero value is not usable.
type CA struct {
	signer ssh.Signer
	// Now returns the current time (time.Now by default).
	Now func() time.Time
}

// New returns a CA that signs with signer.
func New(signer ssh.Signer) *CA { return &CA{signer: signer, Now: time.Now} }

// LoadOrCreate reads the CA's private key from path (OpenSSH format), or
// creates a new ed25519 key there (mode 0600, directory 0700) when the file
// does not exist. A key file readable by others is refused: the CA key
// grants shell access to every instance.
func LoadOrCreate(path string) (*CA, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return create(path)
	} else if err != nil {
		return nil, fmt.Errorf("read SSH CA key %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("SSH CA key %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, suanli.Errorf(suanli.EINVALID, "SSH CA key %s has mode %v: it must be readable by its owner only (chmod 600 %s)", path, fi.Mode().Perm(), path)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, suanli.Errorf(suanli.EINVALID, "SSH CA key %s: %v: restore the file, or move it away to create a new CA (issued certificates then stop working)", path, err)
	}
	return New(signer), nil
}

func create(path string) (*CA, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "suanli ssh ca")
	if err != nil {
		return nil, err
	}
	if err := WriteFileAtomic(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, fmt.Errorf("write SSH CA key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	return New(signer), nil
}

// WriteFileAtomic writes data to path through a temporary file and a rename,
// creating the directory (0700) first.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// PublicKey returns the CA's public key.
func (c *CA) PublicKey() ssh.PublicKey { return c.signer.PublicKey() }

// AuthorizedKey returns the CA's public key in authorized_keys format, as
// agents receive it.
func (c *CA) AuthorizedKey() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(c.signer.PublicKey())))
}

// Grant is what a certificate allows: a login to one instance, from some
// networks, for a time. Sign turns a grant into a certificate; Verify turns a
// certificate back into the grant it carries.
type Grant struct {
	InstanceID  int64
	AccountID   int64         // recorded in the key id only
	Key         ssh.PublicKey // the holder's key (the certificate's own key)
	Sources     []netip.Prefix
	ValidAfter  time.Time
	ValidBefore time.Time
	KeyID       string
	PTY         bool
	Serial      uint64
}

// User returns the login name (and only principal) for an instance.
func User(instanceID int64) string { return strconv.FormatInt(instanceID, 10) }

// Sign issues a user certificate for g.Key valid for ttl from now, bound to
// g.InstanceID and g.Sources (which must not be empty). It fills in and
// returns g's time window, key id and serial with the certificate.
func (c *CA) Sign(g Grant, ttl time.Duration) (*ssh.Certificate, Grant, error) {
	if g.InstanceID <= 0 {
		return nil, g, suanli.Errorf(suanli.EINVALID, "certificate: instance id %d: must be positive", g.InstanceID)
	}
	if len(g.Sources) == 0 {
		return nil, g, suanli.Errorf(suanli.EINVALID, "certificate for instance %d: no source address: every certificate is bound to networks", g.InstanceID)
	}
	if _, ok := g.Key.(*ssh.Certificate); ok || g.Key == nil {
		return nil, g, suanli.FieldErrorf("public_key", "give a plain public key, not a certificate")
	}
	if ttl <= 0 {
		return nil, g, suanli.FieldErrorf("ttl", "must be positive")
	}
	now := c.Now().UTC().Truncate(time.Second)
	g.ValidAfter, g.ValidBefore = now.Add(-clockSkew), now.Add(ttl)
	var serial [8]byte
	rand.Read(serial[:])
	g.Serial = binary.BigEndian.Uint64(serial[:])
	g.KeyID = fmt.Sprintf("suanli instance=%d account=%d key=%s serial=%d", g.InstanceID, g.AccountID, ssh.FingerprintSHA256(g.Key), g.Serial)
	g.PTY = true
	cert := &ssh.Certificate{
		Key:             g.Key,
		Serial:          g.Serial,
		CertType:        ssh.UserCert,
		KeyId:           g.KeyID,
		ValidPrincipals: []string{User(g.InstanceID)},
		ValidAfter:      uint64(g.ValidAfter.Unix()),
		ValidBefore:     uint64(g.ValidBefore.Unix()),
		Permissions: ssh.Permissions{
			CriticalOptions: map[string]string{
				OptionInstance:      User(g.InstanceID),
				OptionSourceAddress: FormatSourceAddress(g.Sources),
			},
			Extensions: map[string]string{ExtensionPTY: ""},
		},
	}
	if err := cert.SignCert(rand.Reader, c.signer); err != nil {
		return nil, g, fmt.Errorf("sign certificate for instance %d: %w", g.InstanceID, err)
	}
	return cert, g, nil
}

// MarshalCert returns cert in the one-line OpenSSH format that ssh's
// CertificateFile reads.
func MarshalCert(cert *ssh.Certificate) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(cert)))
}

// ParseAuthorizedKey parses one authorized_keys line (options are refused).
// It returns the key and its comment.
func ParseAuthorizedKey(line string) (ssh.PublicKey, string, error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return nil, "", suanli.FieldErrorf("public_key", "empty: give the contents of a .pub file, e.g. ~/.ssh/id_ed25519.pub")
	}
	if strings.ContainsAny(line, "\n\r") {
		return nil, "", suanli.FieldErrorf("public_key", "one key per line: give a single .pub line")
	}
	key, comment, options, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, "", suanli.FieldErrorf("public_key", "not an SSH public key (%v): give the contents of a .pub file, e.g. ~/.ssh/id_ed25519.pub", err)
	}
	if len(options) > 0 || len(bytes.TrimSpace(rest)) > 0 {
		return nil, "", suanli.FieldErrorf("public_key", "give a bare key line without authorized_keys options")
	}
	return key, comment, nil
}

// CheckUserKey refuses keys that must not be certified: certificates, and
// RSA keys under 2048 bits, DSA, and unknown types.
func CheckUserKey(key ssh.PublicKey) error {
	switch key.Type() {
	case ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, ssh.KeyAlgoSKED25519, ssh.KeyAlgoSKECDSA256:
		return nil
	case ssh.KeyAlgoRSA:
		if ck, ok := key.(ssh.CryptoPublicKey); ok {
			if rk, ok := ck.CryptoPublicKey().(interface{ Size() int }); ok && rk.Size()*8 >= 2048 {
				return nil
			}
		}
		return suanli.FieldErrorf("public_key", "RSA key shorter than 2048 bits: generate a new one with ssh-keygen -t ed25519")
	}
	return suanli.FieldErrorf("public_key", "key type %s is not accepted: use ed25519, ECDSA or RSA ≥ 2048 bits (ssh-keygen -t ed25519)", key.Type())
}
