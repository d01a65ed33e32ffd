package console

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

func (c *Console) registerAccountRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /account", c.page(c.handleAccount))
	mux.HandleFunc("POST /account/ssh-keys", c.form(c.handleSSHKeyAdd))
	mux.HandleFunc("POST /account/ssh-keys/{id}/delete", c.form(c.handleSSHKeyRemove))
	mux.HandleFunc("POST /account/allowlist", c.form(c.handleNetworkAdd))
	mux.HandleFunc("POST /account/allowlist/{id}/delete", c.form(c.handleNetworkRemove))
}

// keyRow is one SSH key with what removing it does.
type keyRow struct {
	K       *suanli.SSHKey
	Confirm string
}

// networkRow is one allowlist entry with what removing it does.
type networkRow struct {
	N       *suanli.AllowedNetwork
	Confirm string
}

// accountPage is the account template's data: the SSH keys certificates
// are issued for and the networks they are valid from, each with its add
// form (what was typed and the error, when one came back).
type accountPage struct {
	Account  *suanli.Account
	Keys     []keyRow
	Networks []networkRow
	KeyName  string
	KeyText  string
	KeyErr   *fieldError
	CIDR     string
	Note     string
	NetErr   *fieldError
	ClientIP string // the address this request came from, as the server saw it
}

func keyRemoveText(k *suanli.SSHKey) string {
	return "Remove SSH key " + strconv.Quote(k.Name) + " (" + k.Fingerprint + ")? No new certificates are issued for it; " +
		"certificates already issued expire within minutes."
}

func networkRemoveText(n *suanli.AllowedNetwork, last bool) string {
	t := "Remove " + n.CIDR + " from your allowlist? New SSH certificates will not be valid from it."
	if last {
		t += " It is the last entry: certificates will then be valid only from the address that asks for them."
	}
	return t
}

func (c *Console) accountPage(r *http.Request) (*accountPage, error) {
	ctx := r.Context()
	acct, err := c.svc.Me(ctx)
	if err != nil {
		return nil, err
	}
	p := &accountPage{Account: acct, ClientIP: clientIP(r)}
	keys, err := c.svc.FindSSHKeys(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		p.Keys = append(p.Keys, keyRow{K: k, Confirm: keyRemoveText(k)})
	}
	nets, err := c.svc.FindAllowedNetworks(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range nets {
		p.Networks = append(p.Networks, networkRow{N: n, Confirm: networkRemoveText(n, len(nets) == 1)})
	}
	return p, nil
}

func (c *Console) handleAccount(w http.ResponseWriter, r *http.Request, s *session) error {
	p, err := c.accountPage(r)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "account.html", &view{Title: "Account", Nav: "account", sess: s, Notice: notice(r), Page: p})
	return nil
}

// accountFormError shows the account page again with a form's error, or
// returns err when it is not one a form can show.
func (c *Console) accountFormError(w http.ResponseWriter, r *http.Request, s *session, err error, fill func(p *accountPage, fe *fieldError)) error {
	fe := formError(err)
	if fe == nil {
		return err
	}
	p, perr := c.accountPage(r)
	if perr != nil {
		return perr
	}
	fill(p, fe)
	c.render(w, r, statusOf(err), "account.html", &view{Title: "Account", Nav: "account", sess: s, Page: p})
	return nil
}

// handleSSHKeyAdd registers a public key; errors come back on its form.
func (c *Console) handleSSHKeyAdd(w http.ResponseWriter, r *http.Request, s *session) error {
	name, text := r.PostFormValue("name"), r.PostFormValue("public_key")
	k, err := c.svc.AddSSHKey(r.Context(), name, text)
	if err != nil {
		return c.accountFormError(w, r, s, err, func(p *accountPage, fe *fieldError) { p.KeyName, p.KeyText, p.KeyErr = name, text, fe })
	}
	auditTarget(r, "ssh key "+k.Fingerprint)
	c.log.Info("console ssh key added", "ssh_key_id", k.ID, "account_id", s.accountID)
	redirect(w, r, withNotice("/account", "keyadded")+"#keys-h")
	return nil
}

// handleSSHKeyRemove removes a key once confirmed.
func (c *Console) handleSSHKeyRemove(w http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "SSH key")
	if err != nil {
		return err
	}
	if !confirmed(r) {
		keys, err := c.svc.FindSSHKeys(r.Context())
		if err != nil {
			return err
		}
		for _, k := range keys {
			if k.ID == id {
				c.confirm(w, r, s, "account", confirmPage{Heading: "Remove SSH key " + strconv.Quote(k.Name) + "?", Text: keyRemoveText(k),
					Post: r.URL.Path, Back: "/account#keys-h", Label: "Remove", Danger: true})
				return nil
			}
		}
		return suanli.Errorf(suanli.ENOTFOUND, "SSH key %d not found", id)
	}
	if err := c.svc.RemoveSSHKey(r.Context(), id); err != nil {
		return err
	}
	c.log.Info("console ssh key removed", "ssh_key_id", id, "account_id", s.accountID)
	redirect(w, r, withNotice("/account", "keyremoved")+"#keys-h")
	return nil
}

// handleNetworkAdd adds a network to the allowlist; errors come back on
// its form.
func (c *Console) handleNetworkAdd(w http.ResponseWriter, r *http.Request, s *session) error {
	cidr, note := r.PostFormValue("cidr"), r.PostFormValue("note")
	auditTarget(r, "allowlist "+strings.TrimSpace(cidr))
	n, err := c.svc.AddAllowedNetwork(r.Context(), cidr, note)
	if err != nil {
		return c.accountFormError(w, r, s, err, func(p *accountPage, fe *fieldError) { p.CIDR, p.Note, p.NetErr = cidr, note, fe })
	}
	c.log.Info("console allowlist entry added", "allowlist_id", n.ID, "account_id", s.accountID)
	redirect(w, r, withNotice("/account", "netadded")+"#allow-h")
	return nil
}

// handleNetworkRemove removes an allowlist entry once confirmed.
func (c *Console) handleNetworkRemove(w http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "allowlist entry")
	if err != nil {
		return err
	}
	if !confirmed(r) {
		nets, err := c.svc.FindAllowedNetworks(r.Context())
		if err != nil {
			return err
		}
		for _, n := range nets {
			if n.ID == id {
				c.confirm(w, r, s, "account", confirmPage{Heading: "Remove " + n.CIDR + " from the allowlist?", Text: networkRemoveText(n, len(nets) == 1),
					Post: r.URL.Path, Back: "/account#allow-h", Label: "Remove", Danger: true})
				return nil
			}
		}
		return suanli.Errorf(suanli.ENOTFOUND, "allowlist entry %d not found", id)
	}
	if err := c.svc.RemoveAllowedNetwork(r.Context(), id); err != nil {
		return err
	}
	c.log.Info("console allowlist entry removed", "allowlist_id", id, "account_id", s.accountID)
	redirect(w, r, withNotice("/account", "netremoved")+"#allow-h")
	return nil
}
