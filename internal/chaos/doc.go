// Package chaos runs a Suanli marketplace across several hosts on one
// machine and breaks them, for the multi-host reliability tests and for
// `suanli-bench reliability`.
//
// A Cluster is one control plane (`suanli server`, a process on this
// machine) and N agents (`suanli agent --runtime process`), each in its own
// Docker container on a private network the cluster creates, from an image
// built locally FROM scratch with the static suanli binary and a static
// workload (testdata/beat) that proves from outside that it runs. Faults are
// Docker's and the kernel's: SIGKILL of a host (docker kill), a frozen host
// (docker pause), a frozen agent process (SIGSTOP), a partition (docker
// network disconnect), and a lossy link (iptables' statistic match in the
// host's network namespace, and tc netem delay where the kernel has it). A
// Round injects faults, heals them, and measures against the ledger, the
// instances' histories and the workloads' beat logs: detection latency,
// compute billed after the last heartbeat or while no copy ran, duplicate
// copies, relaunches, recovery and cleanup time.
//
// Every Docker object carries the label chaos.LabelRun with the cluster's run
// id and a name that includes it, so that parallel runs on one daemon never
// touch each other's; Close removes them all. The package needs Docker, and
// root for the lossy link (it enters the containers' network namespaces); it
// is test tooling and no part of the product.
package chaos
