package control

import (
	"context"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
)

// Invitation lifetimes.
const (
	DefaultInvitationTTL = 7 * 24 * time.Hour
	MaxInvitationTTL     = 30 * 24 * time.Hour
)

// teamCaller returns the caller (a person holding scope) and its role in
// team. A team the caller is not in is ENOTFOUND.
func (s *Service) teamCaller(ctx context.Context, scope string, teamID int64) (*suanli.Principal, string, error) {
	p, err := principal(ctx, scope)
	if err != nil {
		return nil, "", err
	}
	if p.MachineID != 0 || p.InstanceID != 0 {
		return nil, "", suanli.Errorf(suanli.EFORBIDDEN, "agent and instance credentials cannot manage teams")
	}
	role, err := s.Store.TeamRole(ctx, teamID, p.Person())
	if suanli.ErrorCode(err) == suanli.ENOTFOUND {
		return nil, "", suanli.Errorf(suanli.ENOTFOUND, "team %d not found: `suanli teams ls` lists yours", teamID)
	}
	return p, role, err
}

func needRole(have, want string, teamID int64, what string) error {
	if auth.RoleRank(have) < auth.RoleRank(want) {
		return suanli.Errorf(suanli.EFORBIDDEN, "team %d: you are %s; only a %s or above can %s", teamID, have, want, what)
	}
	return nil
}

// CreateTeam creates a team owned by the caller.
func (s *Service) CreateTeam(ctx context.Context, c suanli.TeamCreate) (*suanli.Team, error) {
	p, err := principal(ctx, suanli.ScopeTeamWrite)
	if err != nil {
		return nil, err
	}
	if p.MachineID != 0 || p.InstanceID != 0 {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "agent and instance credentials cannot create teams")
	}
	c.Name = strings.TrimSpace(c.Name)
	if err := validName("name", c.Name); err != nil {
		return nil, err
	}
	t, err := s.CreateTeamAccount(ctx, c.Name, p.Person(), 0)
	if err != nil {
		return nil, err
	}
	s.Logger.Info("team created", "team_id", t.ID, "owner_id", p.Person())
	return &suanli.Team{ID: t.ID, Name: t.Name, Role: suanli.TeamRoleOwner, CreatedAt: t.CreatedAt}, nil
}

// FindTeams lists the caller's teams.
func (s *Service) FindTeams(ctx context.Context) ([]*suanli.Team, error) {
	p, err := principal(ctx, suanli.ScopeTeamRead)
	if err != nil {
		return nil, err
	}
	return s.Store.FindTeamsOf(ctx, p.Person())
}

// FindTeamMembers lists a team's members (any member may).
func (s *Service) FindTeamMembers(ctx context.Context, teamID int64) ([]*suanli.TeamMember, error) {
	if _, _, err := s.teamCaller(ctx, suanli.ScopeTeamRead, teamID); err != nil {
		return nil, err
	}
	return s.Store.FindTeamMembers(ctx, teamID)
}

// UpdateTeamMember changes a member's role: managers change members,
// billing viewers and managers; only owners make or unmake owners.
func (s *Service) UpdateTeamMember(ctx context.Context, teamID, accountID int64, u suanli.MemberUpdate) (*suanli.TeamMember, error) {
	_, role, err := s.teamCaller(ctx, suanli.ScopeTeamWrite, teamID)
	if err != nil {
		return nil, err
	}
	if !auth.ValidTeamRole(u.Role) {
		return nil, suanli.FieldErrorf("role", "%q: use %s", u.Role, strings.Join(suanli.TeamRoles, ", "))
	}
	if err := needRole(role, suanli.TeamRoleManager, teamID, "change roles"); err != nil {
		return nil, err
	}
	m, err := s.Store.UpdateTeamMember(ctx, teamID, accountID, u.Role, func(m *suanli.TeamMember) error {
		if (m.Role == suanli.TeamRoleOwner || u.Role == suanli.TeamRoleOwner) && role != suanli.TeamRoleOwner {
			return suanli.Errorf(suanli.EFORBIDDEN, "team %d: only an owner can make or unmake owners", teamID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.Logger.Info("team member role changed", "team_id", teamID, "account_id", accountID, "role", u.Role)
	return m, nil
}

// RemoveTeamMember removes a member, or lets the caller leave. Managers
// remove anyone but owners; owners remove anyone; the last owner stays.
func (s *Service) RemoveTeamMember(ctx context.Context, teamID, accountID int64) error {
	p, role, err := s.teamCaller(ctx, suanli.ScopeTeamWrite, teamID)
	if err != nil {
		return err
	}
	self := accountID == p.Person()
	if !self {
		if err := needRole(role, suanli.TeamRoleManager, teamID, "remove members"); err != nil {
			return err
		}
	}
	err = s.Store.RemoveTeamMember(ctx, teamID, accountID, func(m *suanli.TeamMember) error {
		if !self && m.Role == suanli.TeamRoleOwner && role != suanli.TeamRoleOwner {
			return suanli.Errorf(suanli.EFORBIDDEN, "team %d: only an owner can remove an owner", teamID)
		}
		return nil
	})
	if err == nil {
		s.Logger.Info("team member removed", "team_id", teamID, "account_id", accountID)
	}
	return err
}

// CreateInvitation returns an invitation to team with its one-time token.
// Managers invite members, billing viewers and managers; owners also owners.
func (s *Service) CreateInvitation(ctx context.Context, teamID int64, c suanli.InvitationCreate) (*suanli.Invitation, error) {
	p, role, err := s.teamCaller(ctx, suanli.ScopeTeamWrite, teamID)
	if err != nil {
		return nil, err
	}
	if err := needRole(role, suanli.TeamRoleManager, teamID, "invite"); err != nil {
		return nil, err
	}
	if !auth.ValidTeamRole(c.Role) {
		return nil, suanli.FieldErrorf("role", "%q: use %s", c.Role, strings.Join(suanli.TeamRoles, ", "))
	}
	if c.Role == suanli.TeamRoleOwner && role != suanli.TeamRoleOwner {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "team %d: only an owner can invite an owner", teamID)
	}
	if c.Account != "" {
		if err := validName("account", c.Account); err != nil {
			return nil, err
		}
	}
	ttl := time.Duration(c.TTLSeconds) * time.Second
	if c.TTLSeconds == 0 {
		ttl = DefaultInvitationTTL
	}
	if ttl <= 0 || ttl > MaxInvitationTTL {
		return nil, suanli.FieldErrorf("ttl_seconds", "an invitation lives up to 30 days")
	}
	tok := auth.NewSecret(auth.PrefixInvite)
	now := s.now()
	inv := &suanli.Invitation{TeamID: teamID, Role: c.Role, Account: c.Account, InvitedBy: p.Person(), CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.Store.CreateInvitation(ctx, inv, auth.Hash(tok)); err != nil {
		return nil, err
	}
	inv.Token = tok
	s.Logger.Info("team invitation created", "team_id", teamID, "invitation_id", inv.ID, "role", c.Role)
	return inv, nil
}

// FindInvitations lists a team's invitations (managers and owners).
func (s *Service) FindInvitations(ctx context.Context, teamID int64) ([]*suanli.Invitation, error) {
	_, role, err := s.teamCaller(ctx, suanli.ScopeTeamRead, teamID)
	if err != nil {
		return nil, err
	}
	if err := needRole(role, suanli.TeamRoleManager, teamID, "see invitations"); err != nil {
		return nil, err
	}
	return s.Store.FindInvitations(ctx, teamID)
}

// RevokeInvitation cancels an invitation (managers and owners).
func (s *Service) RevokeInvitation(ctx context.Context, teamID, id int64) (*suanli.Invitation, error) {
	_, role, err := s.teamCaller(ctx, suanli.ScopeTeamWrite, teamID)
	if err != nil {
		return nil, err
	}
	if err := needRole(role, suanli.TeamRoleManager, teamID, "revoke invitations"); err != nil {
		return nil, err
	}
	return s.Store.RevokeInvitation(ctx, teamID, id, s.now())
}

// AcceptInvitation makes the caller (a person) a member of the invitation's
// team with its role.
func (s *Service) AcceptInvitation(ctx context.Context, a suanli.InvitationAccept) (*suanli.TeamMember, error) {
	p, err := principal(ctx, suanli.ScopeTeamWrite)
	if err != nil {
		return nil, err
	}
	if p.MachineID != 0 || p.InstanceID != 0 {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "agent and instance credentials cannot join teams")
	}
	if !auth.WellFormed(a.Token, auth.PrefixInvite) {
		return nil, suanli.Errorf(suanli.EUNAUTHORIZED, "invitation token is malformed (expected sl_inv_… with a valid checksum): check for a copy-paste error")
	}
	acct, err := s.Store.FindAccountByID(ctx, p.Person())
	if err != nil {
		return nil, err
	}
	if acct.IsTeam() {
		return nil, suanli.Errorf(suanli.EFORBIDDEN, "a team cannot join a team: accept without --team")
	}
	m, err := s.Store.AcceptInvitation(ctx, auth.Hash(a.Token), acct, s.now())
	if err != nil {
		return nil, err
	}
	s.Logger.Info("team invitation accepted", "team_id", m.TeamID, "account_id", m.AccountID, "role", m.Role)
	return m, nil
}
