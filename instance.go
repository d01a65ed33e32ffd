package suanli

import "time"

// Instance statuses (DESIGN §4). Stopping is the short time between a stop
// request and the agent's confirmation; compute billing has already ended.
const (
	StatusPending    = "pending"
	StatusScheduling = "scheduling"
	StatusPulling    = "pulling"
	StatusRunning    = "running"
	StatusStopping   = "stopping"
	StatusStopped    = "stopped"
	StatusPreempting = "preempting"
	StatusPreempted  = "preempted"
	StatusLost       = "lost"
	StatusExited     = "exited"
	StatusFailed     = "failed"
	StatusDestroyed  = "destroyed"
)

// Desired states the control plane asks an agent for.
const (
	DesiredRunning   = "running"
	DesiredStopped   = "stopped"
	DesiredDestroyed = "destroyed"
)

// Rental types (DESIGN §4).
const (
	RentalOnDemand      = "on-demand"
	RentalInterruptible = "interruptible"
	RentalReserved      = "reserved"
)

// Rates are an instance's prices, locked when it was created.
type Rates struct {
	ComputePerHour  Money `json:"compute_per_hour"` // the whole instance, while running
	StoragePerMonth Money `json:"storage_per_gb_month"`
	InetUpPerGB     Money `json:"inet_up_per_gb"`
	InetDownPerGB   Money `json:"inet_down_per_gb"`
	FeeBasisPoints  int64 `json:"fee_basis_points"` // platform fee out of provider earnings, 100 = 1%
	// GreenDiscountBP is the host's green discount (Listing.GreenDiscountBP)
	// that ComputePerHour already includes; 0 when none applied (and for
	// interruptible rentals, which pay their bid).
	GreenDiscountBP int64 `json:"green_discount_bp,omitempty"`
}

// StoragePerHour is what the instance's disk costs per hour, running or not.
func (r Rates) StoragePerHour(diskGB int64) Money {
	return MulDiv(r.StoragePerMonth, diskGB*MicrosPerHour, MicrosPerMonth)
}

// Instance is a rental: a workload on a machine's GPUs (or cores), at locked
// rates. Status is what the agent last reported (or what the control plane
// concluded); Desired is what the renter asked for.
type Instance struct {
	ID            int64             `json:"id"`
	AccountID     int64             `json:"account_id"`
	MachineID     int64             `json:"machine_id"`
	HostID        int64             `json:"host_id"` // the provider's account
	Label         string            `json:"label,omitempty"`
	Project       string            `json:"project,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
	Guards        Guards            `json:"guards"`
	Image         string            `json:"image"`
	Cmd           []string          `json:"cmd,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	SecretEnv     map[string]string `json:"secret_env,omitempty"`    // names only: every value reads SecretMask
	RegistryAuth  *RegistryAuth     `json:"registry_auth,omitempty"` // the password reads SecretMask
	Allowed       []string          `json:"allowed_countries,omitempty"`
	DiskGB        int64             `json:"disk_gb"`
	Ports         []int             `json:"ports,omitempty"` // container TCP ports to publish
	Volumes       []VolumeMount     `json:"volumes,omitempty"`
	PortMap       map[int]int       `json:"port_map,omitempty"` // container port → host port, as the agent mapped them
	Template      string            `json:"template,omitempty"`
	GPUName       string            `json:"gpu_name,omitempty"`
	GPUCount      int               `json:"num_gpus"`
	GPUIndexes    []int             `json:"gpu_indexes,omitempty"`
	CPUCores      int               `json:"cpu_cores"`
	RAMGB         float64           `json:"ram_gb"`
	RentalType    string            `json:"rental_type"`
	Bid           Money             `json:"bid"` // per hour for the whole instance (interruptible); 0 for other rental types
	Rates         Rates             `json:"rates"`
	Simulated     bool              `json:"simulated"`
	Status        string            `json:"status"`
	StatusMessage string            `json:"status_message,omitempty"`
	Desired       string            `json:"desired_status"`
	ExitCode      *int              `json:"exit_code,omitempty"`
	CreatedAt     time.Time         `json:"created_at"`
	StartedAt     *time.Time        `json:"started_at,omitempty"`     // latest transition into running
	StoppedAt     *time.Time        `json:"stopped_at,omitempty"`     // latest transition out of running (nil while running)
	WaitingSince  *time.Time        `json:"waiting_since,omitempty"`  // preempted or queued: when its wait began (queue order)
	ReservedUntil *time.Time        `json:"reserved_until,omitempty"` // an active reservation's end (rental type reserved)
	PreemptedBy   int64             `json:"preempted_by,omitempty"`   // the instance whose claim preempted it last
	DestroyedAt   *time.Time        `json:"destroyed_at,omitempty"`
	UpdatedAt     time.Time         `json:"updated_at"`
	Version       int64             `json:"version"`

	// Managed jobs: what to do when the workload exits or its host is lost.
	Restart        RestartPolicy `json:"restart"`
	Restarts       int           `json:"restarts"`        // restarts after exits (count against MaxRestarts)
	Moves          int           `json:"moves"`           // relaunches on another host (do not count)
	RestartPending bool          `json:"restart_pending"` // an exit was seen; the restart waits for the agent's stop
	AvoidMachines  []int64       `json:"avoid_machines,omitempty"`

	// Filled on reads from the ledger, meters and the agent's telemetry.
	CostSoFar Money      `json:"cost_so_far"`
	BurnRate  Money      `json:"burn_rate"` // per hour, now
	Telemetry *Telemetry `json:"telemetry,omitempty"`
	Hints     []string   `json:"hints,omitempty"`

	// Sealed is the instance's secrets (secret env, registry password),
	// encrypted by the control plane; the store keeps it opaque and it
	// never leaves the server except, opened, in the agent's sync.
	Sealed []byte `json:"-"`
	// RequestKey is the idempotency key of the request that created it,
	// if any (InstanceCreate.RequestKey).
	RequestKey string `json:"-"`
}

// SecretMask is what the API shows in place of a secret value.
const SecretMask = "***"

// RegistryAuth is a credential for pulling a private image. The password
// is a secret: encrypted at rest, never logged, never returned by the API.
type RegistryAuth struct {
	Server   string `json:"server,omitempty"` // default: the image's registry
	Username string `json:"username"`
	Password string `json:"password"`
}

// InstanceSecrets is what Instance.Sealed holds once opened.
type InstanceSecrets struct {
	Env          map[string]string `json:"env,omitempty"`
	RegistryAuth *RegistryAuth     `json:"registry_auth,omitempty"`
}

// Progress is what a workload reports about itself with its instance token
// (suanli progress, or POST /v1/instances/{id}/progress).
type Progress struct {
	Message string   `json:"message"`
	Percent *float64 `json:"percent,omitempty"`
}

// Live reports whether the instance still holds its machine's resources
// (anything not destroyed).
func (i *Instance) Live() bool { return i.Status != StatusDestroyed }

// HoldsGPUs reports whether the instance's GPUs are unavailable to others:
// any live instance that is not stopped, exited, failed or preempted.
func (i *Instance) HoldsGPUs() bool {
	switch i.Status {
	case StatusDestroyed, StatusStopped, StatusExited, StatusFailed, StatusPreempted:
		return false
	}
	return true
}

// OwnsGPUs reports whether the instance owns its GPUs (or cores) now: it
// holds them and has not lost them to a higher claim. A preempting instance
// still occupies its GPUs until it stops, but owns them no more: whoever
// preempted it waits for it to stop before starting.
func (i *Instance) OwnsGPUs() bool { return i.HoldsGPUs() && i.Status != StatusPreempting }

// Waiting reports whether the instance wants GPUs it does not hold: it was
// preempted, or its start is queued behind other rentals. It resumes by
// itself when it wins them.
func (i *Instance) Waiting() bool {
	return (i.Status == StatusPreempted || i.Status == StatusStopped) && i.Desired == DesiredRunning
}

// InstanceCreate is a rental request.
type InstanceCreate struct {
	OfferID int64             `json:"offer_id"`
	Image   string            `json:"image"`
	Cmd     []string          `json:"cmd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	DiskGB  int64             `json:"disk_gb,omitempty"` // default: the template's, else DefaultDiskGB
	// RequestKey is the idempotency key of the request that creates the
	// instance (set by the control plane from the context; not JSON).
	RequestKey string `json:"-"`
	// DiskGiven says DiskGB was given even when it is 0 (which is refused,
	// where leaving it out takes the default). The HTTP API sets it when
	// the body has "disk_gb", and the client sends "disk_gb": 0 for it.
	DiskGiven  bool              `json:"-"`
	Ports      []int             `json:"ports,omitempty"`     // container TCP ports to publish (SUANLI_TCP_PORT_<n> tells the workload the host port)
	Volumes    []VolumeMount     `json:"volumes,omitempty"`   // volumes on the same machine to attach (-v NAME:/path)
	Template   string            `json:"template,omitempty"`  // a preset: image, disk, ports and command unless given
	GPUCount   int               `json:"num_gpus,omitempty"`  // 0: every GPU the offer has free
	CPUCores   int               `json:"cpu_cores,omitempty"` // CPU-only machines: 0 means all free cores
	Label      string            `json:"label,omitempty"`
	Project    string            `json:"project,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Guards     Guards            `json:"guards,omitempty"`
	RentalType string            `json:"rental_type,omitempty"` // default on-demand, or interruptible when Bid is set
	Restart    RestartPolicy     `json:"restart,omitempty"`
	Bid        *Money            `json:"bid,omitempty"`
	// SecretEnv are environment variables whose values are secrets: stored
	// encrypted, delivered to the agent only, shown as SecretMask.
	SecretEnv map[string]string `json:"secret_env,omitempty"`
	// RegistryAuth pulls a private image.
	RegistryAuth *RegistryAuth `json:"registry_auth,omitempty"`
	// AllowedCountries restricts placement to these countries (ISO 3166
	// alpha-2) or regions, on top of the account's own restriction.
	AllowedCountries []string `json:"allowed_countries,omitempty"`
}

// InstanceUpdate changes an instance's own attributes, not its state (stop,
// start and destroy have their own methods); nil fields stay as they are.
type InstanceUpdate struct {
	Label *string `json:"label,omitempty"`
}

// MaxLabelLen is the longest instance label.
const MaxLabelLen = 200

// DefaultDiskGB is the disk an instance gets when the renter names none.
const DefaultDiskGB = 10

// InstanceFilter selects instances; nil fields mean "any".
type InstanceFilter struct {
	ID        *int64
	AccountID *int64
	MachineID *int64
	HostID    *int64
	Live      *bool // true: not destroyed
	Limit     int
	Offset    int
}

// LogChunk is a piece of an instance's combined stdout/stderr, starting at
// Offset bytes into the log. Next is where the following read starts.
type LogChunk struct {
	InstanceID int64  `json:"instance_id"`
	Offset     int64  `json:"offset"`
	Data       []byte `json:"data"`
	Next       int64  `json:"next"`
	Done       bool   `json:"done"` // the instance is gone: no more will come
}

// Restart policies for managed jobs.
const (
	RestartNever     = "never"
	RestartOnFailure = "on-failure" // after a non-zero exit or a failure
	RestartAlways    = "always"     // after any exit
)

// RestartPolicy makes an instance a managed job: restarted after exits
// (at most MaxRestarts times), and, with Recover "elsewhere", relaunched on
// another matching offer when its host is lost or it is preempted. Host
// losses and preemptions do not count against MaxRestarts.
type RestartPolicy struct {
	Policy      string `json:"policy,omitempty"`       // never (default), on-failure, always
	MaxRestarts *int   `json:"max_restarts,omitempty"` // nil: DefaultMaxRestarts; 0: none
	Recover     string `json:"recover,omitempty"`      // "" (wait for the host) or "elsewhere"
	MaxPrice    Money  `json:"max_price,omitempty"`    // per hour for a relaunch elsewhere; 0: 1.5 × the current rate
}

// DefaultMaxRestarts applies when a restart policy names no limit.
const DefaultMaxRestarts = 3

// Limit is the most restarts after exits the policy allows.
func (r RestartPolicy) Limit() int {
	if r.MaxRestarts == nil {
		return DefaultMaxRestarts
	}
	return *r.MaxRestarts
}

// Validate checks the policy; the error names the field.
func (r RestartPolicy) Validate() error {
	switch r.Policy {
	case "", RestartNever, RestartOnFailure, RestartAlways:
	default:
		return FieldErrorf("restart.policy", "%q: use never, on-failure or always", r.Policy)
	}
	if m := r.MaxRestarts; m != nil && (*m < 0 || *m > 1000) {
		return FieldErrorf("restart.max_restarts", "%d: give 0 to 1000", *m)
	}
	switch r.Recover {
	case "", "elsewhere":
	default:
		return FieldErrorf("restart.recover", "%q: use elsewhere, or leave it empty to wait for the host", r.Recover)
	}
	if r.MaxPrice < 0 {
		return FieldErrorf("restart.max_price", "must not be negative")
	}
	return nil
}
