package agent

import (
	"context"

	"github.com/suanli/suanli"
)

// Runtime runs instances on this machine: the process runtime (agent/process)
// and the Docker runtime (agent/docker) implement it. The agent loop calls it
// from one goroutine per instance, never twice at once for the same instance,
// so an implementation needs locking only for its own shared state.
//
// Instances are identified by their control-plane id. A runtime must find the
// instances it started before an agent restart (Status lists them), so the
// agent can re-adopt them.
type Runtime interface {
	// Name is "process" or "docker".
	Name() string
	// Ensure brings the instance to spec.Desired (running or stopped),
	// creating it first when needed. It is idempotent. It may block while an
	// image is pulled; Status reports "pulling" meanwhile. Stopping sends
	// SIGTERM and SIGKILL after spec.StopGrace. The error message names the
	// cause and the fix; the agent reports it as a failed instance.
	Ensure(ctx context.Context, spec suanli.InstanceSpec) error
	// Remove stops the instance if it runs and deletes it and its data.
	// Removing an unknown instance is not an error.
	Remove(ctx context.Context, id int64) error
	// Status returns the actual state of every instance the runtime holds.
	Status(ctx context.Context) ([]suanli.InstanceReport, error)
	// ReadLog returns up to max bytes of the instance's combined
	// stdout/stderr from offset (fewer at the end of what exists).
	ReadLog(ctx context.Context, id int64, offset int64, max int) ([]byte, error)
}

// UsageCounter is implemented by runtimes that count traffic per instance
// (cumulative bytes since the instance was created).
type UsageCounter interface {
	Usage(ctx context.Context) (map[int64]suanli.UsageReport, error)
}

// TokenWriter is implemented by runtimes that can hand a running workload
// a fresh instance token (suanli.InstanceSpec.Token) without restarting it:
// the workload reads it from the file SUANLI_TOKEN_FILE names. The agent
// calls WriteToken from its sync goroutine when the server sends a new
// token, possibly while an Ensure for the instance runs; an error (the
// instance does not exist yet) makes the agent try again on the next sync.
type TokenWriter interface {
	WriteToken(ctx context.Context, id int64, token string) error
}

// Releaser is implemented by runtimes that say what Remove did to an
// instance's data (a crypto-erase, an overwrite, a plain delete). The agent
// calls Release instead of Remove and reports the result to the control
// plane, which records it in the renter's audit log.
type Releaser interface {
	// Release does what Remove does and returns what was done to the data.
	// Releasing an unknown instance is not an error; its Release says
	// nothing was there.
	Release(ctx context.Context, id int64) (suanli.Release, error)
}
