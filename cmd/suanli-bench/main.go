// Command suanli-bench runs Suanli's benchmarks: programs with seeded
// generators and side-by-side baselines that check every system returns the
// same answers before they report any time (DESIGN §8).
//
//	suanli-bench bill [flags]          the hour close: billing.Book + sqlstore vs row-per-charge SQLite
//	suanli-bench search [flags]        offer search: market.Index vs SQLite vs a naive scan
//	suanli-bench place [flags]         placement at 100k hosts: group-committed decisions vs one SQLite transaction each
//	suanli-bench reliability [flags]   host faults on agents in Docker containers: detection, billing, copies
//	suanli-bench heartbeat [flags]     heartbeat fan-in: 100k agents on the light UDP channel vs one HTTP POST + one write per beat
//
// Progress goes to stderr, results to stdout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
)

const usage = `usage: suanli-bench <benchmark> [flags]

benchmarks:
  bill         the hour close: settle N running instances with the product's close
               (in-memory book, postings per account, derived sub-ledger) against
               a batched row-per-charge SQLite settlement (see suanli-bench bill -h)
  search       offer search: the in-memory market index against SQLite and a naive
               scan-and-sort, under a concurrent writer (see suanli-bench search -h)
  http-search  POST /v1/offers/search through the real API server over loopback:
               requests/s and p99 with concurrent clients (answers checked first)
  place        placement and preemption at 100k hosts: sched.Cluster with a
               group-committed decision log against one SQLite transaction per
               placement (see suanli-bench place -h)
  heartbeat    heartbeat fan-in: N simulated agents beating every 2s over the light
               channel (signed UDP, in-memory table, batched writes) against one HTTP
               POST and one database write per beat; server CPU per beat, time until
               a beat or a change is visible, dead-agent detection (see suanli-bench heartbeat -h)
  reliability  host faults (kill, freeze, partition, SIGSTOP, packet loss) on agents in
               Docker containers: detection latency, billing after the last heartbeat,
               duplicate copies, relaunches, recovery (see suanli-bench reliability -h)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "bill":
		err = runBill(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "search":
		err = runSearch(ctx, os.Args[2:])
	case "place":
		err = runPlace(os.Args[2:])
	case "http-search":
		err = runHTTPSearch(ctx, os.Args[2:])
	case "reliability":
		err = runReliability(ctx, os.Args[2:])
	case "heartbeat":
		err = runHeartbeat(ctx, os.Args[2:])
	case "heartbeat-server": // the heartbeat benchmark's server process
		err = runHeartbeatServer(ctx, os.Args[2:])
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "suanli-bench: unknown benchmark %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "suanli-bench:", err)
		os.Exit(1)
	}
}

// startCPUProfile writes a CPU profile to path ("" profiles nothing) until
// the returned stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
