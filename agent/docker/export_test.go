package docker

import (
	"context"

	"github.com/moby/moby/api/types/jsonstream"
)

// Internals exposed to the external tests.
var (
	GPURequests    = gpuRequests
	RequestedPorts = requestedPorts
	NormalizeArch  = normalizeArch
	TelemetryOf    = telemetryOf
	SplitRef       = splitRef
)

// PullFailure names the class pullFailureOf gives err: "no repository",
// "no tag", "not found", "refused", "unreachable" or "other".
func PullFailure(err error) string {
	return [...]string{pullOther: "other", pullNoRepo: "no repository", pullNoTag: "no tag",
		pullNotFound: "not found", pullRefused: "refused", pullUnreachable: "unreachable"}[pullFailureOf(err)]
}

// ProcDiskBytes is the block I/O fallback's reading of the container cid
// whose init process is pid: the bytes its processes read and wrote, and
// whether its cgroup was found.
func ProcDiskBytes(pid int, cid string) (read, write int64, found bool) {
	procs := cgroupProcs(pid, cid)
	read, write = procDiskBytes(procs)
	return read, write, procs != ""
}

// PullMessage folds pull progress messages and returns the Status message.
func PullMessage(msgs []jsonstream.Message) string {
	var p pullProgress
	for _, m := range msgs {
		p.update(m)
	}
	return p.String()
}

// CheckDisks runs one pass of the disk watch now (its stops go on in the
// background).
func (r *Runtime) CheckDisks(ctx context.Context) error { return r.checkDisks(ctx) }
