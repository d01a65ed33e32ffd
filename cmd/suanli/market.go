package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
)

// rentalText states an instance's rental type and bid in words, so that no
// renter mistakes an interruptible rental for an on-demand one.
func rentalText(in *suanli.Instance) string {
	switch in.RentalType {
	case suanli.RentalInterruptible:
		return fmt.Sprintf("interruptible, bid %s/h (a higher bid or an on-demand rental preempts it, after its host's notice)", in.Bid.Decimal())
	case suanli.RentalReserved:
		until := "its reservation's end"
		if in.ReservedUntil != nil {
			until = in.ReservedUntil.Local().Format(time.DateOnly)
		}
		return "reserved until " + until + ", prepaid, no bid (never preempted by other renters)"
	}
	return "on-demand, no bid (never preempted by other renters)"
}

// printCreated writes one line per new instance, and what it waits for.
func printCreated(w io.Writer, in *suanli.Instance) {
	fmt.Fprintf(w, "instance %d created on machine %d: %s; %s/h compute + %s/h disk (%d GB)\n", in.ID, in.MachineID,
		rentalText(in), in.Rates.ComputePerHour.Decimal(), in.Rates.StoragePerHour(in.DiskGB).Decimal(), in.DiskGB)
	if in.Status == suanli.StatusScheduling && in.StatusMessage != "" {
		fmt.Fprintf(w, "  %s\n", in.StatusMessage)
	}
}

// parseSince reads "7d", "36h", "90m", a date or an RFC 3339 time as a
// moment before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d > 0 {
			return now.Add(-time.Duration(d) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, time.Local); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, suanli.FieldErrorf("since", "%q: write 7d, 36h, 2026-11-22 or an RFC 3339 time", s)
}

func newBidCmd(a *app) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "bid ID PRICE",
		Short: "Change an interruptible instance's bid (per hour for the whole instance)",
		Long: `Change the bid of an interruptible instance. Compute used so far is
settled at the old bid; the new bid applies from now. A higher bid can win
GPUs back (a preempted instance resumes by itself, preempting a lower bid);
a lower one can lose them to a waiting higher bid. The bid must be at least
the offer's minimum bid per GPU times the instance's GPUs.`,
		Example: `  suanli bid 12 0.35`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("instance", args[0])
			if err != nil {
				return err
			}
			bid, err := suanli.ParseMoney(args[1])
			if err != nil {
				return suanli.FieldErrorf("bid", "%v", err)
			}
			in, err := a.client().ChangeBid(cmd.Context(), id, bid)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, in)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "instance %d: %s; now %s\n", in.ID, rentalText(in), in.Status)
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the instance as JSON")
	return cmd
}

func newReserveCmd(a *app) *cobra.Command {
	var days int
	var cancel, jsonOut bool
	cmd := &cobra.Command{
		Use:   "reserve ID --days N",
		Short: "Prepay an on-demand instance for N days at its host's discount (--cancel ends it early)",
		Long: `Reserve an on-demand instance: prepay N days of its compute at its
locked hourly rate, less the discount its host gives for that commitment
(the host's schedule, e.g. 10% from 7 days, 25% from 30 days, capped by the
host's maximum). The prepayment is charged at once; compute is not metered
again until the reservation ends, then billing returns to the on-demand
rate. A reserved instance is never preempted. The disk is billed as before.

--cancel ends the reservation early: you get back the unused part of the
prepayment, minus the discount already received on the days used (they are
charged at the on-demand price) and minus the host's cancellation fee on the
unused part.`,
		Example: `  suanli reserve 12 --days 30
  suanli reserve 12 --cancel`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("instance", args[0])
			if err != nil {
				return err
			}
			c := a.client()
			var r *suanli.Reservation
			if cancel {
				r, err = c.CancelReservation(cmd.Context(), id)
			} else {
				if days <= 0 {
					return suanli.FieldErrorf("days", "give the commitment in days: --days 30")
				}
				r, err = c.ReserveInstance(cmd.Context(), id, days)
			}
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, r)
			}
			out := cmd.OutOrStdout()
			if cancel {
				fmt.Fprintf(out, "reservation %d of instance %d cancelled: %s refunded; the instance continues on-demand at %s/h\n",
					r.ID, r.InstanceID, r.Refund, r.HourlyPrice.Decimal())
				return nil
			}
			fmt.Fprintf(out, "instance %d reserved for %d days (until %s): prepaid %s = %s list − %s off; saves %s\n",
				r.InstanceID, r.Days, r.End.Local().Format(time.DateTime), r.Prepaid, r.ListPrice, pct(r.DiscountBP), r.ListPrice-r.Prepaid)
			fmt.Fprintf(out, "cancel early with `suanli reserve %d --cancel`: refund = unused part − discount received − host fee (%s of the unused part)\n",
				r.InstanceID, pct(r.CancelFeeBP))
			return nil
		},
	}
	cmd.Flags().IntVar(&days, "days", 0, "commitment in days (1 to 366)")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "cancel the instance's reservation early, with the refund its terms give")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the reservation as JSON")
	return cmd
}

func pct(bp int64) string {
	if bp%100 == 0 {
		return fmt.Sprintf("%d%%", bp/100)
	}
	return fmt.Sprintf("%d.%02d%%", bp/100, bp%100)
}

func newMarketCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "market", Short: "Market signals: price history per GPU model"}
	cmd.AddCommand(newMarketPricesCmd(a))
	return cmd
}

func newMarketPricesCmd(a *app) *cobra.Command {
	var since string
	var buckets int
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "prices QUERY",
		Short: "Price history of a GPU model: listed on-demand prices, winning bids, fill rate",
		Long: `Show a GPU model's market over a window: floor, median and 90th percentile
of listed on-demand prices and of winning bids (per GPU-hour), the fill rate
(rented GPUs / listed GPUs), and a small chart. The query names the model:
gpu_name=H100, or gpu_name in [H100,A100].`,
		Example: `  suanli market prices gpu_name=RTX_4090
  suanli market prices gpu_name=H100 --since 7d`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := suanli.PriceQuery{Query: strings.Join(args, " "), Buckets: buckets}
			var err error
			if q.Since, err = parseSince(since, time.Now()); err != nil {
				return err
			}
			st, err := a.client().MarketPrices(cmd.Context(), q)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, st)
			}
			writePrices(cmd.OutOrStdout(), st)
			return nil
		},
	}
	cmd.Flags().StringVar(&since, "since", "7d", "window start: 7d, 36h, a date or an RFC 3339 time")
	cmd.Flags().IntVar(&buckets, "buckets", 24, "points in the chart")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

// writePrices prints the summary and a chart of the series.
func writePrices(w io.Writer, st *suanli.PriceStats) {
	fmt.Fprintf(w, "%s, %s → %s\n", strings.Join(st.GPUNames, ", "), st.Since.Local().Format("2006-01-02 15:04"), st.Until.Local().Format("2006-01-02 15:04"))
	t := table(w)
	row := func(name string, s suanli.PriceSummary) {
		if s.Count == 0 {
			fmt.Fprintf(t, "%s\tno data\n", name)
			return
		}
		fmt.Fprintf(t, "%s\tfloor %s\tmedian %s\tp90 %s\t(%d points, per GPU-hour)\n", name, s.Floor, s.Median, s.P90, s.Count)
	}
	row("listed on-demand", st.Listed)
	row("winning bids", st.Bids)
	if st.FillRate >= 0 {
		fmt.Fprintf(t, "fill rate\t%.0f%%\t\t\t(rented / listed GPUs)\n", st.FillRate*100)
	} else {
		fmt.Fprintf(t, "fill rate\tno data\n")
	}
	t.Flush()
	if len(st.Series) == 0 {
		return
	}
	var lo, hi suanli.Money = -1, 0
	for _, b := range st.Series {
		for _, p := range []suanli.Money{b.Listed, b.Bid} {
			if p > 0 && (lo < 0 || p < lo) {
				lo = p
			}
			hi = max(hi, p)
		}
	}
	fmt.Fprintln(w)
	if st.Listed.Count > 0 {
		fmt.Fprintf(w, "listed    %s  %s … %s per GPU-hour\n", spark(st.Series, func(b suanli.PriceBucket) float64 { return float64(b.Listed) }, float64(lo), float64(hi)), lo, hi)
	}
	if st.Bids.Count > 0 {
		fmt.Fprintf(w, "bids      %s  %s … %s per GPU-hour\n", spark(st.Series, func(b suanli.PriceBucket) float64 { return float64(b.Bid) }, float64(lo), float64(hi)), lo, hi)
	}
	fmt.Fprintf(w, "fill      %s  0 … 100%%\n", spark(st.Series, func(b suanli.PriceBucket) float64 {
		if b.FillRate < 0 {
			return 0
		}
		return b.FillRate*100 + 1e-9
	}, 0, 100))
	var pre strings.Builder
	total := 0
	for _, b := range st.Series {
		total += b.Preempted
		switch {
		case b.Preempted == 0:
			pre.WriteRune('·')
		case b.Preempted < 10:
			pre.WriteString(strconv.Itoa(b.Preempted))
		default:
			pre.WriteRune('+')
		}
	}
	fmt.Fprintf(w, "preempted %s  %d in all\n", pre.String(), total)
}

var sparkRunes = []rune("▁▂▃▄▅▆▇█")

// spark draws one rune per bucket scaled to [lo, hi]; a bucket without
// data (value ≤ 0) is a space.
func spark(series []suanli.PriceBucket, val func(suanli.PriceBucket) float64, lo, hi float64) string {
	var b strings.Builder
	for _, s := range series {
		v := val(s)
		if v <= 0 {
			b.WriteRune(' ')
			continue
		}
		i := len(sparkRunes) - 1
		if hi > lo {
			i = int((v - lo) / (hi - lo) * float64(len(sparkRunes)-1))
		}
		b.WriteRune(sparkRunes[min(max(i, 0), len(sparkRunes)-1)])
	}
	return b.String()
}

// marketListingFlags adds the provider's market terms to `host list`.
func marketListingFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Int("preempt-grace", 0, "seconds an interruptible workload gets between SIGTERM and its stop when preempted (default 30, at most 120)")
	f.String("reserve-discount", "", "discount schedule for reservations, DAYS:PERCENT,…: e.g. 7:10,30:25,90:40 ('none' clears it)")
	f.String("reserve-max-discount", "", "cap on any reservation discount, in percent")
	f.String("reserve-cancel-fee", "", "fee kept on an early cancel, in percent of the unused part")
	f.String("green-discount", "", "percent off compute prices and the minimum bid for every renter while the machine's grid is green (0 to 50, e.g. 10%; needs --country of a green grid; 0 clears it)")
}

// applyMarketListingFlags reads marketListingFlags into u.
func applyMarketListingFlags(cmd *cobra.Command, u *suanli.ListingUpdate) error {
	f := cmd.Flags()
	if f.Changed("preempt-grace") {
		g, _ := f.GetInt("preempt-grace")
		u.PreemptGraceS = &g
	}
	if f.Changed("reserve-discount") {
		s, _ := f.GetString("reserve-discount")
		steps := []suanli.ReserveDiscount{}
		if s != "none" {
			for _, part := range strings.Split(s, ",") {
				d, p, ok := strings.Cut(strings.TrimSpace(part), ":")
				days, err := strconv.Atoi(d)
				bp, perr := percentBP(p)
				if !ok || err != nil || perr != nil {
					return suanli.FieldErrorf("reserve-discount", "%q: write DAYS:PERCENT, e.g. 30:25", part)
				}
				steps = append(steps, suanli.ReserveDiscount{MinDays: days, DiscountBP: bp})
			}
		}
		u.ReserveDiscounts = &steps
	}
	for name, dst := range map[string]**int64{"reserve-max-discount": &u.ReserveMaxDiscountBP, "reserve-cancel-fee": &u.ReserveCancelFeeBP,
		"green-discount": &u.GreenDiscountBP} {
		if !f.Changed(name) {
			continue
		}
		s, _ := f.GetString(name)
		bp, err := percentBP(s)
		if err != nil {
			return suanli.FieldErrorf(name, "%q: give a percentage such as 25 or 2.5", s)
		}
		*dst = &bp
	}
	return nil
}

// percentBP reads "25" or "2.5" (percent, two decimals at most) as basis points.
func percentBP(s string) (int64, error) {
	m, err := suanli.ParseMoney(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	if err != nil || m < 0 || m%10_000 != 0 {
		return 0, fmt.Errorf("%q is not a percentage", s)
	}
	return int64(m / 10_000), nil
}
