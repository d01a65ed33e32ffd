package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
)

// guardFlags are the ghost-spend guard flags shared by create and quote.
type guardFlags struct {
	restart, recover    string
	maxRestarts         int
	maxPrice            string
	ttl, idle           string
	windows             []string
	destroyAfterStopped int
	tags                []string
	project             string
}

func (g *guardFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&g.ttl, "ttl", "", "stop the instance this long after it starts running (e.g. 8h, 2d)")
	f.StringVar(&g.idle, "idle-stop", "", fmt.Sprintf("stop after this long idle, CPU and GPU under %d%% (default %dm; 'off' disables)", suanli.DefaultIdlePercent, suanli.DefaultIdleStopMinutes))
	f.StringArrayVar(&g.windows, "stop-window", nil, `stop during a recurring UTC window, e.g. "Mon-Fri 22:00-06:00" or "Sat-Sun" (repeatable)`)
	f.IntVar(&g.destroyAfterStopped, "destroy-after-stopped", 0, "destroy the instance (and its data) after this many days stopped (opt-in)")
	f.StringArrayVar(&g.tags, "tag", nil, "a cost tag KEY=VALUE (repeatable), for budgets and reports")
	f.StringVar(&g.project, "project", "", "the project this instance's cost belongs to")
	f.StringVar(&g.restart, "restart", "", "managed job: restart the workload when it ends: on-failure (non-zero exit) or always")
	f.IntVar(&g.maxRestarts, "max-restarts", suanli.DefaultMaxRestarts, "at most this many restarts after exits (0: none; host losses and preemptions do not count)")
	f.StringVar(&g.recover, "recover", "", "elsewhere: when the host is lost or the job preempted, relaunch it on another matching offer")
	f.StringVar(&g.maxPrice, "max-price", "", "the most compute may cost per instance-hour (the whole instance, all its GPUs): bounds the offers --query picks and any relaunch elsewhere (relaunches default to 1.5 × the current rate). With create --deadline or --schedule it is per GPU-hour instead: the most a window or offer may cost for each GPU")
	cmd.RegisterFlagCompletionFunc("restart", cobra.FixedCompletions([]string{"on-failure", "always", "never"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("recover", cobra.FixedCompletions([]string{"elsewhere"}, cobra.ShellCompDirectiveNoFileComp))
}

func (g *guardFlags) apply(c *suanli.InstanceCreate) error {
	c.Restart = suanli.RestartPolicy{Policy: g.restart, Recover: g.recover}
	if g.restart != "" {
		n := g.maxRestarts
		c.Restart.MaxRestarts = &n
	}
	if g.maxPrice != "" {
		m, err := suanli.ParseMoney(g.maxPrice)
		if err != nil || m <= 0 {
			return suanli.FieldErrorf("max-price", "%q: give a price per hour like 1.20", g.maxPrice)
		}
		c.Restart.MaxPrice = m
	}
	if g.ttl != "" {
		d, err := suanli.ParseDuration(g.ttl)
		if err != nil || d <= 0 {
			return suanli.FieldErrorf("ttl", "%q: give a positive duration like 8h", g.ttl)
		}
		c.Guards.MaxRuntime = suanli.Duration(d)
	}
	switch g.idle {
	case "":
	case "off", "0":
		c.Guards.IdleStopMinutes = -1
	default:
		d, err := suanli.ParseDuration(g.idle)
		if err != nil || d < time.Minute {
			return suanli.FieldErrorf("idle-stop", "%q: give a duration of at least 1m (e.g. 30m), or off", g.idle)
		}
		c.Guards.IdleStopMinutes = int(d / time.Minute)
	}
	c.Guards.StopWindows = g.windows
	c.Guards.DestroyAfterStoppedDays = g.destroyAfterStopped
	c.Project = g.project
	tags, err := parseTags(g.tags)
	c.Tags = tags
	return err
}

// parseTags reads repeated --tag KEY=VALUE flags; nil when there are none.
func parseTags(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	tags := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, suanli.FieldErrorf("tag", "%q: write KEY=VALUE", kv)
		}
		tags[k] = v
	}
	return tags, nil
}

// formatTags writes cost tags as sorted KEY=VALUE words.
func formatTags(tags map[string]string) string {
	kv := make([]string, 0, len(tags))
	for k, v := range tags {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	return strings.Join(kv, " ")
}

func describeGuards(g suanli.Guards) string {
	e := g.Effective()
	var parts []string
	if e.IdleStopMinutes > 0 {
		parts = append(parts, fmt.Sprintf("idle auto-stop after %dm under %d%%", e.IdleStopMinutes, e.IdlePercent))
	} else {
		parts = append(parts, "idle auto-stop off")
	}
	if g.MaxRuntime > 0 {
		parts = append(parts, "max runtime "+time.Duration(g.MaxRuntime).String())
	} else {
		parts = append(parts, "no max runtime (--ttl)")
	}
	for _, w := range g.StopWindows {
		parts = append(parts, "stop window "+w+" UTC")
	}
	if g.DestroyAfterStoppedDays > 0 {
		parts = append(parts, fmt.Sprintf("destroy after %d days stopped", g.DestroyAfterStoppedDays))
	}
	return strings.Join(parts, "; ")
}

func printQuote(w io.Writer, q *suanli.Quote, hours float64) {
	t := table(w)
	fmt.Fprintf(t, "ITEM\tQUANTITY\tRATE\tAMOUNT\n")
	for _, l := range q.Lines {
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", l.Item, l.Quantity, l.Rate, l.Amount)
	}
	t.Flush()
	fmt.Fprintf(w, "\ntotal for %g h: %s   (%s/h running; %s/day while stopped)\n", hours, q.Total, q.PerHour, q.StoppedPerDay)
	for _, c := range q.Checks {
		fmt.Fprintln(w, "  ok   "+c)
	}
	for _, c := range q.Warnings {
		fmt.Fprintln(w, "  warn "+c)
	}
}

func newQuoteCmd(a *app) *cobra.Command {
	var q suanli.QuoteRequest
	var bid string
	var jsonOut bool
	var g guardFlags
	cmd := &cobra.Command{
		Use:   "quote OFFER [--hours H] [--disk GB] [--egress-gb GB]",
		Short: "Itemize what renting an offer would cost, before spending anything",
		Long: `Quote a rental: compute for the hours you expect, storage while running
and what the disk costs per day while stopped, traffic, and the platform fee
inside the price. The pre-flight checks of 'create' run too (capacity,
balance, budgets); nothing is reserved or billed.`,
		Example: "  suanli quote 3 --hours 10 --disk 50 --egress-gb 100\n  suanli quote 3 --gpus 1 --bid 0.25 --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q.DiskGiven = cmd.Flags().Changed("disk")
			id, err := parseID("offer", args[0])
			if err != nil {
				return err
			}
			q.OfferID = id
			if bid != "" {
				m, err := suanli.ParseMoney(bid)
				if err != nil {
					return suanli.FieldErrorf("bid", "%v", err)
				}
				q.Bid = &m
			}
			if err := g.apply(&q.InstanceCreate); err != nil {
				return err
			}
			out, err := a.client().Quote(cmd.Context(), q)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, out)
			}
			printQuote(cmd.OutOrStdout(), out, q.Hours)
			return nil
		},
	}
	f := cmd.Flags()
	f.Float64Var(&q.Hours, "hours", 1, "expected running hours")
	f.Int64Var(&q.DiskGB, "disk", 0, fmt.Sprintf("disk GB (default: the template's, else %d)", suanli.DefaultDiskGB))
	f.IntVar(&q.GPUCount, "gpus", 0, "GPUs (default: every free GPU of the offer)")
	f.IntVar(&q.CPUCores, "cpus", 0, "CPU cores on a CPU-only offer")
	f.Float64Var(&q.EgressGB, "egress-gb", 0, "expected GB sent")
	f.Float64Var(&q.IngressGB, "ingress-gb", 0, "expected GB received")
	f.StringVar(&bid, "bid", "", "quote an interruptible rental at this bid per hour")
	f.BoolVar(&jsonOut, "json", false, "print JSON")
	g.register(cmd)
	return cmd
}

func newBudgetCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "budget", Short: "Budgets with alerts at 50/80/100% and an optional hard stop"}
	var b suanli.Budget
	var amount, thresholds, start, end string
	set := &cobra.Command{
		Use:   "set NAME --amount 50",
		Short: "Create or change a budget",
		Long: `Set a budget on your account, a project or a tag, per calendar month
(UTC) or over a custom period. Alerts fire once per threshold per period,
in 'suanli budget alerts', the console, and the webhook (POST, JSON, signed:
X-Suanli-Signature: sha256=HMAC-SHA256(secret, body)). At 100% the action
applies: alert only, block new rentals, or stop running instances (their
disks are kept) and block new ones.`,
		Example: `  suanli budget set monthly --amount 200
  suanli budget set ml --scope project:ml --amount 50 --action stop --webhook https://hooks.example/x --webhook-secret s3cret
  suanli budget set sprint --scope tag:team=vision --amount 30 --period custom --start 2026-12-01 --end 2026-12-15`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b.Name = args[0]
			m, err := suanli.ParseMoney(amount)
			if err != nil {
				return suanli.FieldErrorf("amount", "%v", err)
			}
			b.Amount = m
			b.Thresholds = nil
			if thresholds != "" {
				for _, p := range strings.Split(thresholds, ",") {
					n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(p), "%"))
					if err != nil {
						return suanli.FieldErrorf("thresholds", "%q: give percentages like 50,80,100", thresholds)
					}
					b.Thresholds = append(b.Thresholds, n)
				}
			}
			for _, x := range []struct {
				s   string
				dst **time.Time
			}{{start, &b.Start}, {end, &b.End}} {
				if x.s == "" {
					continue
				}
				t, err := time.Parse(time.DateOnly, x.s)
				if err != nil {
					return suanli.FieldErrorf("start", "%q: write YYYY-MM-DD", x.s)
				}
				*x.dst = &t
			}
			out, err := a.client().SetBudget(cmd.Context(), b)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "budget %q: %s of %s spent (%d%%), forecast %s, action at 100%%: %s\n", out.Name, out.Spent, out.Amount, out.Percent, out.Forecast, out.Action)
			return nil
		},
	}
	sf := set.Flags()
	sf.StringVar(&amount, "amount", "", "the budget, in dollars (required)")
	sf.StringVar(&b.Scope, "scope", "account", "account, project:NAME or tag:KEY=VALUE")
	sf.StringVar(&b.Period, "period", "monthly", "monthly or custom (with --start and --end)")
	sf.StringVar(&start, "start", "", "custom period start, YYYY-MM-DD (UTC)")
	sf.StringVar(&end, "end", "", "custom period end, YYYY-MM-DD (UTC)")
	sf.StringVar(&thresholds, "thresholds", "50,80,100", "alert thresholds in percent")
	sf.StringVar(&b.Action, "action", "alert", "at 100%: alert, block (new rentals) or stop (running instances too)")
	sf.StringVar(&b.WebhookURL, "webhook", "", "URL that receives alerts as signed JSON POSTs")
	sf.StringVar(&b.WebhookSecret, "webhook-secret", "", "secret for the webhook's HMAC-SHA256 signature")
	set.MarkFlagRequired("amount")
	set.RegisterFlagCompletionFunc("action", cobra.FixedCompletions([]string{"alert", "block", "stop"}, cobra.ShellCompDirectiveNoFileComp))

	var lsJSON bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "Budgets: spend, percent, forecast at period end",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			bs, err := a.client().FindBudgets(cmd.Context())
			if err != nil {
				return err
			}
			if lsJSON {
				return a.printJSON(cmd, bs)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "NAME\tSCOPE\tSPENT\tBUDGET\t%\tFORECAST\tPERIOD ENDS\tACTION\tTHRESHOLDS")
			for _, b := range bs {
				fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s %d%%\t%s\t%s\t%s\t%v\n", b.Name, b.Scope, b.Spent, b.Amount, bar(b.Percent), b.Percent, b.Forecast,
					b.PeriodEnd.Format(time.DateOnly), b.Action, b.Thresholds)
			}
			return t.Flush()
		},
	}
	ls.Flags().BoolVar(&lsJSON, "json", false, "print JSON")
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete a budget",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client().DeleteBudget(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "budget %q deleted\n", args[0])
			return nil
		},
	}
	var alJSON bool
	var limit int
	alerts := &cobra.Command{
		Use:   "alerts",
		Short: "Alerts: budget thresholds, low balance, guards that stopped instances",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			as, err := a.client().FindAlerts(cmd.Context(), limit)
			if err != nil {
				return err
			}
			if alJSON {
				return a.printJSON(cmd, as)
			}
			for _, al := range as {
				d := ""
				if al.Delivery != "" {
					d = " [webhook: " + al.Delivery + "]"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %-11s %s%s\n", al.CreatedAt.Local().Format(time.DateTime), al.Kind, al.Message, d)
			}
			return nil
		},
	}
	alerts.Flags().BoolVar(&alJSON, "json", false, "print JSON")
	alerts.Flags().IntVar(&limit, "limit", 50, "newest N alerts")
	cmd.AddCommand(set, ls, rm, alerts)
	return cmd
}

func bar(pct int) string {
	n := min(max(pct, 0), 100) / 10
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", 10-n) + "]"
}

func newInvoiceCmd(a *app) *cobra.Command {
	var month string
	var csvOut, jsonOut bool
	cmd := &cobra.Command{
		Use:     "invoice [--month YYYY-MM]",
		Short:   "The month's invoice: charges per instance and kind, credits, total",
		Example: "  suanli billing invoice\n  suanli billing invoice --month 2026-11 --csv > nov.csv",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, err := a.client().Invoice(cmd.Context(), month)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, inv)
			}
			out := cmd.OutOrStdout()
			if csvOut {
				c := csv.NewWriter(out)
				c.Write([]string{"month", "instance_id", "label", "project", "kind", "quantity", "amount"})
				for _, l := range inv.Lines {
					c.Write([]string{inv.Month, strconv.FormatInt(l.InstanceID, 10), l.Label, l.Project, l.Kind, l.Quantity, l.Amount.Decimal()})
				}
				c.Write([]string{inv.Month, "", "", "", "credits", "", inv.Credits.Decimal()})
				c.Write([]string{inv.Month, "", "", "", "total", "", inv.Total.Decimal()})
				c.Flush()
				return c.Error()
			}
			fmt.Fprintf(out, "Invoice %s (account %d)\n\n", inv.Month, inv.AccountID)
			t := table(out)
			fmt.Fprintln(t, "INSTANCE\tLABEL\tPROJECT\tKIND\tQUANTITY\tAMOUNT")
			for _, l := range inv.Lines {
				fmt.Fprintf(t, "%d\t%s\t%s\t%s\t%s\t%s\n", l.InstanceID, l.Label, l.Project, l.Kind, l.Quantity, l.Amount)
			}
			t.Flush()
			fmt.Fprintf(out, "\ncredits %s\ntotal   %s\n", inv.Credits, inv.Total)
			return nil
		},
	}
	cmd.Flags().StringVar(&month, "month", "", "YYYY-MM (default: this month, UTC)")
	cmd.Flags().BoolVar(&csvOut, "csv", false, "print CSV")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func newCostCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "cost", Short: "Cost reports by project, tag, team, service or day"}
	var by, since string
	var csvOut, jsonOut bool
	report := &cobra.Command{
		Use:     "report --by project|tag:KEY|team|service|day|instance",
		Short:   "Spend grouped by a dimension; totals reconcile with the ledger",
		Example: "  suanli cost report --by project --since 30d\n  suanli cost report --by tag:team --csv",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := a.client().CostReport(cmd.Context(), by, since)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, rep)
			}
			return printReport(cmd.OutOrStdout(), rep, csvOut)
		},
	}
	f := report.Flags()
	f.StringVar(&by, "by", "project", "project, tag:KEY, team, service, day or instance")
	f.StringVar(&since, "since", "30d", "how far back: 30d, 12h, or a date YYYY-MM-DD")
	f.BoolVar(&csvOut, "csv", false, "print CSV")
	f.BoolVar(&jsonOut, "json", false, "print JSON")
	cmd.AddCommand(report)
	return cmd
}

func printReport(w io.Writer, rep *suanli.CostReport, csvOut bool) error {
	if csvOut {
		c := csv.NewWriter(w)
		c.Write([]string{rep.By, "amount"})
		for _, r := range rep.Rows {
			c.Write([]string{r.Key, r.Amount.Decimal()})
		}
		c.Write([]string{"total", rep.Total.Decimal()})
		c.Flush()
		return c.Error()
	}
	t := table(w)
	fmt.Fprintf(t, "%s\tAMOUNT\tSHARE\n", strings.ToUpper(rep.By))
	for _, r := range rep.Rows {
		pct := 0
		if rep.Total > 0 {
			pct = int(suanli.MulDiv(r.Amount, 100, int64(rep.Total)))
		}
		fmt.Fprintf(t, "%s\t%s\t%s %d%%\n", r.Key, r.Amount, bar(pct), pct)
	}
	fmt.Fprintf(t, "total\t%s\t\n", rep.Total)
	return t.Flush()
}

func newEarningsCmd(a *app) *cobra.Command {
	var since string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "earnings [--since 30d]",
		Short: "Your earnings as a provider, by machine, after the platform fee",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.client().Earnings(cmd.Context(), since)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, e)
			}
			printEarnings(cmd.OutOrStdout(), e)
			return nil
		},
	}
	cmd.Flags().StringVar(&since, "since", "30d", "how far back: 30d, 12h, or a date")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func printEarnings(w io.Writer, e *suanli.Earnings) {
	t := table(w)
	fmt.Fprintln(t, "MACHINE\tGROSS\tFEES\tNET")
	for _, m := range e.Machines {
		fmt.Fprintf(t, "%d\t%s\t%s\t%s\n", m.MachineID, m.Gross, m.Fees, m.Net)
	}
	fmt.Fprintf(t, "total\t%s\t%s\t%s\n", e.Gross, e.Fees, e.Net)
	t.Flush()
	fmt.Fprintf(w, "\navailable %s, paid out so far %s\n", e.Available, e.PaidOut)
}

func newPayoutCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "payout [AMOUNT]",
		Short: "Pay out your earnings (all available by default)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var amt suanli.Money
			if len(args) == 1 {
				m, err := suanli.ParseMoney(args[0])
				if err != nil || m <= 0 {
					return suanli.FieldErrorf("amount", "%q: give a positive amount", args[0])
				}
				amt = m
			}
			e, err := a.client().Payout(cmd.Context(), amt)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "paid out; available now %s, paid out so far %s\n", e.Available, e.PaidOut)
			return nil
		},
	}
}
