// Package process is the agent's process runtime: it runs each instance's
// command as a plain child process of the agent, for development, tests and
// trusted hosts where Docker is not available.
//
// Each instance lives in DIR/instances/<id>/:
//
//	spec.json   the last InstanceSpec the agent asked for
//	state.json  status, pid, the process's start time (to recognise it after
//	            an agent restart), exit code
//	log         the command's stdout and stderr, appended across starts
//	work/       the command's working directory and HOME
//
// The command runs in its own process group with a minimal environment, so
// that stopping it reaches everything it started and nothing else, and it
// outlives an agent restart: a new Runtime on the same DIR finds it and can
// stop it.
//
// This runtime does not isolate anything: the command runs as the agent's
// user and can see the host. It must not be offered to untrusted renters;
// that is what agent/docker is for. Image, disk size, CPU and RAM limits in
// the spec are not enforced here.
package process
