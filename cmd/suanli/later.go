package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
)

// createLater handles create --deadline (a deferred job) and create
// --schedule (a recurring rental). Here maxPrice (--max-price) is per
// GPU-hour, the unit windows are priced in; a plain create reads the same
// flag per instance-hour (guardFlags.apply).
func createLater(cmd *cobra.Command, a *app, query, deadline, schedule string, hours int, c suanli.InstanceCreate, maxPrice string, jsonOut bool) error {
	if hours <= 0 {
		return suanli.FieldErrorf("hours", "give how long the job runs: --hours 6")
	}
	if c.Image == "" {
		return suanli.FieldErrorf("image", "name the image the job runs (--image)")
	}
	gpus := c.GPUCount
	if gpus == 0 {
		gpus = 1
	}
	var max suanli.Money
	if maxPrice != "" {
		m, err := suanli.ParseMoney(maxPrice)
		if err != nil || m <= 0 {
			return suanli.FieldErrorf("max-price", "%q: give a price per GPU-hour like 0.80", maxPrice)
		}
		max = m
	}
	out := cmd.OutOrStdout()
	if schedule != "" {
		sc, err := a.client().CreateSchedule(cmd.Context(), suanli.Schedule{Cron: schedule, Query: query, GPUs: gpus, Hours: hours,
			MaxPrice: max, Image: c.Image, Cmd: c.Cmd})
		if err != nil {
			return err
		}
		if jsonOut {
			return a.printJSON(cmd, sc)
		}
		fmt.Fprintf(out, "schedule %d: %q, %d× GPU for %d h each run, next run %s; runs are booked a day ahead (suanli bookings)\n",
			sc.ID, sc.Cron, sc.GPUs, sc.Hours, sc.NextRun.Local().Format(time.DateTime))
		if sc.LastError != "" {
			fmt.Fprintln(out, "note: "+sc.LastError)
		}
		return nil
	}
	var dl time.Time
	if d, err := suanli.ParseDuration(deadline); err == nil && d > 0 {
		dl = time.Now().Add(d)
	} else if t, err := time.Parse(time.RFC3339, deadline); err == nil {
		dl = t
	} else {
		return suanli.FieldErrorf("deadline", "%q: give a span like 48h or 2d, or a time like 2026-12-05T18:00Z", deadline)
	}
	plan, err := a.client().CreateDeferred(cmd.Context(), suanli.DeferredCreate{Query: query, GPUs: gpus, Hours: hours, Deadline: dl,
		MaxPrice: max, Image: c.Image, Cmd: c.Cmd})
	if err != nil {
		return err
	}
	if jsonOut {
		return a.printJSON(cmd, plan)
	}
	fmt.Fprintln(out, plan.Explanation)
	if plan.Booking != nil {
		fmt.Fprintf(out, "booking %d: starts %s, %s held in escrow (suanli bookings show %d)\n", plan.Booking.ID,
			plan.Booking.Start.Local().Format(time.DateTime), plan.Booking.Cost, plan.Booking.ID)
	} else if plan.Instance != nil {
		fmt.Fprintf(out, "instance %d (suanli show %d)\n", plan.Instance.ID, plan.Instance.ID)
	}
	return nil
}

func newSchedulesCmd(a *app) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "Recurring rentals (create --schedule): list them; rm stops one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			scs, err := a.client().FindSchedules(cmd.Context())
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, scs)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "ID\tSCHEDULE (UTC)\tGPUS\tHOURS\tQUERY\tNEXT RUN\tNOTE")
			for _, sc := range scs {
				fmt.Fprintf(t, "%d\t%s\t%d\t%d\t%s\t%s\t%s\n", sc.ID, sc.Cron, sc.GPUs, sc.Hours, sc.Query, sc.NextRun.Local().Format(time.DateTime), sc.LastError)
			}
			return t.Flush()
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	cmd.AddCommand(&cobra.Command{
		Use:   "rm ID",
		Short: "Stop a recurring rental (runs already booked stand: suanli bookings cancel)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("schedule", args[0])
			if err != nil {
				return err
			}
			if err := a.client().CancelSchedule(cmd.Context(), id); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %d stopped\n", id)
			return nil
		},
	})
	return cmd
}
