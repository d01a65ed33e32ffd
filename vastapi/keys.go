package vastapi

import "net/http"

func (h *Handler) registerKeyRoutes() {
	h.handle(http.MethodGet, "/api/v0/auth/apikeys", catUserRead, h.handleKeysUnavailable)
	h.handle(http.MethodPost, "/api/v0/auth/apikeys", catUserWrite, h.handleKeysUnavailable)
	h.handle(http.MethodGet, "/api/v0/auth/apikeys/{id}", catUserRead, h.handleKeysUnavailable)
	h.handle(http.MethodDelete, "/api/v0/auth/apikeys/{id}", catUserWrite, h.handleKeysUnavailable)
}

func (h *Handler) handleKeysUnavailable(w http.ResponseWriter, r *http.Request, _ args) error {
	return &notImplemented{msg: "API key management is not available on this marketplace yet"}
}
