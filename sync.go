package suanli

import "time"

// The agent sync protocol (DESIGN §2): the agent posts a SyncRequest with its
// heartbeat, actual state, logs and usage; the server answers with the
// desired state. The call is a long poll: when Wait is set and the desired
// state's version equals KnownVersion, the server holds the reply until that
// machine's desired state changes or the heartbeat interval passes.

// SyncRequest is what an agent reports.
type SyncRequest struct {
	MachineID    int64            `json:"machine_id"`
	AgentVersion string           `json:"agent_version"`
	Runtime      string           `json:"runtime"`
	Hardware     *Hardware        `json:"hardware,omitempty"` // sent at start and when it changed
	Seq          int64            `json:"seq"`                // per-agent sequence number, increasing
	KnownVersion int64            `json:"known_version"`      // the desired-state version the agent has
	Wait         bool             `json:"wait"`
	Instances    []InstanceReport `json:"instances"`
	Logs         []LogChunk       `json:"logs,omitempty"`
	Usage        []UsageReport    `json:"usage,omitempty"`
	TaskResults  []TaskResult     `json:"task_results,omitempty"`
	SSH          *SSHEndpoint     `json:"ssh,omitempty"` // sent with Hardware; nil: no SSH endpoint (or unchanged)
	// Releases say what the agent did to the data of instances and volumes
	// it removed; it sends each until a sync is answered, and the control
	// plane records them in the audit log.
	Releases []Release `json:"releases,omitempty"`
}

// Release kinds.
const (
	ReleaseInstance = "instance"
	ReleaseVolume   = "volume"
)

// Release methods, strongest first.
const (
	ReleaseCryptoErase = "crypto-erase" // the only key removed and destroyed; ciphertext deleted
	ReleaseOverwrite   = "overwrite"    // files overwritten with zeros, then deleted
	ReleaseDelete      = "delete"       // deleted; blocks freed, not overwritten
)

// Release is what an agent did to one instance's or volume's data when it
// removed it.
type Release struct {
	Kind   string    `json:"kind"` // ReleaseInstance or ReleaseVolume
	ID     int64     `json:"id"`
	Method string    `json:"method"` // ReleaseCryptoErase, ReleaseOverwrite or ReleaseDelete
	Detail string    `json:"detail"` // what was done, in a sentence
	At     time.Time `json:"at"`
}

// InstanceReport is an agent's view of one instance.
type InstanceReport struct {
	ID        int64      `json:"id"`
	Status    string     `json:"status"` // pulling, running, stopped, exited, failed
	Message   string     `json:"message,omitempty"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	// EndedAt is when a stopped, exited or failed workload ended, by the
	// control plane's clock as the agent reckons it (its own clock plus the
	// offset the last answered sync's ServerTime showed), when the runtime
	// knows it. A workload that ended while the agent could not report it
	// (a fence during a partition) is billed up to then, not up to the
	// report.
	EndedAt   *time.Time  `json:"ended_at,omitempty"`
	Telemetry *Telemetry  `json:"telemetry,omitempty"`
	Ports     map[int]int `json:"ports,omitempty"` // container port → host port
}

// Telemetry is one instance's resource use, sampled by the agent and sent
// with each sync. The control plane keeps the latest sample per running
// instance and shows it on the instance (suanli show, suanli top).
//
// The byte counters are cumulative over the instance's current run: they
// start at zero when the workload (container or process group) starts and
// only grow while it runs; a stop/start or restart starts them again from
// zero. Rates are for the reader to compute between two samples (suanli
// top does), treating a decrease as a new run. A zero counter means nothing
// counted or not known: the process runtime cannot count network bytes per
// instance (Linux keeps them per network namespace, and its instances share
// the host's), and some hosts report no block I/O per container.
//
// GPU fields are filled only for real GPUs: utilisation is the mean and
// memory the sum over the instance's GPUs; temperature is the hottest of
// them and power their summed draw, zero when the driver reports none.
type Telemetry struct {
	CPUPercent     float64 `json:"cpu_percent"` // 100 = one core
	MemoryMB       int64   `json:"memory_mb"`   // resident, without page cache
	DiskReadBytes  int64   `json:"disk_read_bytes,omitempty"`
	DiskWriteBytes int64   `json:"disk_write_bytes,omitempty"`
	NetRxBytes     int64   `json:"net_rx_bytes,omitempty"`
	NetTxBytes     int64   `json:"net_tx_bytes,omitempty"`
	GPUUtilPercent float64 `json:"gpu_util_percent"`
	GPUMemoryMB    int64   `json:"gpu_memory_mb"`
	GPUTempC       int     `json:"gpu_temp_c,omitempty"`
	GPUPowerW      float64 `json:"gpu_power_w,omitempty"`
}

// UsageReport carries an instance's cumulative traffic counters. Seq is the
// agent's sequence number for this report, so the server bills each once.
type UsageReport struct {
	InstanceID int64 `json:"instance_id"`
	Seq        int64 `json:"seq"`
	TxBytes    int64 `json:"tx_bytes"`
	RxBytes    int64 `json:"rx_bytes"`
}

// SyncResponse is the desired state for the machine.
type SyncResponse struct {
	MachineID         int64           `json:"machine_id"`
	Version           int64           `json:"version"`
	Instances         []InstanceSpec  `json:"instances"` // everything the machine should hold; anything else goes
	HeartbeatInterval time.Duration   `json:"heartbeat_interval"`
	LostAfter         time.Duration   `json:"lost_after"`
	ServerTime        time.Time       `json:"server_time"`
	LogOffsets        map[int64]int64 `json:"log_offsets,omitempty"` // how much of each log the server holds
	// Tasks are one-off requests the control plane waits on (pre-flight
	// checks, exec). The agent runs each once and reports its result until
	// the task is no longer listed.
	Tasks []AgentTask `json:"tasks,omitempty"`
	// Volumes are every volume the machine must hold; the agent creates
	// missing ones and wipes and removes the others.
	Volumes   []VolumeSpec `json:"volumes,omitempty"`
	SSHCAKeys []string     `json:"ssh_ca_keys,omitempty"` // the SSH CA's public keys: the only user authorities the agent's SSH endpoint trusts
	// Heartbeat, when set, is the light heartbeat channel (package
	// heartbeat): between full syncs the agent sends a signed UDP datagram
	// per interval there instead of a sync. Nil: the control plane has none
	// open; the agent long-polls as before.
	Heartbeat *HeartbeatChannel `json:"heartbeat,omitempty"`
}

// HeartbeatChannel is where and how an agent sends light heartbeats.
type HeartbeatChannel struct {
	// Addr is the UDP address: HOST:PORT, or :PORT on the host of the
	// server URL the agent syncs with.
	Addr string `json:"addr"`
	// Keys sign the datagrams: the machine's key for the current epoch and
	// the next one's, so that the agent rolls over without a sync.
	Keys []HeartbeatKey `json:"keys"`
}

// HeartbeatKey is one of a machine's heartbeat keys. It is a secret, like
// the agent's API key.
type HeartbeatKey struct {
	Epoch uint32    `json:"epoch"`
	From  time.Time `json:"from"` // when it becomes current, on the control plane's clock
	Key   []byte    `json:"key"`  // 32 bytes
}

// Agent task kinds.
const (
	TaskPreflight = "preflight" // check that Spec can run here, before anything is reserved
	TaskExec      = "exec"      // run Cmd inside instance InstanceID
)

// AgentTask is a one-off request to an agent.
type AgentTask struct {
	ID         string        `json:"id"`
	Kind       string        `json:"kind"`
	Spec       *InstanceSpec `json:"spec,omitempty"`
	InstanceID int64         `json:"instance_id,omitempty"`
	Cmd        []string      `json:"cmd,omitempty"`
	Timeout    time.Duration `json:"timeout,omitempty"`
}

// TaskResult is what an agent task produced. Error is a message a person
// can act on ("image alpine is linux/arm64, host is linux/amd64: …").
type TaskResult struct {
	ID        string `json:"id"`
	Error     string `json:"error,omitempty"`
	ExitCode  int    `json:"exit_code"`
	Output    []byte `json:"output,omitempty"` // combined stdout and stderr, at most MaxTaskOutput bytes
	Truncated bool   `json:"truncated,omitempty"`
}

// MaxTaskOutput caps what an exec task returns.
const MaxTaskOutput = 1 << 20

// InstanceSpec is what the agent must run for one instance.
type InstanceSpec struct {
	ID         int64             `json:"id"`
	Desired    string            `json:"desired"` // running or stopped
	Image      string            `json:"image"`
	Cmd        []string          `json:"cmd,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	DiskGB     int64             `json:"disk_gb"`
	Ports      []int             `json:"ports,omitempty"` // container TCP ports to publish
	Volumes    []VolumeMount     `json:"volumes,omitempty"`
	GPUIndexes []int             `json:"gpu_indexes,omitempty"`
	GPUUUIDs   []string          `json:"gpu_uuids,omitempty"`
	Simulated  bool              `json:"simulated"`
	CPUCores   int               `json:"cpu_cores"`
	RAMMB      int64             `json:"ram_mb"`
	StopGrace  time.Duration     `json:"stop_grace"`
	// RegistryAuth pulls a private image (docker runtime).
	RegistryAuth *RegistryAuth `json:"registry_auth,omitempty"`
	// Token is the instance's own short-lived credential (instance:self:
	// read, stop and report progress of this instance only). The server
	// sends a fresh one before the last expires; the runtime gives it to
	// the workload as SUANLI_TOKEN at start and keeps the file named by
	// SUANLI_TOKEN_FILE current. A new token alone is not a new spec: it
	// never restarts the workload.
	Token string `json:"token,omitempty"`
	// DiskKey is the instance disk's encryption key (64 bytes), sent only to
	// machines that report Hardware.DiskEncryption. The control plane keeps
	// the only lasting copy, sealed, and destroys it when the instance is
	// destroyed; the agent holds it in the kernel only, never on disk.
	DiskKey []byte `json:"disk_key,omitempty"`
}

// JoinRequest registers a machine with a one-time join token.
type JoinRequest struct {
	Token    string   `json:"token"`
	Hardware Hardware `json:"hardware"`
	Runtime  string   `json:"runtime"`
}

// JoinResponse gives the agent its machine id and its own credential.
type JoinResponse struct {
	MachineID int64  `json:"machine_id"`
	APIKey    string `json:"api_key"`
}
