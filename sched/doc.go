// Package sched decides placement and preemption from plain data.
//
// Schedule takes a Snapshot (hosts with their hardware, terms, lease status
// and the claims of their live instances) and a Request (GPU count, models,
// VRAM, cores, RAM, disk, regions, countries, maximum price, rental type,
// bid, how many instances, all or nothing) and returns a plan: for each
// instance a host, its GPUs, its locked rates and the interruptible
// instances it preempts, plus a Rejection with a reason for every host that
// could not take it. Hosts go through a pipeline of feasibility steps
// (listed, online, end date, simulated, GPU or CPU, model, VRAM, region,
// country, disk, size, then the allotment's cores, RAM, price and minimum
// bid), then an arbitration of their claims.
//
// Arbitration is the one rule of who holds units (GPUs, or cores on a
// CPU-only host): firm rentals (on-demand, reserved) before bids, among
// bids the higher bid per unit, at equal rank owners before waiters (an
// equal bid never preempts) and waiters in queue order; each claim wins when
// it fits in what the claims before it left. Schedule applies it to a
// newcomer; Arbitrate applies it to a host after units were freed or bids
// changed, resuming waiting instances and preempting outranked ones.
//
// Cluster holds the same state for many hosts, indexed so that a placement
// at 100,000 hosts costs about what it costs at a hundred; it ranks a
// bounded number of candidates through the same pipeline.
//
// The package does no I/O and reads no clock; its randomness is seeded.
// The store applies a plan in one transaction, re-checking it, and the
// caller plans again when it was stale.
package sched
