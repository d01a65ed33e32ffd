// Package sched decides placement: given plain data (a machine, what its
// live instances hold, a request) it returns a plan (which GPUs, cores and
// memory, at which locked rates) or a reason a person can act on. It does no
// I/O and reads no clock; the store applies the plan and re-checks it in a
// transaction.
package sched
