package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
)

// parseWhen reads a time for the forward-market flags: RFC 3339 (seconds
// optional), or "+DURATION" from now (+90s, +2h).
func parseWhen(flag, v string, now time.Time) (time.Time, error) {
	if d, ok := strings.CutPrefix(v, "+"); ok {
		dur, err := time.ParseDuration(d)
		if err != nil {
			return time.Time{}, suanli.FieldErrorf(flag, "%q: give +DURATION (+2h) or an RFC 3339 time", v)
		}
		return now.Add(dur).UTC(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, suanli.FieldErrorf(flag, "%q: give an RFC 3339 time (2026-12-01T00:00Z) or +DURATION (+2h)", v)
}

func idArg(what, v string) (int64, error) {
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, suanli.FieldErrorf(what, "%q is not an id", v)
	}
	return id, nil
}

func newOfferWindowCmd(a *app) *cobra.Command {
	var gpus int
	var start, end, price, minBid, cancelBefore string
	var acceptBids, jsonOut bool
	var cancelFee int64
	cmd := &cobra.Command{
		Use:   "offer-window MACHINE --gpus N --start TIME --end TIME (--price P | --accept-bids --min-bid P)",
		Short: "Publish future capacity on a machine: renters book it at a price locked today",
		Long: `Publish a window of future capacity: GPUs of one machine from --start to --end,
at --price per GPU-hour, or open to bids at or above --min-bid. A renter who
cancels a booking up to --cancel-before its start gets everything back; after
that, --cancel-fee-bp of its cost is yours. Times are RFC 3339 or +DURATION.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := idArg("machine", args[0])
			if err != nil {
				return err
			}
			now := time.Now()
			c := suanli.WindowCreate{MachineID: id, GPUs: gpus, AcceptBids: acceptBids, CancelFeeBP: cancelFee}
			if c.Start, err = parseWhen("start", start, now); err != nil {
				return err
			}
			if c.End, err = parseWhen("end", end, now); err != nil {
				return err
			}
			if price != "" {
				if c.PriceGPU, err = suanli.ParseMoney(price); err != nil {
					return suanli.FieldErrorf("price", "%v", err)
				}
			}
			if minBid != "" {
				if c.MinBid, err = suanli.ParseMoney(minBid); err != nil {
					return suanli.FieldErrorf("min-bid", "%v", err)
				}
			}
			if cancelBefore != "" {
				if c.CancelBefore, err = time.ParseDuration(cancelBefore); err != nil {
					return suanli.FieldErrorf("cancel-before", "%q: give a duration (24h)", cancelBefore)
				}
			}
			w, err := a.client().CreateWindow(cmd.Context(), c)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, w)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "window %d: %d GPUs of machine %d from %s to %s at %s\n", w.ID, w.GPUs, w.MachineID,
				w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), windowPrice(w))
			return nil
		},
	}
	cmd.Flags().IntVar(&gpus, "gpus", 1, "GPUs offered")
	cmd.Flags().StringVar(&start, "start", "", "start (RFC 3339 or +DURATION)")
	cmd.Flags().StringVar(&end, "end", "", "end (RFC 3339 or +DURATION)")
	cmd.Flags().StringVar(&price, "price", "", "price per GPU-hour")
	cmd.Flags().BoolVar(&acceptBids, "accept-bids", false, "take bids per GPU-hour instead of a fixed price")
	cmd.Flags().StringVar(&minBid, "min-bid", "", "the lowest bid per GPU-hour (with --accept-bids)")
	cmd.Flags().StringVar(&cancelBefore, "cancel-before", "24h", "free cancellation up to this long before a booking's start")
	cmd.Flags().Int64Var(&cancelFee, "cancel-fee-bp", 0, "fee after the deadline, in basis points of the booking's cost (2500 = 25%)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func windowPrice(w *suanli.Window) string {
	if w.AcceptBids {
		return "bids from " + w.MinBid.Decimal() + "/GPU-h"
	}
	return w.PriceGPU.Decimal() + "/GPU-h"
}

func printWindows(a *app, cmd *cobra.Command, ws []*suanli.Window, jsonOut bool) error {
	if jsonOut {
		return a.printJSON(cmd, ws)
	}
	t := table(cmd.OutOrStdout())
	fmt.Fprintln(t, "ID\tMACHINE\tGPU\tGPUS\tFREE\tSTART\tEND\tHOURS\tPRICE\tFREE CANCEL UNTIL\tFEE AFTER\tSTATUS")
	for _, w := range ws {
		fmt.Fprintf(t, "%d\t%d\t%s\t%d\t%d\t%s\t%s\t%d\t%s\t%s before\t%s\t%s\n", w.ID, w.MachineID, w.GPUName, w.GPUs, w.FreeGPUs,
			w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), w.Hours(), windowPrice(w), w.CancelBefore, bpString(w.CancelFeeBP), w.Status)
	}
	return t.Flush()
}

func bpString(v int64) string { return fmt.Sprintf("%d.%02d%%", v/100, v%100) }

func newHostWindowsCmd(a *app) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "windows [MACHINE]",
		Short: "Your published windows that have not ended",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var id int64
			if len(args) == 1 {
				var err error
				if id, err = idArg("machine", args[0]); err != nil {
					return err
				}
			}
			ws, err := a.client().HostWindows(cmd.Context(), id)
			if err != nil {
				return err
			}
			return printWindows(a, cmd, ws, jsonOut)
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func newHostWindowRmCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "window-rm WINDOW",
		Short: "Withdraw a window: no more bookings; those made stand",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := idArg("window", args[0])
			if err != nil {
				return err
			}
			w, err := a.client().WithdrawWindow(cmd.Context(), id)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "window %d withdrawn\n", w.ID)
			return nil
		},
	}
}

func newHostCalendarCmd(a *app) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "calendar MACHINE",
		Short: "A machine's windows, bookings and open-ended rentals from now on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := idArg("machine", args[0])
			if err != nil {
				return err
			}
			es, err := a.client().MachineCalendar(cmd.Context(), id)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, es)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "START\tEND\tKIND\tID\tGPUS\tPRICE/GPU-H\tSTATUS\tRENTER")
			for _, e := range es {
				end := "open-ended"
				if !e.End.IsZero() {
					end = e.End.Format(time.RFC3339)
				}
				renter := "-"
				if e.AccountID != 0 {
					renter = strconv.FormatInt(e.AccountID, 10)
				}
				fmt.Fprintf(t, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", e.Start.Format(time.RFC3339), end, e.Kind, e.ID, e.GPUs, e.Price.Decimal(), e.Status, renter)
			}
			return t.Flush()
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func newWindowsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "windows", Short: "Future capacity you can book at a price locked today"}
	var jsonOut bool
	var limit int
	search := &cobra.Command{
		Use:   "search [QUERY]",
		Short: "Open windows with free GPUs: the offer query plus start, end and hours",
		Long: `Search open windows. The query is the offer query language (gpu_name=H100
num_gpus>=2 region=eu) for the machine, plus start, end (RFC 3339) and hours
for the window: 'gpu_name=H100 start>=2026-12-01T00:00Z hours>=8'.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := suanli.WindowSearch{Limit: limit}
			if len(args) == 1 {
				q.Query = args[0]
			}
			ws, err := a.client().SearchWindows(cmd.Context(), q)
			if err != nil {
				return err
			}
			return printWindows(a, cmd, ws, jsonOut)
		},
	}
	search.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	search.Flags().IntVar(&limit, "limit", 50, "at most this many windows")
	cmd.AddCommand(search)
	return cmd
}

func newBookCmd(a *app) *cobra.Command {
	var start, bid, image, duration string
	var hours, gpus int
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "book WINDOW_OR_QUERY [--start TIME] [--hours N] [--gpus N] --image IMAGE [-- CMD...]",
		Short: "Book future capacity: the price is locked now and the cost held in escrow",
		Long: `Book part of a window. The price is locked now; the cost moves from your
balance to escrow (a hold, not a charge). At the start the instance launches by
itself on the booked GPUs; at the end it stops and the provider is paid the
locked price. Cancel with 'suanli bookings cancel ID': free up to the
provider's deadline, its fee after.

Give a window id (from 'suanli windows search'), or a window query — the same
language 'suanli windows search' takes: the offer query for the machine plus
start, end and hours for the window. A query books the cheapest open window
that matches and holds the booking: the lowest price per GPU-hour (a window
that takes bids at --bid, or at its floor), then the earliest start, then the
lowest window id; 'suanli bookings show ID' says which and why. When the
window chosen is taken by someone else while booking, nothing is booked and
the command fails with a conflict: run it again.`,
		Example: `  # a window by id, 2 GPUs for 8 hours from its start
  suanli book 12 --hours 8 --gpus 2 --image pytorch/pytorch -- python train.py

  # the cheapest RTX 4090 window of at least 8 hours from December 1st
  suanli book 'gpu_name=RTX_4090 start>=2026-12-01T00:00Z hours>=8' --hours 8 --gpus 1 --image ubuntu:24.04

  # the same, starting at a set time inside the window, as JSON
  suanli book 'gpu_name=H100 num_gpus>=8' --start 2026-12-02T02:00Z --hours 6 --image busybox --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// An argument of digits is a window id; anything else a query.
			c := suanli.BookingCreate{Hours: hours, GPUs: gpus, Image: image, Cmd: args[1:]}
			var err error
			if strings.Trim(args[0], "0123456789") == "" {
				if c.WindowID, err = idArg("window", args[0]); err != nil {
					return err
				}
			} else {
				c.Query = args[0]
			}
			if start != "" {
				if c.Start, err = parseWhen("start", start, time.Now()); err != nil {
					return err
				}
			}
			if duration != "" {
				if c.Duration, err = time.ParseDuration(duration); err != nil {
					return suanli.FieldErrorf("duration", "%q: give a duration (90m)", duration)
				}
			}
			if bid != "" {
				if c.Bid, err = suanli.ParseMoney(bid); err != nil {
					return suanli.FieldErrorf("bid", "%v", err)
				}
			}
			b, err := a.client().CreateBooking(cmd.Context(), c)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, b)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "booking %d: %d GPUs on machine %d (window %d) from %s to %s at %s/GPU-h; %s held in escrow; free cancel until %s\n",
				b.ID, b.GPUs, b.MachineID, b.WindowID, b.Start.Format(time.RFC3339), b.End.Format(time.RFC3339), b.PriceGPU.Decimal(), b.Cost.Decimal(),
				b.CancelDeadline.Format(time.RFC3339))
			if b.Note != "" {
				fmt.Fprintln(cmd.OutOrStdout(), b.Note)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&start, "start", "", "start (RFC 3339 or +DURATION; default: the window's start)")
	cmd.Flags().IntVar(&hours, "hours", 0, "hours to book (default: to the window's end)")
	cmd.Flags().StringVar(&duration, "duration", "", "length as a duration instead of --hours (90m)")
	cmd.Flags().IntVar(&gpus, "gpus", 0, "GPUs (default: all free in the window)")
	cmd.Flags().StringVar(&bid, "bid", "", "bid per GPU-hour, for a window that takes bids (with a query, also the most a fixed-price window may cost)")
	cmd.Flags().StringVar(&image, "image", "", "image the booking runs")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func newBookingsCmd(a *app) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "bookings",
		Short: "Your bookings of future capacity",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			bs, err := a.client().FindBookings(cmd.Context())
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, bs)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "ID\tWINDOW\tMACHINE\tGPUS\tSTART\tEND\tPRICE/GPU-H\tCOST\tSTATUS\tINSTANCE\tPAID\tREFUND")
			for _, b := range bs {
				fmt.Fprintf(t, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", b.ID, b.WindowID, b.MachineID, b.GPUs, b.Start.Format(time.RFC3339),
					b.End.Format(time.RFC3339), b.PriceGPU.Decimal(), b.Cost.Decimal(), b.Status, b.InstanceID, b.Paid.Decimal(), b.Refund.Decimal())
			}
			return t.Flush()
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	cancel := &cobra.Command{
		Use:   "cancel BOOKING",
		Short: "Cancel a booking before its start: full refund up to the deadline, the provider's fee after",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := idArg("booking", args[0])
			if err != nil {
				return err
			}
			b, err := a.client().CancelBooking(cmd.Context(), id)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "booking %d cancelled: %s refunded, %s fee\n", b.ID, b.Refund.Decimal(), b.Paid.Decimal())
			return nil
		},
	}
	var showJSON bool
	show := &cobra.Command{
		Use:   "show BOOKING",
		Short: "One booking: its window, price, escrow, status and why it was booked",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := idArg("booking", args[0])
			if err != nil {
				return err
			}
			b, err := a.client().FindBookingByID(cmd.Context(), id)
			if err != nil {
				return err
			}
			if showJSON {
				return a.printJSON(cmd, b)
			}
			return printBooking(cmd, b)
		},
	}
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON")
	cmd.AddCommand(cancel, show)
	return cmd
}

// printBooking prints one booking as key/value lines, its note (why it was
// booked this way) included.
func printBooking(cmd *cobra.Command, b *suanli.Booking) error {
	t := table(cmd.OutOrStdout())
	row := func(k, v string) { fmt.Fprintf(t, "%s\t%s\n", k, v) }
	row("booking", strconv.FormatInt(b.ID, 10))
	status := b.Status
	if b.Message != "" {
		status += " — " + b.Message
	}
	row("status", status)
	row("window", fmt.Sprintf("%d on machine %d", b.WindowID, b.MachineID))
	row("gpus", strconv.Itoa(b.GPUs))
	row("time", fmt.Sprintf("%s to %s (%s)", b.Start.Format(time.RFC3339), b.End.Format(time.RFC3339), b.End.Sub(b.Start)))
	row("price", b.PriceGPU.Decimal()+"/GPU-h, locked")
	row("cost", b.Cost.Decimal()+" held in escrow")
	row("free cancel until", fmt.Sprintf("%s (%s fee after)", b.CancelDeadline.Format(time.RFC3339), bpString(b.CancelFeeBP)))
	if b.InstanceID != 0 {
		row("instance", fmt.Sprintf("%d (suanli show %d)", b.InstanceID, b.InstanceID))
	}
	if b.Paid != 0 || b.Refund != 0 {
		row("settled", fmt.Sprintf("%s paid, %s refunded", b.Paid.Decimal(), b.Refund.Decimal()))
	}
	if b.ScheduleID != 0 {
		row("schedule", strconv.FormatInt(b.ScheduleID, 10))
	}
	row("image", b.Image)
	if len(b.Cmd) > 0 {
		row("command", strings.Join(b.Cmd, " "))
	}
	if b.Note != "" {
		row("why", b.Note)
	}
	return t.Flush()
}
