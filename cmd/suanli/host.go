package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
)

func newHostCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "host", Short: "Provide machines: list them with prices, see their state"}
	cmd.AddCommand(newHostMachinesCmd(a), newHostListCmd(a), newHostUnlistCmd(a), newJoinTokenCmd(a), newEarningsCmd(a), newPayoutCmd(a),
		newOfferWindowCmd(a), newHostWindowsCmd(a), newHostWindowRmCmd(a), newHostCalendarCmd(a))
	return cmd
}

func newHostMachinesCmd(a *app) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "machines",
		Short: "Your machines: hardware, status, last heartbeat, listing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ms, _, err := a.client().FindMachines(cmd.Context(), suanli.MachineFilter{})
			if err != nil {
				return err
			}
			if jsonOut {
				if ms == nil {
					ms = []*suanli.Machine{}
				}
				return a.printJSON(cmd, ms)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "ID\tHOST\tHARDWARE\tSTATUS\tLAST HEARTBEAT\tRUNTIME\tLISTING\tGPUS IN USE")
			for _, m := range ms {
				listing := "unlisted"
				if m.Listing.Listed {
					if m.IsGPU() {
						listing = fmt.Sprintf("%s/GPU-h, disk %s/GB-mo, min bid %s", m.Listing.PriceGPU.Decimal(), m.Listing.PriceDisk.Decimal(), m.Listing.MinBid.Decimal())
					} else {
						listing = fmt.Sprintf("%s/core-h + %s/GB-h RAM, disk %s/GB-mo", m.Listing.PriceCPU.Decimal(), m.Listing.PriceRAM.Decimal(), m.Listing.PriceDisk.Decimal())
					}
					if g := greenDiscountText(m); g != "" {
						listing += ", " + g
					}
				}
				fmt.Fprintf(t, "%d\t%s\t%s\t%s\t%s ago\t%s\t%s\t%d\n", m.ID, m.Hardware.Hostname, describeHW(m), m.Status,
					time.Since(m.LastHeartbeat).Round(time.Second), m.Runtime, listing, len(m.GPUsInUse))
			}
			return t.Flush()
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

// greenDiscountText describes a listing's green discount for its provider:
// "green discount 10% (renters pay $0.36/GPU-h)", or that it is not
// applied because the machine's grid is not green; "" when there is none.
func greenDiscountText(m *suanli.Machine) string {
	bp := m.Listing.GreenDiscountBP
	if bp == 0 {
		return ""
	}
	pct := fmt.Sprintf("green discount %s%%", strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%d.%02d", bp/100, bp%100), "0"), "."))
	g, ok := advisor.CarbonIntensity(m.Country)
	if !ok || !advisor.IsGreen(g.GPerKWh) {
		return pct + " (not applied: the machine's grid is not green)"
	}
	r := m.Listing.ForRenters(true)
	if m.IsGPU() {
		return fmt.Sprintf("%s (renters pay %s/GPU-h)", pct, r.PriceGPU.Decimal())
	}
	return fmt.Sprintf("%s (renters pay %s/core-h + %s/GB-h RAM)", pct, r.PriceCPU.Decimal(), r.PriceRAM.Decimal())
}

func moneyFlag(cmd *cobra.Command, name string, dst **suanli.Money) error {
	if !cmd.Flags().Changed(name) {
		return nil
	}
	s, _ := cmd.Flags().GetString(name)
	m, err := suanli.ParseMoney(s)
	if err != nil {
		return suanli.FieldErrorf(name, "%v", err)
	}
	if m < 0 {
		return suanli.FieldErrorf(name, "%s is negative: prices are zero or more", s)
	}
	*dst = &m
	return nil
}

func newHostListCmd(a *app) *cobra.Command {
	var endDate string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "list MACHINE",
		Short: "Put a machine on the market, or change its prices",
		Long: `List a machine with its prices. GPU machines are priced per GPU-hour
(--price-gpu); CPU-only machines per core-hour (--price-cpu) plus per GB-hour
of RAM (--price-ram). Disk is per GB-month, traffic per GB. Prices are
locked into each rental when it is created: changes apply to new rentals.`,
		Example: `  suanli host list 1 --price-gpu 0.40 --price-disk 0.10 --price-inet 0.01 --min-bid 0.20
  suanli host list 2 --price-cpu 0.02 --price-ram 0.005 --end-date 2027-06-30
  suanli host list 3 --country NO --green-discount 10%`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("machine", args[0])
			if err != nil {
				return err
			}
			var u suanli.ListingUpdate
			for name, dst := range map[string]**suanli.Money{"price-gpu": &u.PriceGPU, "price-cpu": &u.PriceCPU, "price-ram": &u.PriceRAM,
				"price-disk": &u.PriceDisk, "price-inet-up": &u.PriceInetUp, "price-inet-down": &u.PriceInetDown, "min-bid": &u.MinBid} {
				if err := moneyFlag(cmd, name, dst); err != nil {
					return err
				}
			}
			var inet *suanli.Money
			if err := moneyFlag(cmd, "price-inet", &inet); err != nil {
				return err
			}
			if inet != nil {
				if u.PriceInetUp == nil {
					u.PriceInetUp = inet
				}
				if u.PriceInetDown == nil {
					u.PriceInetDown = inet
				}
			}
			if endDate != "" {
				t, err := time.Parse(time.DateOnly, endDate)
				if err != nil {
					if t, err = time.Parse(time.RFC3339, endDate); err != nil {
						return suanli.FieldErrorf("end-date", "%q: write 2027-06-30 or an RFC 3339 time", endDate)
					}
				}
				u.EndDate = &t
			}
			if cmd.Flags().Changed("country") {
				c, _ := cmd.Flags().GetString("country")
				u.Country = &c
			}
			if err := applyMarketListingFlags(cmd, &u); err != nil {
				return err
			}
			m, err := a.client().ListMachine(cmd.Context(), id, u)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, m)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "machine %d listed: %s\n", m.ID, describeHW(m))
			if g := greenDiscountText(m); g != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "  %s\n", g)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.String("price-gpu", "", "$ per GPU-hour (GPU machines)")
	f.String("price-cpu", "", "$ per core-hour (CPU-only machines)")
	f.String("price-ram", "", "$ per GB-hour of RAM (CPU-only machines)")
	f.String("price-disk", "", "$ per GB-month of disk")
	f.String("price-inet", "", "$ per GB of traffic, both directions")
	f.String("price-inet-up", "", "$ per GB sent by instances")
	f.String("price-inet-down", "", "$ per GB received by instances")
	f.String("min-bid", "", "minimum interruptible bid, $ per GPU-hour (per core-hour on CPU machines)")
	f.String("country", "", "ISO country code where the machine is, e.g. DE")
	f.StringVar(&endDate, "end-date", "", "the listing ends at this date (rentals cannot outlast it)")
	f.BoolVar(&jsonOut, "json", false, "print the machine as JSON")
	marketListingFlags(cmd)
	return cmd
}

func newHostUnlistCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "unlist MACHINE",
		Short: "Take a machine off the market (running rentals continue)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("machine", args[0])
			if err != nil {
				return err
			}
			m, err := a.client().UnlistMachine(cmd.Context(), id)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "machine %d unlisted\n", m.ID)
			return nil
		},
	}
}

func newJoinTokenCmd(a *app) *cobra.Command {
	var ttl time.Duration
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "join-token",
		Short: "Print a one-time token to register a machine with `suanli agent`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			t, err := c.CreateJoinToken(cmd.Context(), ttl)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, t)
			}
			pin := ""
			if fp := a.pinnedCAFingerprint(); fp != "" {
				pin = " --ca-fingerprint " + fp
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n\nOn the machine, run (valid until %s):\n  suanli agent --server %s --join-token %s%s\n",
				t.Token, t.ExpiresAt.Local().Format(time.DateTime), c.BaseURL, t.Token, pin)
			return nil
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token is valid (at most 7 days)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}
