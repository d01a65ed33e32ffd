// Package agent is the host side of Suanli: it detects the machine's hardware
// (CPU, RAM, disk, NVIDIA GPUs or simulated ones), keeps the machine in sync
// with the control plane, and drives a Runtime that runs the instances.
//
// The sync loop (Agent.Run) is a long poll: the agent sends its heartbeat,
// the actual state of every instance, new log bytes and usage counters; the
// control plane answers with the desired state as soon as it changes or after
// the heartbeat interval. A local change (an instance started, exited, wrote
// to its log) cuts a waiting poll short so that it is reported at once.
//
// When the control plane offers a light heartbeat channel (package
// heartbeat) and Config.DialBeats is set, an agent with nothing new sends
// a signed UDP datagram per interval instead of a long poll (beat.go), and
// does a full sync when an answer or a poke says the desired state
// changed, when it has news, at least every FullSyncEvery, and when a beat
// that asked for an answer has none (UDP blocked: after two such misses it
// long-polls for five minutes).
//
// The runtimes live in subpackages (agent/process, agent/docker) and import
// this package for the Runtime interface; this package must not import them.
// It must not know about HTTP or SQL either: it speaks to the control plane
// through the Server interface, which the HTTP client implements, and is wired
// together in cmd/suanli.
package agent
