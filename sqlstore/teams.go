package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/suanli/suanli"
)

// CreateTeam creates a team account and makes owner its first owner, in
// one transaction. ECONFLICT when the name is taken.
func (s *DB) CreateTeam(ctx context.Context, team *suanli.Account, owner int64, now time.Time) error {
	team.Kind = suanli.KindTeam
	return s.withTx(ctx, func(tx *Tx) error {
		var n int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM accounts WHERE name = ?`, team.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return suanli.Errorf(suanli.ECONFLICT, "account name %q is taken: pick another team name", team.Name)
		}
		if err := tx.createAccount(ctx, team); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `INSERT INTO team_members (team_id, account_id, role, created_at) VALUES (?, ?, ?, ?)`,
			team.ID, owner, suanli.TeamRoleOwner, us(now))
		return err
	})
}

// TeamRole returns account's role in team. ENOTFOUND (naming the team)
// when account is not a member or team is not a team, so that outsiders
// learn nothing about it.
func (s *DB) TeamRole(ctx context.Context, teamID, accountID int64) (string, error) {
	var role string
	err := s.db.QueryRowContext(ctx, s.q(`SELECT role FROM team_members WHERE team_id = ? AND account_id = ?`), teamID, accountID).Scan(&role)
	if isNoRows(err) {
		return "", notFound("team", teamID)
	}
	return role, err
}

// FindTeamsOf lists the teams account belongs to, with its role in each.
func (s *DB) FindTeamsOf(ctx context.Context, accountID int64) ([]*suanli.Team, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT a.id, a.name, m.role, a.created_at FROM team_members m JOIN accounts a ON a.id = m.team_id
		WHERE m.account_id = ? ORDER BY a.id`), accountID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*suanli.Team{}
	for rows.Next() {
		var t suanli.Team
		var created int64
		if err := rows.Scan(&t.ID, &t.Name, &t.Role, &created); err != nil {
			return nil, err
		}
		t.CreatedAt = fromUS(created)
		out = append(out, &t)
	}
	return out, rows.Err()
}

// FindTeamMembers lists a team's members, owners first.
func (s *DB) FindTeamMembers(ctx context.Context, teamID int64) ([]*suanli.TeamMember, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT m.team_id, m.account_id, a.name, m.role, m.created_at FROM team_members m
		JOIN accounts a ON a.id = m.account_id WHERE m.team_id = ? ORDER BY m.account_id`), teamID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*suanli.TeamMember{}
	for rows.Next() {
		var m suanli.TeamMember
		var created int64
		if err := rows.Scan(&m.TeamID, &m.AccountID, &m.Name, &m.Role, &created); err != nil {
			return nil, err
		}
		m.CreatedAt = fromUS(created)
		out = append(out, &m)
	}
	return out, rows.Err()
}

func (tx *Tx) member(ctx context.Context, teamID, accountID int64) (*suanli.TeamMember, error) {
	var m suanli.TeamMember
	var created int64
	err := tx.queryRow(ctx, `SELECT m.team_id, m.account_id, a.name, m.role, m.created_at FROM team_members m
		JOIN accounts a ON a.id = m.account_id WHERE m.team_id = ? AND m.account_id = ?`, teamID, accountID).
		Scan(&m.TeamID, &m.AccountID, &m.Name, &m.Role, &created)
	if isNoRows(err) {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "account %d is not a member of team %d", accountID, teamID)
	}
	m.CreatedAt = fromUS(created)
	return &m, err
}

func (tx *Tx) otherOwners(ctx context.Context, teamID, accountID int64) (int, error) {
	var n int
	err := tx.queryRow(ctx, `SELECT COUNT(*) FROM team_members WHERE team_id = ? AND role = ? AND account_id <> ?`,
		teamID, suanli.TeamRoleOwner, accountID).Scan(&n)
	return n, err
}

// UpdateTeamMember changes a member's role; check (called in the
// transaction with the member as it is) may refuse. A team keeps at least
// one owner (ECONFLICT).
func (s *DB) UpdateTeamMember(ctx context.Context, teamID, accountID int64, role string, check func(*suanli.TeamMember) error) (*suanli.TeamMember, error) {
	var out *suanli.TeamMember
	err := s.withTx(ctx, func(tx *Tx) error {
		m, err := tx.member(ctx, teamID, accountID)
		if err != nil {
			return err
		}
		if err := check(m); err != nil {
			return err
		}
		if m.Role == suanli.TeamRoleOwner && role != suanli.TeamRoleOwner {
			if n, err := tx.otherOwners(ctx, teamID, accountID); err != nil {
				return err
			} else if n == 0 {
				return suanli.Errorf(suanli.ECONFLICT, "%s is the last owner of team %d: make someone else owner first", m.Name, teamID)
			}
		}
		if _, err := tx.exec(ctx, `UPDATE team_members SET role = ? WHERE team_id = ? AND account_id = ?`, role, teamID, accountID); err != nil {
			return err
		}
		m.Role = role
		out = m
		return nil
	})
	return out, err
}

// RemoveTeamMember removes a member; check may refuse. The last owner
// cannot go (ECONFLICT).
func (s *DB) RemoveTeamMember(ctx context.Context, teamID, accountID int64, check func(*suanli.TeamMember) error) error {
	return s.withTx(ctx, func(tx *Tx) error {
		m, err := tx.member(ctx, teamID, accountID)
		if err != nil {
			return err
		}
		if err := check(m); err != nil {
			return err
		}
		if m.Role == suanli.TeamRoleOwner {
			if n, err := tx.otherOwners(ctx, teamID, accountID); err != nil {
				return err
			} else if n == 0 {
				return suanli.Errorf(suanli.ECONFLICT, "%s is the last owner of team %d: make someone else owner first", m.Name, teamID)
			}
		}
		_, err = tx.exec(ctx, `DELETE FROM team_members WHERE team_id = ? AND account_id = ?`, teamID, accountID)
		return err
	})
}

const invitationCols = `id, team_id, role, account, invited_by, created_at, expires_at, accepted_at, accepted_by, revoked_at`

func scanInvitation(r scanner) (*suanli.Invitation, error) {
	var i suanli.Invitation
	var created, expires int64
	var accepted, revoked sql.NullInt64
	if err := r.Scan(&i.ID, &i.TeamID, &i.Role, &i.Account, &i.InvitedBy, &created, &expires, &accepted, &i.AcceptedBy, &revoked); err != nil {
		return nil, err
	}
	i.CreatedAt, i.ExpiresAt = fromUS(created), fromUS(expires)
	i.AcceptedAt, i.RevokedAt = fromUSPtr(accepted), fromUSPtr(revoked)
	return &i, nil
}

// CreateInvitation stores an invitation by its token's hash. inv.ID is set.
func (s *DB) CreateInvitation(ctx context.Context, inv *suanli.Invitation, hash string) error {
	return s.withTx(ctx, func(tx *Tx) error {
		id, err := tx.insert(ctx, `INSERT INTO invitations (team_id, hash, role, account, invited_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			inv.TeamID, hash, inv.Role, inv.Account, inv.InvitedBy, us(inv.CreatedAt), us(inv.ExpiresAt))
		inv.ID = id
		return err
	})
}

// FindInvitations lists a team's invitations, newest first.
func (s *DB) FindInvitations(ctx context.Context, teamID int64) ([]*suanli.Invitation, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+invitationCols+` FROM invitations WHERE team_id = ? ORDER BY id DESC`), teamID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanInvitation)
}

// RevokeInvitation revokes one of team's invitations that was not accepted.
// ENOTFOUND when the team has no such invitation; ECONFLICT when accepted.
func (s *DB) RevokeInvitation(ctx context.Context, teamID, id int64, now time.Time) (*suanli.Invitation, error) {
	var out *suanli.Invitation
	err := s.withTx(ctx, func(tx *Tx) error {
		inv, err := scanInvitation(tx.queryRow(ctx, `SELECT `+invitationCols+` FROM invitations WHERE id = ? AND team_id = ?`, id, teamID))
		if isNoRows(err) {
			return notFound("invitation", id)
		} else if err != nil {
			return err
		}
		if inv.AcceptedAt != nil {
			return suanli.Errorf(suanli.ECONFLICT, "invitation %d was accepted already: remove the member instead", id)
		}
		if inv.RevokedAt == nil {
			t := now
			inv.RevokedAt = &t
			if _, err := tx.exec(ctx, `UPDATE invitations SET revoked_at = ? WHERE id = ?`, us(now), id); err != nil {
				return err
			}
		}
		out = inv
		return nil
	})
	return out, err
}

// AcceptInvitation spends an invitation: in one transaction it checks the
// token (unknown, used, revoked, expired, meant for another account: all
// EUNAUTHORIZED), marks it accepted and adds the account to the team.
// ECONFLICT when the account is a member already.
func (s *DB) AcceptInvitation(ctx context.Context, hash string, account *suanli.Account, now time.Time) (*suanli.TeamMember, error) {
	var out *suanli.TeamMember
	err := s.withTx(ctx, func(tx *Tx) error {
		inv, err := scanInvitation(tx.queryRow(ctx, `SELECT `+invitationCols+` FROM invitations WHERE hash = ?`, hash))
		bad := func(why string) error {
			return suanli.Errorf(suanli.EUNAUTHORIZED, "invitation %s: ask a team owner or manager for a new one (`suanli teams invite`)", why)
		}
		switch {
		case isNoRows(err):
			return bad("not recognised")
		case err != nil:
			return err
		case inv.AcceptedAt != nil:
			return bad("already used")
		case inv.RevokedAt != nil:
			return bad("was revoked")
		case !now.Before(inv.ExpiresAt):
			return bad("expired at " + inv.ExpiresAt.Format(time.RFC3339))
		case inv.Account != "" && inv.Account != account.Name:
			return bad("is for another account")
		}
		if _, err := tx.member(ctx, inv.TeamID, account.ID); err == nil {
			return suanli.Errorf(suanli.ECONFLICT, "you are a member of team %d already", inv.TeamID)
		}
		if _, err := tx.exec(ctx, `UPDATE invitations SET accepted_at = ?, accepted_by = ? WHERE id = ?`, us(now), account.ID, inv.ID); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `INSERT INTO team_members (team_id, account_id, role, created_at) VALUES (?, ?, ?, ?)`,
			inv.TeamID, account.ID, inv.Role, us(now)); err != nil {
			return err
		}
		out, err = tx.member(ctx, inv.TeamID, account.ID)
		return err
	})
	return out, err
}
