package suanli

import (
	"context"
	"time"
)

// SSH access (DESIGN §7): the control plane is an SSH certificate authority.
// A renter registers public keys and, optionally, an IP allowlist on the
// account; `suanli ssh ID` asks for a short-lived certificate for one of those
// keys, bound to one instance and to the allowlist (or, when the account has
// none, to the address the API saw the request come from), and runs the
// system ssh with it. The agent's SSH endpoint trusts only the CA.

// SSHKey is a renter's SSH public key. Only keys on the account's list are
// signed, so removing one stops new certificates for it at once (issued ones
// expire within minutes).
type SSHKey struct {
	ID          int64     `json:"id"`
	AccountID   int64     `json:"account_id"`
	Name        string    `json:"name"`
	PublicKey   string    `json:"public_key"`  // authorized_keys format: "ssh-ed25519 AAAA…"
	Fingerprint string    `json:"fingerprint"` // "SHA256:…", as ssh-keygen -l prints it
	CreatedAt   time.Time `json:"created_at"`
}

// AllowedNetwork is one entry of an account's IP allowlist: certificates for
// the account's instances are valid only from these networks (the
// certificate's source-address option), enforced by the agent against the
// TCP peer.
type AllowedNetwork struct {
	ID        int64     `json:"id"`
	AccountID int64     `json:"account_id"`
	CIDR      string    `json:"cidr"` // canonical: "203.0.113.0/24", "2001:db8::/32", "198.51.100.7/32"
	Note      string    `json:"note,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// SSHEndpoint is where a machine's agent accepts SSH, as the agent reports it
// in its sync. Host is the address the agent advertises; when it names none
// the control plane uses the address it saw the agent's sync come from.
type SSHEndpoint struct {
	Host    string `json:"host,omitempty"`
	Port    int    `json:"port"`
	HostKey string `json:"host_key"` // the agent's host public key, authorized_keys format
}

// SSHCertRequest asks for a certificate for one of the caller's keys, bound
// to one instance. TTLSeconds is 0 for DefaultSSHCertTTL, at most
// MaxSSHCertTTL.
type SSHCertRequest struct {
	InstanceID int64  `json:"instance_id"`
	PublicKey  string `json:"public_key"` // authorized_keys format; must be on the account's key list
	TTLSeconds int64  `json:"ttl_seconds,omitempty"`
	// ClientAddr is the caller's address as the API server saw it; the HTTP
	// layer sets it, clients cannot.
	ClientAddr string `json:"-"`
}

// Certificate lifetimes.
const (
	DefaultSSHCertTTL = 5 * time.Minute
	MinSSHCertTTL     = time.Minute
	MaxSSHCertTTL     = time.Hour
)

// SSHCertificate is a signed certificate and everything the system ssh
// needs to reach the instance with it: the login name, the agent's address
// and its host key (to pin in a known_hosts file).
type SSHCertificate struct {
	InstanceID    int64     `json:"instance_id"`
	MachineID     int64     `json:"machine_id"`
	Certificate   string    `json:"certificate"` // OpenSSH format, for ssh -o CertificateFile=…
	KeyID         string    `json:"key_id"`
	User          string    `json:"user"` // the login name: the certificate's only principal
	Host          string    `json:"host"`
	Port          int       `json:"port"`
	HostKey       string    `json:"host_key"`
	SourceAddress []string  `json:"source_address"` // CIDRs the certificate is valid from
	ValidAfter    time.Time `json:"valid_after"`
	ValidBefore   time.Time `json:"valid_before"`
}

// SSHCA is the certificate authority's public side, served to anyone.
type SSHCA struct {
	PublicKeys []string `json:"public_keys"` // authorized_keys format; agents trust each
}

// SSHService manages SSH keys, the IP allowlist, and certificates.
type SSHService interface {
	// AddSSHKey registers a public key on the caller's account. EINVALID for
	// a malformed or weak key, ECONFLICT when it is registered already.
	AddSSHKey(ctx context.Context, name, publicKey string) (*SSHKey, error)
	// FindSSHKeys lists the caller's keys.
	FindSSHKeys(ctx context.Context) ([]*SSHKey, error)
	// RemoveSSHKey removes one of the caller's keys. ENOTFOUND.
	RemoveSSHKey(ctx context.Context, id int64) error
	// AddAllowedNetwork adds a CIDR (or a bare address) to the caller's
	// allowlist. EINVALID, ECONFLICT when present.
	AddAllowedNetwork(ctx context.Context, cidr, note string) (*AllowedNetwork, error)
	// FindAllowedNetworks lists the caller's allowlist.
	FindAllowedNetworks(ctx context.Context) ([]*AllowedNetwork, error)
	// RemoveAllowedNetwork removes an allowlist entry. ENOTFOUND.
	RemoveAllowedNetwork(ctx context.Context, id int64) error
	// SignSSHCertificate signs a certificate for one of the caller's
	// instances. ENOTFOUND (instance, or another tenant's), ECONFLICT (not
	// running), EFORBIDDEN (key not on the account), EUNAVAILABLE (no CA,
	// or the host has no SSH endpoint).
	SignSSHCertificate(ctx context.Context, r SSHCertRequest) (*SSHCertificate, error)
	// SSHCA returns the CA's public keys.
	SSHCA(ctx context.Context) (*SSHCA, error)
}
