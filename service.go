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

// AccountService reads the caller's account.
type AccountService interface {
	// Me returns the caller's account.
	Me(ctx context.Context) (*Account, error)
}
