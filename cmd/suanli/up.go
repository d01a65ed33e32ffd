package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
)

// Default prices for the local machine that `up` lists.
var (
	defaultPriceGPU  = suanli.Money(400_000) // $0.40 per GPU-hour
	defaultPriceCPU  = suanli.Money(20_000)  // $0.02 per core-hour
	defaultPriceRAM  = suanli.Money(5_000)   // $0.005 per GB-hour
	defaultPriceDisk = suanli.Money(100_000) // $0.10 per GB-month
	defaultPriceInet = suanli.Money(10_000)  // $0.01 per GB
)

func newUpCmd(a *app) *cobra.Command {
	var sc serverConfig
	var ac agentConfig
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run everything on this machine: control plane, a local host agent, the console",
		Long: `Start a complete marketplace in one process, with no setup:

  - the control plane (API under /v1, OpenAPI at /v1/openapi.json, the
    web console at /, the Vast.ai API under /api/v0 for vastai tools —
    --vast-api=false turns it off), with an embedded SQLite database in HOME;
  - a host agent for this machine, registered and listed with default prices;
  - an operator account with starting credit, whose API key is written to
    HOME/config.json (mode 0600) so every other command works at once.

Ctrl-C stops it cleanly; running instances keep running and are re-adopted
the next time. Running 'up' again reuses the data.`,
		Example: `  suanli up
  suanli up --home /tmp/market --addr 127.0.0.1:0 --fake-gpus "RTX 4090:2"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			unlock, err := lockHome(a.home)
			if err != nil {
				return err
			}
			defer unlock()
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			logger := newLogger()
			r, err := startControlPlane(ctx, a, sc, logger)
			if err != nil {
				return err
			}
			if ac.DataDir == "" {
				ac.DataDir = filepath.Join(a.home, "agent")
			}
			if ac.SSHAddr == "" {
				ac.SSHAddr = "127.0.0.1:0" // up is local: SSH too, on a free port
			}
			ac.caPEM = r.caPEM
			opCtx := suanli.NewContextWithPrincipal(ctx, &suanli.Principal{AccountID: r.operator.ID, Role: suanli.RoleOperator, Scopes: []string{suanli.ScopeAll}})
			agentDone, st, coll, err := startAgent(ctx, ac, r.url, filepath.Join(a.home, "agent.json"), func(ctx context.Context) (string, error) {
				t, err := r.svc.CreateJoinToken(opCtx, time.Hour)
				if err != nil {
					return "", err
				}
				return t.Token, nil
			}, logger)
			if err != nil {
				cancel()
				<-r.done
				return err
			}
			r.api.Registry().MustRegister(coll) // one /metrics for the control plane and the local agent
			m, err := r.svc.FindMachineByID(opCtx, st.MachineID)
			if err != nil {
				cancel()
				<-r.done
				return err
			}
			if !m.Listing.Listed && m.Listing.PriceGPU == 0 && m.Listing.PriceCPU == 0 {
				u := suanli.ListingUpdate{PriceDisk: &defaultPriceDisk, PriceInetUp: &defaultPriceInet, PriceInetDown: &defaultPriceInet}
				if m.IsGPU() {
					bid := defaultPriceGPU / 2
					u.PriceGPU, u.MinBid = &defaultPriceGPU, &bid
				} else {
					bid := defaultPriceCPU / 2
					u.PriceCPU, u.PriceRAM, u.MinBid = &defaultPriceCPU, &defaultPriceRAM, &bid
				}
				if _, err := r.svc.ListMachine(opCtx, m.ID, u); err != nil {
					logger.Warn("list local machine", "machine_id", m.ID, "err", err)
				}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Suanli is up at %s (ready in %s)\n", r.url, time.Since(start).Round(time.Millisecond))
			fmt.Fprintf(out, "  home:     %s\n  machine:  %d (%s)\n  operator: API key in %s\n\n", a.home, st.MachineID, describeHW(m), a.configPath())
			fmt.Fprintf(out, "Try, from another terminal:\n  suanli search\n  suanli create %d --image ubuntu:24.04 -- sh -c 'echo hello; sleep 600'\n  suanli ls\n  suanli billing charges\n\nCtrl-C stops it.\n", st.MachineID)
			select {
			case <-ctx.Done():
			case err := <-agentDone:
				if err != nil && ctx.Err() == nil {
					logger.Error("agent stopped", "err", err)
				}
			}
			cancel()
			<-r.done
			fmt.Fprintln(out, "stopped")
			return nil
		},
	}
	sc.flags(cmd)
	ac.flags(cmd)
	return cmd
}

func describeHW(m *suanli.Machine) string {
	hw := m.Hardware
	s := fmt.Sprintf("%d cores, %d GB RAM", hw.CPUCores, hw.RAMMB/1024)
	if n := len(hw.GPUs); n > 0 {
		s = fmt.Sprintf("%d× %s, ", n, hw.GPUs[0].Name) + s
		if m.Simulated {
			s += ", simulated GPUs"
		}
	}
	return s
}
