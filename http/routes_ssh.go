package http

import (
	"net/http"

	"github.com/suanli/suanli"
)

// SSHKeyList is the reply of GET /v1/ssh/keys.
type SSHKeyList struct {
	Keys []*suanli.SSHKey `json:"keys"`
}

// SSHKeyCreate is the body of POST /v1/ssh/keys.
type SSHKeyCreate struct {
	Name      string `json:"name,omitempty"`
	PublicKey string `json:"public_key"`
}

// AllowlistReply is the reply of GET /v1/ssh/allowlist.
type AllowlistReply struct {
	Networks []*suanli.AllowedNetwork `json:"networks"`
}

// AllowlistCreate is the body of POST /v1/ssh/allowlist.
type AllowlistCreate struct {
	CIDR string `json:"cidr"`
	Note string `json:"note,omitempty"`
}

func (s *Server) registerSSHRoutes() {
	s.route("GET /v1/ssh/ca", true, func(w http.ResponseWriter, r *http.Request) error {
		ca, err := s.Service.SSHCA(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, 200, ca)
	})
	s.route("GET /v1/ssh/keys", false, func(w http.ResponseWriter, r *http.Request) error {
		keys, err := s.Service.FindSSHKeys(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, 200, SSHKeyList{Keys: keys})
	})
	s.route("POST /v1/ssh/keys", false, func(w http.ResponseWriter, r *http.Request) error {
		var c SSHKeyCreate
		if err := decode(r, &c); err != nil {
			return err
		}
		k, err := s.Service.AddSSHKey(r.Context(), c.Name, c.PublicKey)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, k)
	})
	s.route("DELETE /v1/ssh/keys/{id}", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		if err := s.Service.RemoveSSHKey(r.Context(), id); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	s.route("GET /v1/ssh/allowlist", false, func(w http.ResponseWriter, r *http.Request) error {
		ns, err := s.Service.FindAllowedNetworks(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, 200, AllowlistReply{Networks: ns})
	})
	s.route("POST /v1/ssh/allowlist", false, func(w http.ResponseWriter, r *http.Request) error {
		var c AllowlistCreate
		if err := decode(r, &c); err != nil {
			return err
		}
		n, err := s.Service.AddAllowedNetwork(r.Context(), c.CIDR, c.Note)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, n)
	})
	s.route("DELETE /v1/ssh/allowlist/{id}", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		if err := s.Service.RemoveAllowedNetwork(r.Context(), id); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	s.route("POST /v1/ssh/certificates", false, func(w http.ResponseWriter, r *http.Request) error {
		var c suanli.SSHCertRequest
		if err := decode(r, &c); err != nil {
			return err
		}
		c.ClientAddr = clientIP(r)
		cert, err := s.Service.SignSSHCertificate(r.Context(), c)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, cert)
	})
}

func init() {
	apiOps = append(apiOps,
		apiOp{"GET", "/v1/ssh/ca", "The SSH certificate authority's public keys (no credential needed).", nil, suanli.SSHCA{}},
		apiOp{"GET", "/v1/ssh/keys", "The caller's SSH public keys.", nil, SSHKeyList{}},
		apiOp{"POST", "/v1/ssh/keys", "Register an SSH public key (only registered keys are certified).", SSHKeyCreate{}, suanli.SSHKey{}},
		apiOp{"DELETE", "/v1/ssh/keys/{id}", "Remove an SSH public key.", nil, nil},
		apiOp{"GET", "/v1/ssh/allowlist", "The caller's IP allowlist (certificates' source-address).", nil, AllowlistReply{}},
		apiOp{"POST", "/v1/ssh/allowlist", "Add a network to the IP allowlist.", AllowlistCreate{}, suanli.AllowedNetwork{}},
		apiOp{"DELETE", "/v1/ssh/allowlist/{id}", "Remove an allowlist entry.", nil, nil},
		apiOp{"POST", "/v1/ssh/certificates", "Sign a short-lived SSH certificate for one running instance.", suanli.SSHCertRequest{}, suanli.SSHCertificate{}},
	)
}
