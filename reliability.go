package suanli

import "time"

// HostRecord is what the control plane has observed of a host, from which
// its reliability score follows.
type HostRecord struct {
	Observed     time.Duration `json:"observed"` // time since it joined that the control plane watched
	Online       time.Duration `json:"online"`   // of which it answered heartbeats
	Started      int64         `json:"started"`  // instances that reached running
	Lost         int64         `json:"lost"`     // instances lost with the host
	FailedStarts int64         `json:"failed_starts"`
}

// NewHostReliability is where a new host starts: low, until it proves itself.
const NewHostReliability = 0.6

// Reliability scores a host in [0, 1]: its uptime fraction times its share
// of instances that neither got lost nor failed to start, blended with the
// new-host prior until a week of observation gives full confidence.
func (h HostRecord) Reliability() float64 {
	c := float64(h.Observed) / float64(7*24*time.Hour)
	if c > 1 {
		c = 1
	}
	up := 1.0
	if h.Observed > 0 {
		up = float64(h.Online) / float64(h.Observed)
	}
	bad := float64(h.Lost + h.FailedStarts)
	ok := 1 - bad/(float64(h.Started)+bad+1)
	return (1-c)*NewHostReliability + c*up*ok
}

// Quota limits what an account runs at once. Zero fields mean the
// marketplace defaults (lower for new accounts).
type Quota struct {
	GPUs      int `json:"gpus"`
	Instances int `json:"instances"`
}

// Default quotas (DESIGN §4 "quota: new accounts may run 2 GPUs at once").
var (
	NewAccountQuota  = Quota{GPUs: 2, Instances: 4}
	AccountQuota     = Quota{GPUs: 64, Instances: 128}
	NewAccountPeriod = 7 * 24 * time.Hour
)
