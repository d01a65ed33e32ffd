package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
)

// exitError carries a remote command's exit code to main.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("the command exited with code %d", e.code) }

func newExecCmd(a *app) *cobra.Command {
	var timeout time.Duration
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "exec ID -- CMD [ARGS...]",
		Short: "Run a command inside a running instance; its exit code becomes ours",
		Long: `Run a command inside a running instance (in its container, or in its
directory and environment with the process runtime) and print its output.
The command's exit code is suanli's exit code. Non-interactive: for a shell,
use suanli ssh.`,
		Example: "  suanli exec 7 -- nvidia-smi\n  suanli exec 7 -- sh -c 'ls /workspace | wc -l'",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("instance", args[0])
			if err != nil {
				return err
			}
			if dash := cmd.ArgsLenAtDash(); dash != 1 {
				return suanli.FieldErrorf("cmd", "write the command after --: suanli exec %s -- %s", args[0], strings.Join(args[1:], " "))
			}
			res, err := a.client().Exec(cmd.Context(), id, args[1:], timeout)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, res)
			}
			cmd.OutOrStdout().Write(res.Output)
			if res.Truncated {
				fmt.Fprintf(cmd.ErrOrStderr(), "\n[suanli: output truncated at %d bytes]\n", suanli.MaxTaskOutput)
			}
			if res.ExitCode != 0 {
				return &exitError{code: res.ExitCode}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "kill the command after this long (at most 10m)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the exit code and output as JSON")
	return cmd
}

func newTopCmd(a *app) *cobra.Command {
	var once, jsonOut bool
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "top ID",
		Short: "Watch an instance's CPU, memory, disk, network and GPU use and its cost, refreshed",
		Long: `Watch an instance's resource use and cost, refreshed every --every.
CPU (100% is one core), memory, disk bytes read and written, network bytes
in and out, and for real GPUs their utilisation, memory, temperature (the
hottest) and power (summed). Byte counters count from the instance's last
start; the rates after them are computed between the agent's samples.
--json prints the instance, telemetry included, once.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("instance", args[0])
			if err != nil {
				return err
			}
			c := a.client()
			var samples telemetrySampler
			for {
				in, err := c.FindInstanceByID(cmd.Context(), id)
				if err != nil {
					return err
				}
				if jsonOut {
					return a.printJSON(cmd, in)
				}
				out := cmd.OutOrStdout()
				if !once {
					fmt.Fprint(out, "\033[H\033[2J")
				}
				now := time.Now()
				fmt.Fprintf(out, "instance %d  %s  %s  on machine %d  %s\n", in.ID, in.Status, in.Image, in.MachineID, now.Format(time.TimeOnly))
				if tm := in.Telemetry; tm != nil {
					v := samples.view(tm, now)
					v.GPUs = in.GPUCount > 0 && !in.Simulated
					for _, r := range v.rows() {
						fmt.Fprintf(out, "%-11s %s\n", r[0], r[1])
					}
				} else {
					fmt.Fprintln(out, "no telemetry yet (the agent reports it while the instance runs)")
				}
				fmt.Fprintf(out, "cost so far %s, burning %s/h\n", in.CostSoFar, in.BurnRate)
				for _, h := range in.Hints {
					fmt.Fprintln(out, "hint: "+h)
				}
				if once {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(every):
				}
			}
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "print once and exit")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the instance with its telemetry as JSON, once")
	cmd.Flags().DurationVar(&every, "every", 2*time.Second, "refresh interval")
	return cmd
}
