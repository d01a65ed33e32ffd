package suanli

import "time"

// Volume statuses.
const (
	VolumeReady   = "ready"
	VolumeDeleted = "deleted"
)

// Volume is persistent storage on one machine that outlives instances: it
// is attached at create (-v NAME:/path), billed per GB-month from creation
// to deletion at the rate locked when it was created, and wiped on delete.
type Volume struct {
	ID         int64             `json:"id"`
	AccountID  int64             `json:"account_id"`
	MachineID  int64             `json:"machine_id"`
	Name       string            `json:"name"`
	SizeGB     int64             `json:"size_gb"`
	Rate       Money             `json:"rate_per_gb_month"`
	Status     string            `json:"status"`
	AttachedTo int64             `json:"attached_to,omitempty"` // a live instance using it
	Project    string            `json:"project,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"` // cost tags, as an instance's: tag budgets and reports count the volume
	CreatedAt  time.Time         `json:"created_at"`
	DeletedAt  *time.Time        `json:"deleted_at,omitempty"`
	CostSoFar  Money             `json:"cost_so_far"`
}

// VolumeCreate asks for a volume on a machine.
type VolumeCreate struct {
	MachineID int64             `json:"machine_id"`
	Name      string            `json:"name"`
	SizeGB    int64             `json:"size_gb"`
	Project   string            `json:"project,omitempty"`
	Tags      map[string]string `json:"tags,omitempty"` // cost tags KEY=VALUE, validated as an instance's
}

// VolumeMount attaches a volume to an instance at a path.
type VolumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
	ID   int64  `json:"id,omitempty"` // filled by the control plane
}

// VolumeSpec is a volume an agent must hold.
type VolumeSpec struct {
	ID     int64  `json:"id"`
	Name   string `json:"name"`
	SizeGB int64  `json:"size_gb"`
	// Key encrypts the volume at rest, as InstanceSpec.DiskKey does an
	// instance's disk; destroyed by the control plane when the volume is
	// deleted.
	Key []byte `json:"key,omitempty"`
}

// MeterVolume is the meter kind of volume storage. Volume meters are keyed
// by the negated volume id where instance meters use the instance id.
const MeterVolume = "volume"
