package http

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/suanli/suanli"
)

// ReportProgress records a progress note on an instance (an instance's own
// token may call it).
func (c *Client) ReportProgress(ctx context.Context, id int64, p suanli.Progress) (*suanli.Instance, error) {
	var in suanli.Instance
	return &in, c.do(ctx, c.HTTP, http.MethodPost, fmt.Sprintf("/v1/instances/%d/progress", id), p, &in)
}

// SetResidency sets the caller's allowed countries and regions.
func (c *Client) SetResidency(ctx context.Context, u suanli.ResidencyUpdate) (*suanli.Account, error) {
	var a suanli.Account
	return &a, c.do(ctx, c.HTTP, http.MethodPut, "/v1/me/residency", u, &a)
}

// CreateAccount creates a user account with its first key (operators).
func (c *Client) CreateAccount(ctx context.Context, cr suanli.AccountCreate) (*suanli.AccountWithKey, error) {
	var a suanli.AccountWithKey
	return &a, c.do(ctx, c.HTTP, http.MethodPost, "/v1/admin/accounts", cr, &a)
}

// FindAccounts lists every account (operators).
func (c *Client) FindAccounts(ctx context.Context) ([]*suanli.Account, error) {
	var l AccountList
	err := c.get(ctx, "/v1/admin/accounts", &l)
	return l.Accounts, err
}

// CreateAPIKey creates a key; the reply carries its secret, once.
func (c *Client) CreateAPIKey(ctx context.Context, cr suanli.KeyCreate) (*suanli.APIKey, error) {
	var k suanli.APIKey
	return &k, c.do(ctx, c.HTTP, http.MethodPost, "/v1/keys", cr, &k)
}

// FindAPIKeys lists the caller's keys and tokens (all: revoked and expired too).
func (c *Client) FindAPIKeys(ctx context.Context, all bool) ([]*suanli.APIKey, error) {
	var l KeyList
	err := c.get(ctx, "/v1/keys?all="+strconv.FormatBool(all), &l)
	return l.Keys, err
}

// RevokeAPIKey revokes a key and its temporary tokens.
func (c *Client) RevokeAPIKey(ctx context.Context, id int64) (*suanli.APIKey, error) {
	var k suanli.APIKey
	return &k, c.do(ctx, c.HTTP, http.MethodDelete, fmt.Sprintf("/v1/keys/%d", id), nil, &k)
}

// RotateAPIKey issues a key's successor; the reply carries its secret.
func (c *Client) RotateAPIKey(ctx context.Context, id int64, r suanli.KeyRotate) (*suanli.APIKey, error) {
	var k suanli.APIKey
	return &k, c.do(ctx, c.HTTP, http.MethodPost, fmt.Sprintf("/v1/keys/%d/rotate", id), r, &k)
}

// CreateToken cuts a temporary token from the client's key.
func (c *Client) CreateToken(ctx context.Context, cr suanli.TokenCreate) (*suanli.APIKey, error) {
	var k suanli.APIKey
	return &k, c.do(ctx, c.HTTP, http.MethodPost, "/v1/auth/token", cr, &k)
}

// CreateTeam creates a team owned by the caller.
func (c *Client) CreateTeam(ctx context.Context, cr suanli.TeamCreate) (*suanli.Team, error) {
	var t suanli.Team
	return &t, c.do(ctx, c.HTTP, http.MethodPost, "/v1/teams", cr, &t)
}

// FindTeams lists the caller's teams.
func (c *Client) FindTeams(ctx context.Context) ([]*suanli.Team, error) {
	var l TeamList
	err := c.get(ctx, "/v1/teams", &l)
	return l.Teams, err
}

// FindTeamMembers lists a team's members.
func (c *Client) FindTeamMembers(ctx context.Context, teamID int64) ([]*suanli.TeamMember, error) {
	var l MemberList
	err := c.get(ctx, fmt.Sprintf("/v1/teams/%d/members", teamID), &l)
	return l.Members, err
}

// UpdateTeamMember changes a member's role.
func (c *Client) UpdateTeamMember(ctx context.Context, teamID, accountID int64, u suanli.MemberUpdate) (*suanli.TeamMember, error) {
	var m suanli.TeamMember
	return &m, c.do(ctx, c.HTTP, http.MethodPut, fmt.Sprintf("/v1/teams/%d/members/%d", teamID, accountID), u, &m)
}

// RemoveTeamMember removes a member (or leaves).
func (c *Client) RemoveTeamMember(ctx context.Context, teamID, accountID int64) error {
	return c.do(ctx, c.HTTP, http.MethodDelete, fmt.Sprintf("/v1/teams/%d/members/%d", teamID, accountID), nil, nil)
}

// CreateInvitation invites someone to a team; the reply carries the token.
func (c *Client) CreateInvitation(ctx context.Context, teamID int64, cr suanli.InvitationCreate) (*suanli.Invitation, error) {
	var i suanli.Invitation
	return &i, c.do(ctx, c.HTTP, http.MethodPost, fmt.Sprintf("/v1/teams/%d/invitations", teamID), cr, &i)
}

// FindInvitations lists a team's invitations.
func (c *Client) FindInvitations(ctx context.Context, teamID int64) ([]*suanli.Invitation, error) {
	var l InvitationList
	err := c.get(ctx, fmt.Sprintf("/v1/teams/%d/invitations", teamID), &l)
	return l.Invitations, err
}

// RevokeInvitation cancels an invitation.
func (c *Client) RevokeInvitation(ctx context.Context, teamID, id int64) (*suanli.Invitation, error) {
	var i suanli.Invitation
	return &i, c.do(ctx, c.HTTP, http.MethodDelete, fmt.Sprintf("/v1/teams/%d/invitations/%d", teamID, id), nil, &i)
}

// AcceptInvitation joins the invitation's team.
func (c *Client) AcceptInvitation(ctx context.Context, a suanli.InvitationAccept) (*suanli.TeamMember, error) {
	var m suanli.TeamMember
	return &m, c.do(ctx, c.HTTP, http.MethodPost, "/v1/invitations/accept", a, &m)
}

// FindAuditEvents lists audit entries, newest first.
func (c *Client) FindAuditEvents(ctx context.Context, f suanli.AuditFilter) ([]*suanli.AuditEvent, error) {
	v := url.Values{}
	if f.Limit > 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.BeforeSeq != nil {
		v.Set("before", strconv.FormatInt(*f.BeforeSeq, 10))
	}
	if f.AccountID != nil {
		v.Set("account_id", strconv.FormatInt(*f.AccountID, 10))
	}
	var l AuditList
	err := c.get(ctx, "/v1/audit/events?"+v.Encode(), &l)
	return l.Events, err
}

// VerifyAudit verifies the audit log (operators).
func (c *Client) VerifyAudit(ctx context.Context) (*suanli.AuditReport, error) {
	var r suanli.AuditReport
	return &r, c.get(ctx, "/v1/audit/verify", &r)
}
