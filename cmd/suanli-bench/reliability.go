package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/suanli/suanli/internal/chaos"
)

// reliabilityConfig holds the reliability benchmark's flags.
type reliabilityConfig struct {
	trials      int
	faults      string
	opts        chaos.Options
	lossPercent int
	lossFor     time.Duration
	jsonOut     bool
}

func runReliability(ctx context.Context, args []string) error {
	var c reliabilityConfig
	fs := flag.NewFlagSet("reliability", flag.ContinueOnError)
	fs.IntVar(&c.trials, "trials", 10, "rounds; each injects every fault once, on its own host")
	fs.StringVar(&c.faults, "faults", "kill,freeze,partition,sigstop-agent,short-partition,loss",
		"faults to inject (kill, freeze, partition, sigstop-agent, short-partition, loss)")
	fs.DurationVar(&c.opts.Heartbeat, "heartbeat", time.Second, "server --heartbeat")
	fs.DurationVar(&c.opts.SuspectAfter, "suspect-after", 3*time.Second, "server --suspect-after")
	fs.DurationVar(&c.opts.LostAfter, "lost-after", 10*time.Second, "server --lost-after")
	fs.DurationVar(&c.opts.FenceAfter, "fence-after", 5*time.Second, "agent --fence-after")
	fs.DurationVar(&c.opts.Settle, "settle-every", 200*time.Millisecond, "server --settle-every")
	fs.IntVar(&c.lossPercent, "loss", 20, "percent of packets the loss fault drops, each way")
	fs.DurationVar(&c.lossFor, "loss-for", 0, "how long the loss fault lasts (default lost-after + a lease tick + 6s)")
	fs.BoolVar(&c.jsonOut, "json", false, "print every trial as JSON instead of the table")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: suanli-bench reliability [flags]\n\n"+
			"Starts a control plane on this machine and agents in Docker containers on a private\n"+
			"network (built from the static binary; needs Docker, and root for the loss fault),\n"+
			"then, per round, puts a managed job and a plain rental on one host per fault, injects\n"+
			"every fault at once, heals it, and measures against the ledger, the instances'\n"+
			"histories and the workloads' own beat logs: detection latency, compute billed after\n"+
			"the last heartbeat or while no copy ran, copies running at once, relaunches, recovery\n"+
			"and cleanup. Prints one Markdown row per fault (docs/reliability.md).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var faults []chaos.Fault
	lost := 0
	for _, f := range strings.Split(c.faults, ",") {
		f = strings.TrimSpace(f)
		switch chaos.Fault(f) {
		case chaos.Kill, chaos.Freeze, chaos.Partition, chaos.StopAgent, chaos.ShortPartition, chaos.Loss:
		default:
			return fmt.Errorf("-faults: unknown fault %q (kill, freeze, partition, sigstop-agent, short-partition, loss)", f)
		}
		if chaos.Fault(f) == chaos.Loss {
			if err := chaos.LinkFaultsAvailable(); err != nil {
				return fmt.Errorf("the loss fault: %w", err)
			}
		}
		faults = append(faults, chaos.Fault(f))
		if chaos.Fault(f).Lost() {
			lost++
		}
	}
	if c.trials < 1 {
		return fmt.Errorf("-trials %d: at least 1", c.trials)
	}
	// Spares take the lost hosts' managed jobs: one GPU each, two per spare,
	// and one spare more.
	c.opts.Agents = len(faults) + (lost+1)/2 + 1
	c.opts.Logf = progress
	if err := chaos.NetemSupported(ctx); err != nil {
		progress("the loss fault drops packets but adds no delay: %v", err)
	}
	progress("starting a control plane and %d agents", c.opts.Agents)
	cl, err := chaos.Start(ctx, c.opts)
	if err != nil {
		return err
	}
	defer cl.Close()
	var trials []*chaos.Trial
	for n := 1; n <= c.trials; n++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ts, err := cl.Round(ctx, n, faults, chaos.RoundOptions{LossPercent: c.lossPercent, LossFor: c.lossFor})
		if err != nil {
			return fmt.Errorf("round %d: %w", n, err)
		}
		for _, t := range ts {
			progress("round %d %-15s detected %5.2fs  billed after heartbeat %.3fs  idle %.3fs  copies %d  relaunches %d  lost %d  recovery %5.2fs %s",
				n, t.Fault, t.Detected.Seconds(), t.BilledAfterHeartbeat, t.BilledIdle, t.MaxCopies, t.Relaunches, t.Lost, t.Recovery.Seconds(), strings.Join(t.Notes, "; "))
		}
		trials = append(trials, ts...)
	}
	if c.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(trials)
	}
	o := cl.Opts
	fmt.Printf("%d rounds; heartbeat %s, suspect after %s, lost after %s, fence after %s, lease check every %s (detection bound %s); %d agents in containers\n\n",
		c.trials, o.Heartbeat, o.SuspectAfter, o.LostAfter, o.FenceAfter, o.LeaseTick(), o.DetectionBound(), len(cl.Agents))
	chaos.WriteTable(os.Stdout, chaos.Summarize(trials))
	return nil
}
