// Package procio reads a Linux process's storage I/O counters from
// /proc/<pid>/io, for the agent's runtimes to report per-instance disk
// telemetry. It only reads and parses; which processes make up an instance
// (a process group, a container's cgroup) is the runtime's to decide.
package procio
