package vastapi

import (
	"net/http"
	"strings"

	"github.com/suanli/suanli"
)

func (h *Handler) registerAccountRoutes() {
	h.handle(http.MethodGet, "/api/v0/users/current", catUserRead, h.handleCurrentUser)
	h.handle(http.MethodGet, "/api/v0/ssh", catUserRead, h.handleSSHKeys)
	h.handle(http.MethodPost, "/api/v0/ssh", catUserWrite, h.handleSSHKeyAdd)
	h.handle(http.MethodPut, "/api/v0/ssh/{id}", catUserWrite, h.handleSSHKeyUpdate)
	h.handle(http.MethodDelete, "/api/v0/ssh/{id}", catUserWrite, h.handleSSHKeyRemove)
	h.registerKeyRoutes()
}

// handleCurrentUser is GET /api/v0/users/current: the account, its balance
// (as both balance and credit: Suanli accounts are prepaid), and api_key,
// which the CLI removes before showing the rest. api_key is the calling
// key's displayable prefix: Suanli keeps no secret it could show.
func (h *Handler) handleCurrentUser(w http.ResponseWriter, r *http.Request, _ args) error {
	ctx := r.Context()
	a, err := h.svc.Me(ctx)
	if err != nil {
		return err
	}
	u := map[string]any{
		"id": a.ID, "username": a.Name, "fullname": a.Name, "email": nullIfEmpty(a.Email), "email_verified": false,
		"role": a.Role, "api_key": keyPrefix(ctx), "created_at": epoch(a.CreatedAt),
		"balance": nil, "credit": nil, "can_pay": nil, "has_billing": true, "billing_creditonly": true,
		"ssh_key": nil, "user": a.Name,
	}
	// A key without billing:read still reads its account; the money stays null.
	if b, err := h.svc.Balance(ctx); err == nil {
		u["balance"], u["credit"], u["can_pay"] = dollars(b.Balance), dollars(b.Balance), b.Balance > 0
		u["earnings"], u["burn_rate"], u["spent"] = dollars(b.Earnings), dollars(b.BurnRate), dollars(b.Spent)
	} else if suanli.ErrorCode(err) != suanli.EFORBIDDEN {
		return err
	}
	if keys, err := h.svc.FindSSHKeys(ctx); err == nil && len(keys) > 0 {
		u["ssh_key"] = keys[0].PublicKey
	}
	return writeJSON(w, http.StatusOK, u)
}

func sshKeyJSON(k *suanli.SSHKey) map[string]any {
	return map[string]any{"id": k.ID, "user_id": k.AccountID, "key": k.PublicKey, "public_key": k.PublicKey,
		"name": k.Name, "fingerprint": k.Fingerprint, "created_at": k.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), "deleted_at": nil}
}

// handleSSHKeys is GET /api/v0/ssh/: a bare list.
func (h *Handler) handleSSHKeys(w http.ResponseWriter, r *http.Request, _ args) error {
	keys, err := h.svc.FindSSHKeys(r.Context())
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(keys))
	for i, k := range keys {
		out[i] = sshKeyJSON(k)
	}
	return writeJSON(w, http.StatusOK, out)
}

// sshKeyName names a key by its comment ("alice@laptop"), else "vast".
func sshKeyName(pub string) string {
	if f := strings.Fields(pub); len(f) >= 3 {
		return strings.Join(f[2:], " ")
	}
	return "vast"
}

func (h *Handler) addSSHKey(r *http.Request) (*suanli.SSHKey, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	pub, has, err := body.str("ssh_key")
	if err != nil {
		return nil, err
	}
	if !has || strings.TrimSpace(pub) == "" {
		return nil, suanli.FieldErrorf("ssh_key", "give the public key (the .pub file's line)")
	}
	k, err := h.svc.AddSSHKey(r.Context(), sshKeyName(pub), strings.TrimSpace(pub))
	return k, renameFields(err, map[string]string{"public_key": "ssh_key", "key": "ssh_key"})
}

// handleSSHKeyAdd is POST /api/v0/ssh/ {"ssh_key": "ssh-ed25519 AAAA…"}.
func (h *Handler) handleSSHKeyAdd(w http.ResponseWriter, r *http.Request, _ args) error {
	k, err := h.addSSHKey(r)
	if err != nil {
		return err
	}
	out := sshKeyJSON(k)
	out["success"] = true
	return writeJSON(w, http.StatusOK, out)
}

// handleSSHKeyUpdate is PUT /api/v0/ssh/{id}/ {"ssh_key": …}: the new key
// is added, then the old one removed.
func (h *Handler) handleSSHKeyUpdate(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	keys, err := h.svc.FindSSHKeys(r.Context())
	if err != nil {
		return err
	}
	found := false
	for _, k := range keys {
		found = found || k.ID == id
	}
	if !found {
		return suanli.Errorf(suanli.ENOTFOUND, "SSH key %d not found", id)
	}
	k, err := h.addSSHKey(r)
	if err != nil {
		return err
	}
	if err := h.svc.RemoveSSHKey(r.Context(), id); err != nil {
		return err
	}
	out := sshKeyJSON(k)
	out["success"] = true
	return writeJSON(w, http.StatusOK, out)
}

// handleSSHKeyRemove is DELETE /api/v0/ssh/{id}/.
func (h *Handler) handleSSHKeyRemove(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	if err := h.svc.RemoveSSHKey(r.Context(), id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ok)
}
