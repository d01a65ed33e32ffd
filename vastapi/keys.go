package vastapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
)

func (h *Handler) registerKeyRoutes() {
	h.handle(http.MethodGet, "/api/v0/auth/apikeys", catUserRead, h.handleKeys, limited)
	h.handle(http.MethodPost, "/api/v0/auth/apikeys", catUserWrite, h.handleKeyCreate, limited)
	h.handle(http.MethodGet, "/api/v0/auth/apikeys/{id}", catUserRead, h.handleKey, limited)
	h.handle(http.MethodDelete, "/api/v0/auth/apikeys/{id}", catUserWrite, h.handleKeyDelete, limited)
}

// keyNames maps the native key fields onto Vast's body.
var keyNames = map[string]string{"scopes": "permissions", "ttl_seconds": "ttl_seconds", "name": "name"}

// keyJSON is a key in Vast's list shape. key is the displayable prefix:
// only a hash of the secret is kept.
func keyJSON(k *suanli.APIKey) map[string]any {
	rights := "custom"
	for _, s := range k.Scopes {
		if s == suanli.ScopeAll {
			rights = "full"
		}
	}
	return map[string]any{"id": k.ID, "user_id": k.AccountID, "key": k.Prefix, "name": k.Name, "rights": rights,
		"permissions": categoriesFor(k.Scopes), "scopes": k.Scopes, "created_at": epoch(k.CreatedAt),
		"expires_at": epoch(k.ExpiresAt), "last_used_at": epochPtr(k.LastUsedAt), "team_id": nil, "team_name": nil}
}

// handleKeys is GET /api/v0/auth/apikeys/: {"apikeys": […]}, the caller's
// active keys.
func (h *Handler) handleKeys(w http.ResponseWriter, r *http.Request, _ args) error {
	ks, err := h.svc.FindAPIKeys(r.Context(), false)
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, k := range ks {
		if k.Kind == suanli.KeyLive {
			out = append(out, keyJSON(k))
		}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"apikeys": out})
}

// handleKey is GET /api/v0/auth/apikeys/{id}/.
func (h *Handler) handleKey(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	ks, err := h.svc.FindAPIKeys(r.Context(), true)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if k.ID == id {
			return writeJSON(w, http.StatusOK, keyJSON(k))
		}
	}
	return suanli.Errorf(suanli.ENOTFOUND, "API key %d not found", id)
}

// handleKeyCreate is POST /api/v0/auth/apikeys/ {"name": …, "permissions":
// {"api": {"instance_read": {}, …}}}: a native key whose scopes are the
// categories' (see categoryScopes; without permissions, the calling key's
// own). Every Suanli key expires: ttl_seconds (Suanli's addition) or the
// longest a key may live. The secret is in the reply, once.
func (h *Handler) handleKeyCreate(w http.ResponseWriter, r *http.Request, _ args) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	name, _, err := body.str("name")
	if err != nil {
		return err
	}
	if name == "" {
		name = "vast-" + h.now().Format("20060102-150405")
	}
	if body.has("key_params") {
		return suanli.FieldErrorf("key_params", "wildcard key parameters are not supported here; leave them out")
	}
	var scopes, unmapped []string
	if raw, found := body["permissions"]; found && !isNull(raw) {
		cats, err := permissionCategories(raw)
		if err != nil {
			return err
		}
		if scopes, unmapped, err = scopesFor(cats); err != nil {
			return err
		}
		if len(scopes) == 0 {
			return suanli.FieldErrorf("permissions", "%v grant nothing on this marketplace: add a category such as instance_read", unmapped)
		}
	} else {
		scopes = suanli.PrincipalFromContext(r.Context()).Scopes
	}
	ttl := int64(auth.MaxKeyLifetime / time.Second)
	if n, has, err := body.num("ttl_seconds"); err != nil {
		return err
	} else if has {
		if ttl, err = n.int("ttl_seconds"); err != nil {
			return err
		}
	}
	k, err := h.svc.CreateAPIKey(r.Context(), suanli.KeyCreate{Name: name, Scopes: scopes, TTLSeconds: ttl})
	if err != nil {
		return renameFields(err, keyNames)
	}
	out := keyJSON(k)
	out["success"], out["key"], out["unmapped_permissions"] = true, k.Secret, nonNil(unmapped)
	return writeJSON(w, http.StatusOK, out)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// permissionCategories reads Vast's permissions object: {"api": {category:
// {…}, …}} (the categories' own constraints are not supported and must be
// empty), or the categories at the top level.
func permissionCategories(raw json.RawMessage) ([]string, error) {
	perms, err := parseObj("permissions", raw)
	if err != nil {
		return nil, err
	}
	if api, found := perms["api"]; found {
		if perms, err = parseObj("permissions", api); err != nil {
			return nil, err
		}
	}
	var cats []string
	for c, v := range perms {
		constraints, err := parseObj("permissions", v)
		if err != nil {
			return nil, suanli.FieldErrorf("permissions", "%s: want an object", c)
		}
		if len(constraints) > 0 {
			return nil, suanli.FieldErrorf("permissions", "%s: constraints and params inside a category are not supported here; give {}", c)
		}
		cats = append(cats, c)
	}
	if len(cats) == 0 {
		return nil, suanli.FieldErrorf("permissions", "name at least one category, e.g. {\"api\": {\"instance_read\": {}}}")
	}
	sort.Strings(cats)
	return cats, nil
}

// handleKeyDelete is DELETE /api/v0/auth/apikeys/{id}/: the key (and the
// tokens cut from it) stop working at once.
func (h *Handler) handleKeyDelete(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	if _, err := h.svc.RevokeAPIKey(r.Context(), id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"success": true, "msg": fmt.Sprintf("API key %d revoked", id)})
}
