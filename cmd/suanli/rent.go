package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/market"
)

func parseID(what, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, suanli.FieldErrorf(what, "%q is not an id: give the number shown by `suanli %s`", s, map[string]string{"offer": "search", "instance": "ls", "machine": "host machines"}[what])
	}
	return id, nil
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

func newSearchCmd(a *app) *cobra.Command {
	var q suanli.OfferQuery
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "search [QUERY...]",
		Short: "Search offers with the query language",
		Long: `Search the market's offers. A query is space-separated conditions
'field op value', all of which must hold (AND):

  operators   < <= = == != >= >   in [a,b]   notin [a,b]
  strings     _ stands for a space: gpu_name=RTX_4090
  money       dollars: dph<0.5 (dph is dph_total, per hour, incl. --storage GB)
  units       gpu_ram, cpu_ram, disk_space in GB; inet_up/inet_down in Mb/s;
              co2_g_per_hour in grams of CO2 an hour at full load (0: grid unknown)

Default filters: ` + market.DefaultQuery + `
Remove one with field=any (e.g. rentable=any).

Fields: ` + strings.Join(market.Fields(), " ") + `

Order with -o 'dph,reliability-' (a trailing - sorts descending). The
default order is ` + market.DefaultOrder + `: score is dlperf weighted by the host's
reliability, per dollar-hour, so a cheap host that loses rentals sinks.`,
		Example: `  suanli search
  suanli search 'gpu_name=RTX_4090 num_gpus>=2 dph<1.5' -o dph
  suanli search gpu_ram'>='24 reliability'>'0.95 -o dlperf_per_dphtotal-
  suanli search 'gpu_name in [H100_SXM,A100_80GB]' --explain --json
  suanli search 'co2_g_per_hour>0 co2_g_per_hour<500' -o co2_g_per_hour`,
		RunE: func(cmd *cobra.Command, args []string) error {
			q.Query = strings.Join(args, " ")
			res, err := a.client().SearchOffers(cmd.Context(), q)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, res)
			}
			out := cmd.OutOrStdout()
			printOfferTable(out, res.Offers)
			fmt.Fprintf(out, "%d of %d offers\n", len(res.Offers), res.Total)
			if res.Explain != nil {
				fmt.Fprintln(out, "\nWhy:")
				for _, s := range res.Explain.Steps {
					line := fmt.Sprintf("  %s removed %d (%d left)", s.Condition, s.Removed, s.Remaining)
					if s.Nearest != "" {
						line += " — " + s.Nearest
					}
					fmt.Fprintln(out, line)
				}
				if res.Explain.Summary != "" {
					fmt.Fprintln(out, "  "+res.Explain.Summary)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&q.Order, "order", "o", "", "sort keys, e.g. 'dph,reliability-'")
	f.IntVar(&q.Limit, "limit", 20, "at most this many offers")
	f.IntVar(&q.Offset, "offset", 0, "skip this many offers")
	f.Float64Var(&q.StorageGB, "storage", suanli.DefaultStorageGB, "disk GB priced into dph_total")
	f.BoolVar(&q.Explain, "explain", false, "say which conditions removed how many offers")
	f.StringVar(&q.From, "from", os.Getenv("SUANLI_FROM"), `your location (country code, place, or "lat,lon"): offers get latency_ms to filter and sort by`)
	f.BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

// printOfferTable writes offers as search shows them. The CO2 G/H column
// (co2_g_per_hour, the estimate at full load) appears when any offer on the
// page has one; "-" marks an offer whose grid is unknown. The GREEN OFF
// column (green_discount, already in $/H) appears when any offer has one.
func printOfferTable(out io.Writer, offers []*suanli.Offer) {
	co2 := slices.ContainsFunc(offers, func(o *suanli.Offer) bool { return o.CO2PerHour > 0 })
	green := slices.ContainsFunc(offers, func(o *suanli.Offer) bool { return o.GreenDiscount > 0 })
	latency := slices.ContainsFunc(offers, func(o *suanli.Offer) bool { return o.LatencyMS > 0 })
	t := table(out)
	head := "ID\tGPU\tN\tVRAM\tCPU\tRAM\tDISK\t$/H\tMIN BID\tNOTICE\tINTERRUPTED\tREL"
	if latency {
		head += "\tLATENCY"
	}
	if co2 {
		head += "\tCO2 G/H"
	}
	if green {
		head += "\tGREEN OFF"
	}
	fmt.Fprintln(t, head+"\tWHERE\tSTATUS")
	for _, o := range offers {
		gpu := o.GPUName
		if gpu == "" {
			gpu = "CPU only"
		}
		if o.Simulated {
			gpu += " (simulated)"
		}
		fmt.Fprintf(t, "%d\t%s\t%d/%d\t%.0f GB\t%d\t%.0f GB\t%.0f GB\t%s\t%s\t%d s\t%.0f%%\t%.2f", o.ID, gpu, o.NumGPUs, o.TotalGPUs, o.GPURAM,
			o.CPUCores, o.CPURAM, o.DiskSpace, o.DPHTotal.Decimal(), o.MinBid.Decimal(), o.PreemptGraceS, o.InterruptionRate*100, o.Reliability)
		if latency {
			l := "-"
			if o.LatencyMS > 0 {
				l = "~" + strconv.FormatFloat(o.LatencyMS, 'f', 0, 64) + " ms"
			}
			fmt.Fprintf(t, "\t%s", l)
		}
		if co2 {
			g := "-"
			if o.CO2PerHour > 0 {
				g = strconv.FormatFloat(o.CO2PerHour, 'f', 0, 64)
			}
			fmt.Fprintf(t, "\t%s", g)
		}
		if green {
			g := "-"
			if o.GreenDiscount > 0 {
				g = strconv.FormatFloat(o.GreenDiscount, 'f', -1, 64) + "%"
			}
			fmt.Fprintf(t, "\t%s", g)
		}
		fmt.Fprintf(t, "\t%s\t%s\n", where(o), rentableText(o))
	}
	t.Flush()
}

func where(o *suanli.Offer) string {
	if o.Geolocation != "" {
		return o.Geolocation
	}
	if o.Country != "" {
		return o.Country
	}
	return "-"
}

func rentableText(o *suanli.Offer) string {
	if o.Rentable {
		return "rentable"
	}
	return o.HostStatus
}

func newCreateCmd(a *app) *cobra.Command {
	var c suanli.InstanceCreate
	var env, secretEnv, allowed []string
	var bid, regUser, regServer, query, deadline, schedule string
	var count, hours int
	var allOrNothing, jsonOut, dryRun, wait bool
	var g guardFlags
	var mounts []string
	cmd := &cobra.Command{
		Use:   "create [OFFER] (--image IMAGE | --template NAME) [flags] [-- CMD ARGS...]",
		Short: "Rent an offer (or offers a query picks) and run an image (and command) on it",
		Long: `Rent an offer from 'suanli search' and run IMAGE on it. Everything after
-- is the command. By default you rent every free GPU of the offer,
on-demand, with a 10 GB disk. Compute is billed per second while running;
the disk from creation until destroy (stopped included).

With --bid the rental is interruptible: cheaper, but a higher bid or an
on-demand rental can preempt it: the workload gets SIGTERM and the host's
notice period (shown in search as NOTICE; 30 s by default), then is stopped —
never destroyed. Its disk stays, compute billing ends while it is preempted,
and it resumes by itself when its bid wins GPUs again. An on-demand rental
may preempt interruptible ones to get its GPUs; it starts once they stopped.

Instead of an offer, --query picks offers with the query language
(num_gpus there is the GPUs per instance; --max-price bounds the compute
price per instance-hour, or per GPU-hour with --deadline or --schedule).
--count N rents N instances in one request;
--all-or-nothing rents none unless all N can be placed.

Ghost-spend guards are on by default: an instance idle (CPU and GPU under
5%) for 60 minutes is stopped (--idle-stop 30m, or off). Add --ttl 8h to stop
it 8 hours after it starts, --stop-window "Mon-Fri 22:00-06:00" for nights.
--dry-run prints the itemized quote and pre-flight checks instead.`,
		Example: `  suanli create 3 --image ubuntu:24.04 -- sh -c 'nvidia-smi; sleep 3600'
  suanli create 3 --image pytorch/pytorch --gpus 1 --disk 50 --env WANDB_MODE=offline --label train-1
  suanli create 3 --image ubuntu:24.04 --bid 0.25 -- ./train.sh
  suanli create --query 'gpu_name=RTX_4090 num_gpus=2' --max-price 1.2 --image ubuntu:24.04 -- ./train.sh
  suanli create --query 'gpu_name=H100' --count 8 --all-or-nothing --image ubuntu:24.04 -- ./worker.sh`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pos := args
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				pos, c.Cmd = args[:dash], args[dash:]
			}
			c.DiskGiven = cmd.Flags().Changed("disk")
			if deadline != "" || schedule != "" {
				if len(pos) > 0 {
					return suanli.FieldErrorf("args", "--deadline and --schedule pick windows themselves: drop the offer id (narrow with --query)")
				}
				return createLater(cmd, a, query, deadline, schedule, hours, c, g.maxPrice, jsonOut)
			}
			switch {
			case query != "" && len(pos) > 0:
				return suanli.FieldErrorf("args", "give an offer id or --query, not both")
			case query == "" && len(pos) == 0:
				return suanli.FieldErrorf("offer_id", "give an offer id from `suanli search`, or --query 'gpu_name=RTX_4090 num_gpus=2'")
			case len(pos) > 1 && cmd.ArgsLenAtDash() < 0:
				return suanli.FieldErrorf("args", "put the command after --: suanli create %s --image IMAGE -- %s", pos[0], strings.Join(pos[1:], " "))
			case len(pos) > 1:
				return suanli.FieldErrorf("args", "give exactly one offer id before --")
			}
			if len(pos) == 1 {
				id, err := parseID("offer", pos[0])
				if err != nil {
					return err
				}
				c.OfferID = id
			}
			c.Env = map[string]string{}
			for _, kv := range env {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return suanli.FieldErrorf("env", "%q: write KEY=VALUE", kv)
				}
				c.Env[k] = v
			}
			for _, kv := range secretEnv {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					// KEY alone: take the value from this shell, so that it
					// stays out of the command line and the shell history.
					v, ok = os.LookupEnv(k)
					if !ok {
						return suanli.FieldErrorf("secret-env", "%s: write KEY=VALUE, or export %s and give KEY alone", kv, kv)
					}
				}
				if k == "" {
					return suanli.FieldErrorf("secret-env", "%q: write KEY=VALUE", kv)
				}
				if c.SecretEnv == nil {
					c.SecretEnv = map[string]string{}
				}
				c.SecretEnv[k] = v
			}
			if regUser != "" {
				pw := os.Getenv("SUANLI_REGISTRY_PASSWORD")
				if pw == "" {
					return suanli.FieldErrorf("registry-user", "set SUANLI_REGISTRY_PASSWORD to the registry password or token (it is not taken on the command line)")
				}
				c.RegistryAuth = &suanli.RegistryAuth{Server: regServer, Username: regUser, Password: pw}
			}
			for _, v := range allowed {
				c.AllowedCountries = append(c.AllowedCountries, strings.Split(v, ",")...)
			}
			if bid != "" {
				m, err := suanli.ParseMoney(bid)
				if err != nil {
					return suanli.FieldErrorf("bid", "%v", err)
				}
				c.Bid = &m
			}
			if err := g.apply(&c); err != nil {
				return err
			}
			maxP := c.Restart.MaxPrice // --max-price bounds this placement and any relaunch
			var err error
			if c.Volumes, err = parseMounts(mounts); err != nil {
				return err
			}
			fleet := query != "" || count > 1 || maxP != 0
			if dryRun && fleet {
				return suanli.FieldErrorf("dry-run", "quotes are per offer: drop --query, --count and --max-price, or quote one offer at a time")
			}
			if dryRun {
				q, err := a.client().Quote(cmd.Context(), suanli.QuoteRequest{InstanceCreate: c, Hours: 1})
				if err != nil {
					return err
				}
				if jsonOut {
					return a.printJSON(cmd, q)
				}
				fmt.Fprintln(cmd.OutOrStdout(), "dry run: nothing was rented")
				printQuote(cmd.OutOrStdout(), q, 1)
				return nil
			}
			out := cmd.OutOrStdout()
			if fleet {
				res, err := a.client().CreateFleet(cmd.Context(), suanli.FleetCreate{InstanceCreate: c, Count: count, AllOrNothing: allOrNothing,
					Query: query, MaxPrice: maxP})
				if err != nil {
					return err
				}
				if jsonOut {
					return a.printJSON(cmd, res)
				}
				for _, in := range res.Instances {
					printCreated(out, in)
				}
				fmt.Fprintln(out, res.Message)
				if wait {
					for _, in := range res.Instances {
						if err := waitRunning(cmd, a, in.ID); err != nil {
							return err
						}
					}
				}
				return nil
			}
			in, err := a.client().CreateInstance(cmd.Context(), c)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, in)
			}
			printCreated(out, in)
			if wait {
				if err := waitRunning(cmd, a, in.ID); err != nil {
					return err
				}
			}
			fmt.Fprintf(out, "next: suanli show %d   suanli logs %d -f   suanli destroy %d\n", in.ID, in.ID, in.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Image, "image", "", "Docker image to run (required unless --template gives one)")
	f.StringVar(&c.Template, "template", "", "a preset with image, disk, ports and command (suanli templates)")
	f.StringArrayVarP(&mounts, "volume", "v", nil, "attach a volume of the same machine: NAME:/path (repeatable)")
	f.IntSliceVarP(&c.Ports, "port", "p", nil, "container TCP port to publish (repeatable); the host port is in show and in SUANLI_TCP_PORT_<n>")
	f.Int64Var(&c.DiskGB, "disk", 0, fmt.Sprintf("disk size in GB (default: the template's, else %d)", suanli.DefaultDiskGB))
	f.IntVar(&c.GPUCount, "gpus", 0, "GPUs to rent per instance (default: every free GPU of the offer; 1 with --query)")
	f.IntVar(&c.CPUCores, "cpus", 0, "CPU cores to rent on a CPU-only offer (default: all free)")
	f.StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE (repeatable)")
	f.StringArrayVar(&secretEnv, "secret-env", nil, "secret environment variable KEY=VALUE, or KEY to take it from this shell: stored encrypted, shown as ***, given to the host's agent only (repeatable)")
	f.StringVar(&regUser, "registry-user", "", "pull a private image as this user; the password or token comes from SUANLI_REGISTRY_PASSWORD (stored encrypted)")
	f.StringVar(&regServer, "registry-server", "", "the private registry's address (default: the image's)")
	f.StringSliceVar(&allowed, "allowed-countries", nil, "run only in these countries or regions (DE,FR or eu-west), on top of your account's restriction")
	f.StringVar(&c.Label, "label", "", "a label to recognise the instance")
	f.StringVar(&bid, "bid", "", "rent interruptible at this price per hour for the whole instance (e.g. 0.25)")
	f.StringVar(&query, "query", "", "pick offers with the query language instead of naming one")
	f.StringVar(&deadline, "deadline", "", "run whenever it is cheapest before this (48h, or a time): books the cheapest window, or runs now (needs --hours)")
	f.StringVar(&schedule, "schedule", "", `a recurring rental: cron fields in UTC ("0 2 * * 1-5"); each run is booked a day ahead (needs --hours)`)
	f.IntVar(&hours, "hours", 0, "with --deadline or --schedule: how long the job (each run) lasts")
	f.IntVar(&count, "count", 1, "instances to rent in this request")
	f.BoolVar(&allOrNothing, "all-or-nothing", false, "with --count: rent none unless all can be placed")
	f.BoolVar(&jsonOut, "json", false, "print the new instance (a fleet: the result) as JSON")
	f.BoolVar(&dryRun, "dry-run", false, "print the itemized quote and pre-flight checks; rent nothing")
	f.BoolVar(&wait, "wait", false, "wait until it runs, printing progress (image pull, start)")
	g.register(cmd)
	return cmd
}

func newLsCmd(a *app) *cobra.Command {
	var all, jsonOut bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List your instances",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := suanli.InstanceFilter{}
			live := !all
			f.Live = &live
			if all {
				f.Live = nil
				no := false
				f.Live = &no
			}
			ins, _, err := a.client().FindInstances(cmd.Context(), f)
			if err != nil {
				return err
			}
			if jsonOut {
				if ins == nil {
					ins = []*suanli.Instance{}
				}
				return a.printJSON(cmd, ins)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "ID\tSTATUS\tMACHINE\tGPUS\tTYPE\tIMAGE\tCOST\t$/H\tLABEL")
			for _, in := range ins {
				fmt.Fprintf(t, "%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", in.ID, in.Status, in.MachineID, in.GPUCount, in.RentalType, in.Image,
					in.CostSoFar.Decimal(), in.BurnRate.Decimal(), in.Label)
			}
			return t.Flush()
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include destroyed instances")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func newShowCmd(a *app) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show an instance: status, rental terms, cost so far, burn rate, history",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("instance", args[0])
			if err != nil {
				return err
			}
			c := a.client()
			in, err := c.FindInstanceByID(cmd.Context(), id)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, in)
			}
			ev, err := c.InstanceEvents(cmd.Context(), id)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			t := table(out)
			row := func(k, v string) { fmt.Fprintf(t, "%s\t%s\n", k, v) }
			row("instance", strconv.FormatInt(in.ID, 10))
			status := in.Status
			if in.StatusMessage != "" {
				status += " — " + in.StatusMessage
			}
			row("status", status)
			row("rental", rentalText(in))
			if in.Waiting() && in.WaitingSince != nil {
				row("waiting", "since "+in.WaitingSince.Local().Format(time.DateTime)+": it starts by itself when it wins GPUs (`suanli stop` ends the wait)")
			}
			row("machine", fmt.Sprintf("%d (%d× %s, %d cores, %.0f GB RAM)%s", in.MachineID, in.GPUCount, orCPU(in.GPUName), in.CPUCores, in.RAMGB, simText(in.Simulated)))
			row("image", in.Image)
			if len(in.Cmd) > 0 {
				row("command", strings.Join(in.Cmd, " "))
			}
			row("disk", fmt.Sprintf("%d GB", in.DiskGB))
			if len(in.SecretEnv) > 0 {
				var names []string
				for k := range in.SecretEnv {
					names = append(names, k+"="+suanli.SecretMask)
				}
				slices.Sort(names)
				row("secret env", strings.Join(names, " "))
			}
			if in.RegistryAuth != nil {
				row("registry", in.RegistryAuth.Username+"@"+orDefault(in.RegistryAuth.Server, "the image's registry")+" (password "+suanli.SecretMask+")")
			}
			if len(in.Allowed) > 0 {
				row("may run in", strings.Join(in.Allowed, ", "))
			}
			for _, v := range in.Volumes {
				row("volume", fmt.Sprintf("%s at %s", v.Name, v.Path))
			}
			for _, p := range in.Ports {
				if hp, ok := in.PortMap[p]; ok {
					row("port", fmt.Sprintf("%d/tcp → host port %d", p, hp))
				} else {
					row("port", fmt.Sprintf("%d/tcp (not mapped yet)", p))
				}
			}
			rates := fmt.Sprintf("%s/h compute, %s/GB-month disk (%s/h, also while stopped), %s/GB out, %s/GB in",
				in.Rates.ComputePerHour.Decimal(), in.Rates.StoragePerMonth.Decimal(), in.Rates.StoragePerHour(in.DiskGB).Decimal(),
				in.Rates.InetUpPerGB.Decimal(), in.Rates.InetDownPerGB.Decimal())
			if bp := in.Rates.GreenDiscountBP; bp > 0 {
				rates += fmt.Sprintf("; compute includes the host's %d.%02d%% green discount", bp/100, bp%100)
			}
			row("rates", rates)
			row("cost so far", in.CostSoFar.String())
			row("burn rate", in.BurnRate.String()+"/h")
			row("guards", describeGuards(in.Guards))
			if r := in.Restart; r.Policy != "" || r.Recover != "" {
				desc := "restart " + orDefault(r.Policy, "never")
				if r.Policy != "" && r.Policy != suanli.RestartNever {
					desc += fmt.Sprintf(" (max %d)", r.Limit())
				}
				if r.Recover != "" {
					desc += "; recover " + r.Recover
				}
				row("job", fmt.Sprintf("%s; %d restarts, %d relaunches elsewhere", desc, in.Restarts, in.Moves))
			}
			if in.Project != "" {
				row("project", in.Project)
			}
			if len(in.Tags) > 0 {
				row("tags", formatTags(in.Tags))
			}
			if tm := in.Telemetry; tm != nil {
				for _, r := range (telemetryView{Now: tm, GPUs: in.GPUCount > 0 && !in.Simulated}).rows() {
					row(r[0], r[1])
				}
			}
			for _, h := range in.Hints {
				row("hint", h)
			}
			row("created", in.CreatedAt.Local().Format(time.DateTime))
			if in.ExitCode != nil {
				row("exit code", strconv.Itoa(*in.ExitCode))
			}
			t.Flush()
			fmt.Fprintln(out, "\nhistory:")
			for _, e := range ev {
				msg := ""
				if e.Message != "" {
					msg = " — " + e.Message
				}
				fmt.Fprintf(out, "  %s  %s%s\n", e.At.Local().Format("2006-01-02 15:04:05.000"), e.Status, msg)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func orCPU(s string) string {
	if s == "" {
		return "CPU"
	}
	return s
}

func simText(sim bool) string {
	if sim {
		return ", simulated GPUs"
	}
	return ""
}

func newLogsCmd(a *app) *cobra.Command {
	var follow, jsonOut bool
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print an instance's output (stdout and stderr); -f follows it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("instance", args[0])
			if err != nil {
				return err
			}
			c := a.client()
			var off int64
			for {
				chunk, err := c.InstanceLogs(cmd.Context(), id, off)
				if err != nil {
					return err
				}
				if jsonOut {
					return a.printJSON(cmd, chunk)
				}
				cmd.OutOrStdout().Write(chunk.Data)
				off = chunk.Next
				if len(chunk.Data) > 0 {
					continue
				}
				if !follow || chunk.Done {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(500 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until Ctrl-C or the instance is destroyed")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the first chunk as JSON (offset, data as base64, next)")
	return cmd
}

func newStateCmd(a *app, verb string) *cobra.Command {
	short := map[string]string{
		"stop":    "Stop an instance: compute billing ends, the disk stays (and is billed)",
		"start":   "Start a stopped instance again on its machine (--wait queues it, --elsewhere recreates it)",
		"destroy": "Destroy an instance: the rental ends, all billing stops, its data is deleted",
	}[verb]
	var jsonOut, wait, elsewhere bool
	var query, maxPrice string
	cmd := &cobra.Command{
		Use:   verb + " ID...",
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			for _, s := range args {
				id, err := parseID("instance", s)
				if err != nil {
					return err
				}
				var in *suanli.Instance
				switch verb {
				case "stop":
					in, err = c.StopInstance(cmd.Context(), id)
				case "start":
					if elsewhere {
						var maxP suanli.Money
						if maxPrice != "" {
							if maxP, err = suanli.ParseMoney(maxPrice); err != nil {
								return suanli.FieldErrorf("max-price", "%v", err)
							}
						}
						res, err := c.RecreateInstance(cmd.Context(), id, suanli.Recreate{Query: query, MaxPrice: maxP})
						if err != nil {
							return err
						}
						if jsonOut {
							if err := a.printJSON(cmd, res); err != nil {
								return err
							}
							continue
						}
						printCreated(cmd.OutOrStdout(), res.Instance)
						fmt.Fprintf(cmd.OutOrStdout(), "  same disk? %s\n", res.DiskNote)
						continue
					}
					in, err = c.StartInstanceWith(cmd.Context(), id, suanli.StartOptions{Wait: wait})
				default:
					in, err = c.DestroyInstance(cmd.Context(), id)
				}
				if err != nil {
					return err
				}
				if jsonOut {
					if err := a.printJSON(cmd, in); err != nil {
						return err
					}
					continue
				}
				line := fmt.Sprintf("instance %d: %s (cost so far %s)", in.ID, in.Status, in.CostSoFar)
				if in.Waiting() {
					line += " — " + in.StatusMessage
				}
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the instance as JSON")
	if verb == "start" {
		cmd.Long = `Start a stopped instance again on its machine, with its disk. When its
GPUs were taken while it was stopped, start says by whom and offers two
ways on: --wait queues the start (it starts by itself, in order, when the
GPUs free up; an on-demand start also preempts interruptible rentals), or
--elsewhere creates a new instance like it on another machine (same image,
command, environment and disk size, picked by --query, default the same
GPU model). The old disk stays on its machine: with the process and Docker
runtimes a disk lives on its host and cannot follow.`
		cmd.Example = `  suanli start 12
  suanli start 12 --wait
  suanli start 12 --elsewhere --query 'gpu_name=RTX_4090 region=eu' --max-price 0.8`
		cmd.Flags().BoolVar(&wait, "wait", false, "queue the start when its GPUs are taken")
		cmd.Flags().BoolVar(&elsewhere, "elsewhere", false, "create a new instance like it on another machine instead")
		cmd.Flags().StringVar(&query, "query", "", "with --elsewhere: pick the machine with the query language")
		cmd.Flags().StringVar(&maxPrice, "max-price", "", "with --elsewhere: most compute may cost per hour")
	}
	return cmd
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func newTemplatesCmd(a *app) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "templates",
		Short: "Presets for create: image, recommended disk, ports and start command",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if jsonOut {
				return a.printJSON(cmd, suanli.Templates)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "NAME\tIMAGE\tDISK\tPORTS\tGPU\tDESCRIPTION")
			for _, tp := range suanli.Templates {
				gpu := "-"
				if tp.NeedsGPU {
					gpu = "yes"
				}
				fmt.Fprintf(t, "%s\t%s\t%d GB\t%v\t%s\t%s\n", tp.Name, tp.Image, tp.DiskGB, tp.Ports, gpu, tp.Description)
			}
			t.Flush()
			fmt.Fprintln(cmd.OutOrStdout(), "\nuse: suanli create OFFER --template NAME [--disk GB] [-- CMD]")
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

// waitRunning follows an instance until it runs (or fails), printing each
// status and message change: image pull progress, start, failures.
func waitRunning(cmd *cobra.Command, a *app, id int64) error {
	c := a.client()
	last := ""
	for {
		in, err := c.FindInstanceByID(cmd.Context(), id)
		if err != nil {
			return err
		}
		line := in.Status
		if in.StatusMessage != "" {
			line += ": " + in.StatusMessage
		}
		if line != last {
			fmt.Fprintf(cmd.ErrOrStderr(), "  %s  %s\n", time.Now().Format(time.TimeOnly), line)
			last = line
		}
		switch in.Status {
		case suanli.StatusRunning:
			return nil
		case suanli.StatusFailed, suanli.StatusExited, suanli.StatusDestroyed, suanli.StatusLost:
			return suanli.Errorf(suanli.ECONFLICT, "instance %d is %s: %s", id, in.Status, in.StatusMessage)
		}
		select {
		case <-cmd.Context().Done():
			return nil
		case <-time.After(300 * time.Millisecond):
		}
	}
}
