package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func newClusterCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "The server replicas sharing one database (operators)"}
	var jsonOut bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Which replica runs the singleton loops, its lease term, the change feed's lag, the latest closes",
		Long: `Ask the server (whichever replica answers: pass --server to pick one) for
its view of the replicas sharing its database. The singleton loops (hour
close, host leases, reservations, bookings, schedules, budgets, audit
checkpoints) run on the replica holding the singleton lease; every other
request is served by any replica. When the holder dies another takes the
lease within --lease-ttl, with the next term; each hour close records the
term that made it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.client().Cluster(cmd.Context())
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, st)
			}
			out := cmd.OutOrStdout()
			role := "follower"
			if st.Leader {
				role = "leader since " + st.LeaderSince.Local().Format(time.DateTime)
			}
			fmt.Fprintf(out, "replica:      %s (%s)\n", st.Replica, role)
			l := st.Lease
			state := "expires " + l.ExpiresAt.Local().Format("15:04:05.000")
			if l.Holder == "" {
				state = "never taken"
			} else if !time.Now().Before(l.ExpiresAt) {
				state = "free (expired or released)"
			}
			fmt.Fprintf(out, "lease:        %s held by %s, term %d, %s (ttl %gs)\n", l.Name, orDash(l.Holder), l.Term, state, l.TTL)
			fmt.Fprintf(out, "change feed:  seq %d, lag %.1f ms, %d read, %d holes awaited\n", st.Feed.Seq, st.Feed.LagMS, st.Feed.Seen, st.Feed.Holes)
			if n := len(st.Closes); n > 0 {
				c := st.Closes[n-1]
				fmt.Fprintf(out, "latest close: %d through %s by term %d (%d meters, %s)\n", c.ID, c.Through.Local().Format(time.DateTime), c.Term, c.Meters, c.Amount)
			}
			return nil
		},
	}
	status.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	cmd.AddCommand(status)
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
