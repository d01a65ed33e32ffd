package suanli

import (
	"context"
	"time"
)

// The services below are implemented by the control plane (package control)
// and by the HTTP client (package http), so that the CLI and the API speak
// the same Go API. Every method reads the caller from ctx
// (PrincipalFromContext); another tenant's object is ENOTFOUND.

// OfferService searches the market.
type OfferService interface {
	// SearchOffers runs a query. EINVALID names the field and its position.
	SearchOffers(ctx context.Context, q OfferQuery) (*OfferResult, error)
	// FindOfferByID returns one offer. ENOTFOUND when not listed.
	FindOfferByID(ctx context.Context, id int64) (*Offer, error)
}

// InstanceService rents and manages instances.
type InstanceService interface {
	// CreateInstance rents. EINVALID (bad field), ENOTFOUND (offer),
	// ECONFLICT (capacity taken, says what is free), EPAYMENTREQUIRED.
	CreateInstance(ctx context.Context, c InstanceCreate) (*Instance, error)
	// FindInstanceByID returns one of the caller's instances. ENOTFOUND.
	FindInstanceByID(ctx context.Context, id int64) (*Instance, error)
	// FindInstances lists the caller's instances and the total count.
	FindInstances(ctx context.Context, f InstanceFilter) ([]*Instance, int, error)
	// StopInstance stops compute (and its billing); the disk stays. ECONFLICT when destroyed.
	StopInstance(ctx context.Context, id int64) (*Instance, error)
	// StartInstance starts a stopped instance on the same GPUs. ECONFLICT when they are taken.
	StartInstance(ctx context.Context, id int64) (*Instance, error)
	// DestroyInstance ends the rental; all billing stops. Destroying twice is not an error.
	DestroyInstance(ctx context.Context, id int64) (*Instance, error)
	// InstanceLogs returns the log from offset (up to a limit).
	InstanceLogs(ctx context.Context, id int64, offset int64) (*LogChunk, error)
	// ReportProgress records a workload's progress note in the instance's
	// history (instance tokens may call it). ENOTFOUND, EINVALID.
	ReportProgress(ctx context.Context, id int64, p Progress) (*Instance, error)
}

// MachineService is the provider's side.
type MachineService interface {
	// FindMachines lists the caller's machines (every machine for operators).
	FindMachines(ctx context.Context, f MachineFilter) ([]*Machine, int, error)
	// FindMachineByID returns one of the caller's machines. ENOTFOUND.
	FindMachineByID(ctx context.Context, id int64) (*Machine, error)
	// ListMachine puts a machine on the market or changes its terms. EINVALID.
	ListMachine(ctx context.Context, id int64, u ListingUpdate) (*Machine, error)
	// UnlistMachine takes it off the market; running rentals continue.
	UnlistMachine(ctx context.Context, id int64) (*Machine, error)
	// CreateJoinToken returns a one-time token for registering a machine.
	CreateJoinToken(ctx context.Context, ttl time.Duration) (*JoinToken, error)
}

// BillingService reads the ledger and grants credit.
type BillingService interface {
	// Balance returns the caller's balance, earnings and burn rate.
	Balance(ctx context.Context) (*Balance, error)
	// FindCharges lists the caller's charges with totals.
	FindCharges(ctx context.Context, f ChargeFilter) (*ChargeSummary, error)
	// Credit adds amount to an account's balance. Operators only (EFORBIDDEN).
	Credit(ctx context.Context, accountID int64, amount Money, memo string) (*Balance, error)
}

// AgentService is the agents' side of the control plane.
type AgentService interface {
	// Join registers a machine with a join token. EUNAUTHORIZED when the token is bad or used.
	Join(ctx context.Context, r JoinRequest) (*JoinResponse, error)
	// Sync reports actual state and returns desired state (a long poll when r.Wait).
	Sync(ctx context.Context, r *SyncRequest) (*SyncResponse, error)
}

// AccountService reads and configures accounts.
type AccountService interface {
	// Me returns the caller's account (the selected team, when one is).
	Me(ctx context.Context) (*Account, error)
	// SetResidency restricts where the caller's (or the selected team's)
	// instances may run. EINVALID names a malformed entry.
	SetResidency(ctx context.Context, u ResidencyUpdate) (*Account, error)
	// CreateAccount creates a user account with its first API key.
	// Operators only (EFORBIDDEN); ECONFLICT when the name is taken.
	CreateAccount(ctx context.Context, c AccountCreate) (*AccountWithKey, error)
	// FindAccounts lists every account. Operators only.
	FindAccounts(ctx context.Context) ([]*Account, error)
}

// KeyService manages the calling user's API keys and temporary tokens.
// Another user's key is ENOTFOUND.
type KeyService interface {
	// CreateAPIKey creates a key; its scopes may only narrow the calling
	// key's. EINVALID (scope, ttl), ECONFLICT (two active keys of that name
	// already), EFORBIDDEN (called with a temporary token).
	CreateAPIKey(ctx context.Context, c KeyCreate) (*APIKey, error)
	// FindAPIKeys lists the caller's keys and tokens; all includes revoked
	// and expired ones.
	FindAPIKeys(ctx context.Context, all bool) ([]*APIKey, error)
	// RevokeAPIKey revokes a key and every temporary token cut from it.
	RevokeAPIKey(ctx context.Context, id int64) (*APIKey, error)
	// RotateAPIKey creates the key's successor and ends the old one after
	// a grace period. ECONFLICT when two keys of that name are active.
	RotateAPIKey(ctx context.Context, id int64, r KeyRotate) (*APIKey, error)
	// CreateToken cuts a temporary token (15 min to 12 h) from the calling
	// key, with scopes that can only narrow. It dies with its parent.
	CreateToken(ctx context.Context, c TokenCreate) (*APIKey, error)
}

// TeamService manages teams, members and invitations. A team the caller is
// not a member of is ENOTFOUND; a role that may not do it is EFORBIDDEN.
type TeamService interface {
	// CreateTeam creates a team owned by the caller.
	CreateTeam(ctx context.Context, c TeamCreate) (*Team, error)
	// FindTeams lists the caller's teams with the caller's role in each.
	FindTeams(ctx context.Context) ([]*Team, error)
	// FindTeamMembers lists a team's members.
	FindTeamMembers(ctx context.Context, teamID int64) ([]*TeamMember, error)
	// UpdateTeamMember changes a member's role (managers; owners for owners).
	UpdateTeamMember(ctx context.Context, teamID, accountID int64, u MemberUpdate) (*TeamMember, error)
	// RemoveTeamMember removes a member (or lets a member leave). A team
	// keeps at least one owner (ECONFLICT).
	RemoveTeamMember(ctx context.Context, teamID, accountID int64) error
	// CreateInvitation returns an invitation with its one-time token.
	CreateInvitation(ctx context.Context, teamID int64, c InvitationCreate) (*Invitation, error)
	// FindInvitations lists a team's invitations.
	FindInvitations(ctx context.Context, teamID int64) ([]*Invitation, error)
	// RevokeInvitation cancels an invitation that was not accepted yet.
	RevokeInvitation(ctx context.Context, teamID, id int64) (*Invitation, error)
	// AcceptInvitation makes the caller a member. EUNAUTHORIZED when the
	// token is unknown, used, revoked or expired.
	AcceptInvitation(ctx context.Context, a InvitationAccept) (*TeamMember, error)
}

// AuditService reads and verifies the audit log.
type AuditService interface {
	// FindAuditEvents lists entries, newest first: every entry for an
	// operator, the caller's account's otherwise.
	FindAuditEvents(ctx context.Context, f AuditFilter) ([]*AuditEvent, error)
	// VerifyAudit checks the whole chain and its checkpoints. Operators only.
	VerifyAudit(ctx context.Context) (*AuditReport, error)
}
