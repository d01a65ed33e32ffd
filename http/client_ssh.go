package http

import (
	"context"
	"fmt"
	"net/http"

	"github.com/suanli/suanli"
)

var _ suanli.SSHService = (*Client)(nil)

// AddSSHKey registers a public key on the caller's account.
func (c *Client) AddSSHKey(ctx context.Context, name, publicKey string) (*suanli.SSHKey, error) {
	var k suanli.SSHKey
	return &k, c.do(ctx, c.HTTP, http.MethodPost, "/v1/ssh/keys", SSHKeyCreate{Name: name, PublicKey: publicKey}, &k)
}

// FindSSHKeys lists the caller's keys.
func (c *Client) FindSSHKeys(ctx context.Context) ([]*suanli.SSHKey, error) {
	var l SSHKeyList
	err := c.get(ctx, "/v1/ssh/keys", &l)
	return l.Keys, err
}

// RemoveSSHKey removes one of the caller's keys.
func (c *Client) RemoveSSHKey(ctx context.Context, id int64) error {
	return c.do(ctx, c.HTTP, http.MethodDelete, fmt.Sprintf("/v1/ssh/keys/%d", id), nil, nil)
}

// AddAllowedNetwork adds a network to the caller's allowlist.
func (c *Client) AddAllowedNetwork(ctx context.Context, cidr, note string) (*suanli.AllowedNetwork, error) {
	var n suanli.AllowedNetwork
	return &n, c.do(ctx, c.HTTP, http.MethodPost, "/v1/ssh/allowlist", AllowlistCreate{CIDR: cidr, Note: note}, &n)
}

// FindAllowedNetworks lists the caller's allowlist.
func (c *Client) FindAllowedNetworks(ctx context.Context) ([]*suanli.AllowedNetwork, error) {
	var l AllowlistReply
	err := c.get(ctx, "/v1/ssh/allowlist", &l)
	return l.Networks, err
}

// RemoveAllowedNetwork removes an allowlist entry.
func (c *Client) RemoveAllowedNetwork(ctx context.Context, id int64) error {
	return c.do(ctx, c.HTTP, http.MethodDelete, fmt.Sprintf("/v1/ssh/allowlist/%d", id), nil, nil)
}

// SignSSHCertificate asks for a certificate for one of the caller's
// instances. The server binds it to the address it sees this request come
// from when the account has no allowlist.
func (c *Client) SignSSHCertificate(ctx context.Context, r suanli.SSHCertRequest) (*suanli.SSHCertificate, error) {
	var cert suanli.SSHCertificate
	return &cert, c.do(ctx, c.HTTP, http.MethodPost, "/v1/ssh/certificates", r, &cert)
}

// SSHCA returns the CA's public keys.
func (c *Client) SSHCA(ctx context.Context) (*suanli.SSHCA, error) {
	var ca suanli.SSHCA
	return &ca, c.get(ctx, "/v1/ssh/ca", &ca)
}
