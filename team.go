package suanli

import "time"

// Team roles (DESIGN §7). What each may do is the scope set auth.RoleScopes
// gives it: an owner everything; a manager everything but granting or
// removing owners; a member runs instances; a billing viewer only reads
// billing.
const (
	TeamRoleOwner         = "owner"
	TeamRoleManager       = "manager"
	TeamRoleMember        = "member"
	TeamRoleBillingViewer = "billing-viewer"
)

// TeamRoles lists the team roles, most powerful first.
var TeamRoles = []string{TeamRoleOwner, TeamRoleManager, TeamRoleMember, TeamRoleBillingViewer}

// Team is a team account as one of its members sees it.
type Team struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"` // the caller's role in it
	CreatedAt time.Time `json:"created_at"`
}

// TeamMember is one user's membership of a team.
type TeamMember struct {
	TeamID    int64     `json:"team_id"`
	AccountID int64     `json:"account_id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

// Invitation lets one user join a team with a role. Token is shown once, in
// the reply that created it; only its hash is stored.
type Invitation struct {
	ID         int64      `json:"id"`
	TeamID     int64      `json:"team_id"`
	Role       string     `json:"role"`
	Account    string     `json:"account,omitempty"` // when set, only this account name may accept
	InvitedBy  int64      `json:"invited_by"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	AcceptedAt *time.Time `json:"accepted_at,omitempty"`
	AcceptedBy int64      `json:"accepted_by,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	Token      string     `json:"token,omitempty"`
}

// InvitationCreate asks for an invitation to a team.
type InvitationCreate struct {
	Role       string `json:"role"`
	Account    string `json:"account,omitempty"`
	TTLSeconds int64  `json:"ttl_seconds,omitempty"` // default 7 days, at most 30
}

// InvitationAccept spends an invitation token.
type InvitationAccept struct {
	Token string `json:"token"`
}

// TeamCreate creates a team owned by the caller.
type TeamCreate struct {
	Name string `json:"name"`
}

// MemberUpdate changes a member's role.
type MemberUpdate struct {
	Role string `json:"role"`
}
