package control

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth/sshca"
)

// maxSSHKeys and maxAllowlist bound what one account may register.
const (
	maxSSHKeys   = 50
	maxAllowlist = sshca.MaxSources
)

// AddSSHKey registers a public key on the caller's account.
func (s *Service) AddSSHKey(ctx context.Context, name, publicKey string) (*suanli.SSHKey, error) {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return nil, err
	}
	key, comment, err := sshca.ParseAuthorizedKey(publicKey)
	if err != nil {
		return nil, err
	}
	if err := sshca.CheckUserKey(key); err != nil {
		return nil, err
	}
	if name = strings.TrimSpace(name); name == "" {
		name = comment
	}
	if len(name) > 200 {
		return nil, suanli.FieldErrorf("name", "longer than 200 characters")
	}
	have, err := s.Store.FindSSHKeys(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	if len(have) >= maxSSHKeys {
		return nil, suanli.Errorf(suanli.ECONFLICT, "your account has %d SSH keys, the most allowed: remove one with `suanli ssh-keys rm`", len(have))
	}
	k := &suanli.SSHKey{AccountID: p.AccountID, Name: name, Fingerprint: ssh.FingerprintSHA256(key), CreatedAt: s.now(),
		PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))}
	if err := s.Store.CreateSSHKey(ctx, k); err != nil {
		return nil, err
	}
	s.Logger.Info("ssh key added", "account_id", p.AccountID, "ssh_key_id", k.ID, "fingerprint", k.Fingerprint)
	return k, nil
}

// FindSSHKeys lists the caller's keys.
func (s *Service) FindSSHKeys(ctx context.Context) ([]*suanli.SSHKey, error) {
	p, err := principal(ctx, suanli.ScopeInstanceRead)
	if err != nil {
		return nil, err
	}
	return s.Store.FindSSHKeys(ctx, p.AccountID)
}

// RemoveSSHKey removes one of the caller's keys; certificates already issued
// for it expire on their own within minutes.
func (s *Service) RemoveSSHKey(ctx context.Context, id int64) error {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return err
	}
	if err := s.Store.DeleteSSHKey(ctx, p.AccountID, id); err != nil {
		return err
	}
	s.Logger.Info("ssh key removed", "account_id", p.AccountID, "ssh_key_id", id)
	return nil
}

// AddAllowedNetwork adds a network to the caller's IP allowlist. A bare
// address becomes a /32 (or /128).
func (s *Service) AddAllowedNetwork(ctx context.Context, cidr, note string) (*suanli.AllowedNetwork, error) {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return nil, err
	}
	pfx, err := sshca.ParseNetwork(strings.TrimSpace(cidr))
	if err != nil {
		return nil, suanli.FieldErrorf("cidr", "%v: give an address (203.0.113.7) or a network (203.0.113.0/24)", err)
	}
	if len(note) > 200 {
		return nil, suanli.FieldErrorf("note", "longer than 200 characters")
	}
	have, err := s.Store.FindAllowedNetworks(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	if len(have) >= maxAllowlist {
		return nil, suanli.Errorf(suanli.ECONFLICT, "your allowlist has %d networks, the most allowed: merge some into a wider CIDR", len(have))
	}
	n := &suanli.AllowedNetwork{AccountID: p.AccountID, CIDR: pfx.String(), Note: note, CreatedAt: s.now()}
	if err := s.Store.CreateAllowedNetwork(ctx, n); err != nil {
		return nil, err
	}
	s.Logger.Info("allowlist entry added", "account_id", p.AccountID, "cidr", n.CIDR)
	return n, nil
}

// FindAllowedNetworks lists the caller's allowlist.
func (s *Service) FindAllowedNetworks(ctx context.Context) ([]*suanli.AllowedNetwork, error) {
	p, err := principal(ctx, suanli.ScopeInstanceRead)
	if err != nil {
		return nil, err
	}
	return s.Store.FindAllowedNetworks(ctx, p.AccountID)
}

// RemoveAllowedNetwork removes an entry of the caller's allowlist.
func (s *Service) RemoveAllowedNetwork(ctx context.Context, id int64) error {
	p, err := principal(ctx, suanli.ScopeInstanceWrite)
	if err != nil {
		return err
	}
	if err := s.Store.DeleteAllowedNetwork(ctx, p.AccountID, id); err != nil {
		return err
	}
	s.Logger.Info("allowlist entry removed", "account_id", p.AccountID, "allowlist_id", id)
	return nil
}

// SSHCA returns the CA's public key. EUNAVAILABLE when SSH is off.
func (s *Service) SSHCA(ctx context.Context) (*suanli.SSHCA, error) {
	if s.SSHAuthority == nil {
		return nil, errNoSSHCA
	}
	return &suanli.SSHCA{PublicKeys: s.sshCAKeys()}, nil
}

var errNoSSHCA = suanli.Errorf(suanli.EUNAVAILABLE, "this server has no SSH certificate authority: start it with SSH enabled (the default)")

func (s *Service) sshCAKeys() []string {
	if s.SSHAuthority == nil {
		return nil
	}
	return []string{s.SSHAuthority.AuthorizedKey()}
}

// SignSSHCertificate signs a short-lived certificate for one of the caller's
// registered keys, bound to one of their running instances, valid from the
// account's IP allowlist, or, when the account has none, from the address
// the request came from (r.ClientAddr, as this server saw it).
func (s *Service) SignSSHCertificate(ctx context.Context, r suanli.SSHCertRequest) (*suanli.SSHCertificate, error) {
	if s.SSHAuthority == nil {
		return nil, errNoSSHCA
	}
	if r.InstanceID <= 0 {
		return nil, suanli.FieldErrorf("instance_id", "give the id of one of your instances (`suanli ls`)")
	}
	ttl := time.Duration(r.TTLSeconds) * time.Second
	if ttl == 0 {
		ttl = suanli.DefaultSSHCertTTL
	}
	if ttl < suanli.MinSSHCertTTL || ttl > suanli.MaxSSHCertTTL {
		return nil, suanli.FieldErrorf("ttl_seconds", "%d: give between %d and %d seconds", r.TTLSeconds,
			int(suanli.MinSSHCertTTL.Seconds()), int(suanli.MaxSSHCertTTL.Seconds()))
	}
	p, in, err := s.ownInstance(ctx, suanli.ScopeInstanceWrite, r.InstanceID, false)
	if err != nil {
		return nil, err
	}
	if in.AccountID != p.AccountID {
		// Operators see every instance, but SSH goes only to one's own.
		return nil, suanli.Errorf(suanli.ENOTFOUND, "instance %d not found", r.InstanceID)
	}
	if in.Status != suanli.StatusRunning {
		return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d is %s: SSH reaches running instances only (`suanli start %d`)", in.ID, in.Status, in.ID)
	}
	key, _, err := sshca.ParseAuthorizedKey(r.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := sshca.CheckUserKey(key); err != nil {
		return nil, err
	}
	fp := ssh.FingerprintSHA256(key)
	keys, err := s.Store.FindSSHKeys(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	registered := false
	for _, k := range keys {
		registered = registered || k.Fingerprint == fp
	}
	if !registered {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "SSH key %s is not on your account: add it with `suanli ssh-keys add FILE.pub`", fp)
	}
	ep, err := s.Store.FindMachineSSH(ctx, in.MachineID)
	if suanli.ErrorCode(err) == suanli.ENOTFOUND {
		return nil, suanli.Errorf(suanli.EUNAVAILABLE, "the host of instance %d (machine %d) has no SSH endpoint: its agent runs without SSH (ask the provider)", in.ID, in.MachineID)
	} else if err != nil {
		return nil, err
	}
	sources, err := s.sshSources(ctx, p.AccountID, r.ClientAddr)
	if err != nil {
		return nil, err
	}
	cert, g, err := s.SSHAuthority.Sign(sshca.Grant{InstanceID: in.ID, AccountID: p.AccountID, Key: key, Sources: sources}, ttl)
	if err != nil {
		return nil, err
	}
	out := &suanli.SSHCertificate{InstanceID: in.ID, MachineID: in.MachineID, Certificate: sshca.MarshalCert(cert), KeyID: g.KeyID,
		User: sshca.User(in.ID), Host: ep.Host, Port: ep.Port, HostKey: ep.HostKey, ValidAfter: g.ValidAfter, ValidBefore: g.ValidBefore}
	for _, p := range g.Sources {
		out.SourceAddress = append(out.SourceAddress, p.String())
	}
	s.Logger.Info("ssh certificate issued", "account_id", p.AccountID, "instance_id", in.ID, "fingerprint", fp,
		"source_address", sshca.FormatSourceAddress(g.Sources), "valid_before", g.ValidBefore, "serial", g.Serial)
	return out, nil
}

// sshSources is where a certificate may be used from: the account's
// allowlist, or the caller's own address when the list is empty.
func (s *Service) sshSources(ctx context.Context, accountID int64, clientAddr string) ([]netip.Prefix, error) {
	list, err := s.Store.FindAllowedNetworks(ctx, accountID)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, n := range list {
		pfx, err := netip.ParsePrefix(n.CIDR)
		if err != nil {
			return nil, err
		}
		out = append(out, pfx)
	}
	if len(out) > 0 {
		return out, nil
	}
	a, err := netip.ParseAddr(clientAddr)
	if err != nil {
		return nil, suanli.Errorf(suanli.EINVALID, "your address %q is unknown, so the certificate cannot be bound to it: add your networks with `suanli allowlist add CIDR`", clientAddr)
	}
	a = a.Unmap().WithZone("")
	return []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}, nil
}
