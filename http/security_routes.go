package http

import (
	"net/http"
	"strconv"

	"github.com/suanli/suanli"
)

// KeyList is the reply of GET /v1/keys.
type KeyList struct {
	Keys []*suanli.APIKey `json:"keys"`
}

func (s *Server) registerKeyRoutes() {
	s.route("GET /v1/keys", false, func(w http.ResponseWriter, r *http.Request) error {
		ks, err := s.Service.FindAPIKeys(r.Context(), r.URL.Query().Get("all") == "true")
		if err != nil {
			return err
		}
		return writeJSON(w, 200, KeyList{Keys: ks})
	})
	s.route("POST /v1/keys", false, func(w http.ResponseWriter, r *http.Request) error {
		var c suanli.KeyCreate
		if err := decode(r, &c); err != nil {
			return err
		}
		k, err := s.Service.CreateAPIKey(r.Context(), c)
		if err != nil {
			return err
		}
		setAuditTarget(r, "key %d", k.ID)
		return writeJSON(w, http.StatusCreated, k)
	}, limited)
	s.route("DELETE /v1/keys/{id}", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		k, err := s.Service.RevokeAPIKey(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, k)
	}, limited)
	s.route("POST /v1/keys/{id}/rotate", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		var c suanli.KeyRotate
		if r.ContentLength != 0 {
			if err := decode(r, &c); err != nil {
				return err
			}
		}
		k, err := s.Service.RotateAPIKey(r.Context(), id, c)
		if err != nil {
			return err
		}
		setAuditTarget(r, "key %d (rotated to key %d)", id, k.ID)
		return writeJSON(w, http.StatusCreated, k)
	}, limited)
	s.route("POST /v1/auth/token", false, func(w http.ResponseWriter, r *http.Request) error {
		var c suanli.TokenCreate
		if r.ContentLength != 0 {
			if err := decode(r, &c); err != nil {
				return err
			}
		}
		k, err := s.Service.CreateToken(r.Context(), c)
		if err != nil {
			return err
		}
		setAuditTarget(r, "key %d", k.ID)
		return writeJSON(w, http.StatusCreated, k)
	}, limited)
}

// TeamList is the reply of GET /v1/teams.
type TeamList struct {
	Teams []*suanli.Team `json:"teams"`
}

// MemberList is the reply of GET /v1/teams/{id}/members.
type MemberList struct {
	Members []*suanli.TeamMember `json:"members"`
}

// InvitationList is the reply of GET /v1/teams/{id}/invitations.
type InvitationList struct {
	Invitations []*suanli.Invitation `json:"invitations"`
}

func (s *Server) registerTeamRoutes() {
	s.route("GET /v1/teams", false, func(w http.ResponseWriter, r *http.Request) error {
		ts, err := s.Service.FindTeams(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, 200, TeamList{Teams: ts})
	})
	s.route("POST /v1/teams", false, func(w http.ResponseWriter, r *http.Request) error {
		var c suanli.TeamCreate
		if err := decode(r, &c); err != nil {
			return err
		}
		t, err := s.Service.CreateTeam(r.Context(), c)
		if err != nil {
			return err
		}
		setAuditTarget(r, "team %d", t.ID)
		return writeJSON(w, http.StatusCreated, t)
	})
	s.route("GET /v1/teams/{id}/members", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		ms, err := s.Service.FindTeamMembers(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, MemberList{Members: ms})
	})
	s.route("PUT /v1/teams/{id}/members/{account}", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		acct, err := pathID(r, "account")
		if err != nil {
			return err
		}
		var u suanli.MemberUpdate
		if err := decode(r, &u); err != nil {
			return err
		}
		m, err := s.Service.UpdateTeamMember(r.Context(), id, acct, u)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, m)
	})
	s.route("DELETE /v1/teams/{id}/members/{account}", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		acct, err := pathID(r, "account")
		if err != nil {
			return err
		}
		if err := s.Service.RemoveTeamMember(r.Context(), id, acct); err != nil {
			return err
		}
		return writeJSON(w, 200, map[string]any{"team_id": id, "account_id": acct, "removed": true})
	})
	s.route("GET /v1/teams/{id}/invitations", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		is, err := s.Service.FindInvitations(r.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, InvitationList{Invitations: is})
	})
	s.route("POST /v1/teams/{id}/invitations", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		var c suanli.InvitationCreate
		if err := decode(r, &c); err != nil {
			return err
		}
		inv, err := s.Service.CreateInvitation(r.Context(), id, c)
		if err != nil {
			return err
		}
		setAuditTarget(r, "team %d invitation %d", id, inv.ID)
		return writeJSON(w, http.StatusCreated, inv)
	}, limited)
	s.route("DELETE /v1/teams/{id}/invitations/{invitation}", false, func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		inv, err := pathID(r, "invitation")
		if err != nil {
			return err
		}
		out, err := s.Service.RevokeInvitation(r.Context(), id, inv)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, out)
	})
	s.route("POST /v1/invitations/accept", false, func(w http.ResponseWriter, r *http.Request) error {
		var a suanli.InvitationAccept
		if err := decode(r, &a); err != nil {
			return err
		}
		m, err := s.Service.AcceptInvitation(r.Context(), a)
		if err != nil {
			return err
		}
		setAuditTarget(r, "team %d", m.TeamID)
		return writeJSON(w, 200, m)
	}, limited)
}

// AuditList is the reply of GET /v1/audit/events.
type AuditList struct {
	Events []*suanli.AuditEvent `json:"events"`
}

func (s *Server) registerAuditRoutes() {
	s.route("GET /v1/audit/events", false, func(w http.ResponseWriter, r *http.Request) error {
		f := suanli.AuditFilter{}
		limit, err := queryInt(r, "limit")
		if err != nil {
			return err
		}
		f.Limit = int(limit)
		if v := r.URL.Query().Get("before"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return suanli.FieldErrorf("before", "%q is not an entry number", v)
			}
			f.BeforeSeq = &n
		}
		if v := r.URL.Query().Get("account_id"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return suanli.FieldErrorf("account_id", "%q is not an account id", v)
			}
			f.AccountID = &n
		}
		es, err := s.Service.FindAuditEvents(r.Context(), f)
		if err != nil {
			return err
		}
		return writeJSON(w, 200, AuditList{Events: es})
	})
	s.route("GET /v1/audit/verify", false, func(w http.ResponseWriter, r *http.Request) error {
		rep, err := s.Service.VerifyAudit(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, 200, rep)
	})
}
