package advisecli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
)

func newAdviseCmd(src OfferSource) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "advise",
		Short: "Advice before renting: GPU memory, CPU or GPU, rent or buy",
		Long: `Answers the questions to settle before renting, with numbers and the
assumptions behind them:

  vram          how much GPU memory a model needs, and matching offers
  cpu-or-gpu    whether a many-core CPU offer does your kind of work cheaper
  rent-vs-buy   whether buying the hardware would pay off

Related: 'suanli compare QUERY' puts offers next to public-cloud prices.`,
		Example: `  suanli advise vram llama-3.1-8b --task finetune --lora --search
  suanli advise cpu-or-gpu --workload feature-engineering
  suanli advise rent-vs-buy --hourly 2.5 --hours 300 --hardware-price 30000`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE:         func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	addJSON(cmd)
	cmd.AddCommand(newVRAMCmd(src), newCPUOrGPUCmd(src), newRentVsBuyCmd())
	return cmd
}

func newVRAMCmd(src OfferSource) *cobra.Command {
	var (
		params, dtype, task, optimizer     string
		batch, seq, loraRank, accum, limit int
		lora, ckpt, doSearch, list         bool
	)
	cmd := &cobra.Command{
		Use:   "vram [MODEL]",
		Short: "Estimate the GPU memory a model needs",
		Long: `Estimates the minimum GPU memory (VRAM) for running, fine-tuning or training a
model, with the breakdown: weights, gradients, optimizer states, activations,
KV cache and overhead (CUDA context, allocator fragmentation). It then shows
what mixed precision, gradient accumulation, activation checkpointing, LoRA or
quantisation would change.

Name a model from the built-in table (--list shows it, with sources), or give
the parameter count with --params for any other model. A named model starts
from its typical workload (ResNet-50: training at batch 32); flags change it.
Where the table has a published minimum for that typical workload (LLaMA-7B:
24 GB), both show, and the recommended card and --search ask for at least
the published figure.

Training with --dtype fp16 or bf16 means mixed precision (16-bit weights and
activations, fp32 master weights). int8 and int4 are for inference, or for
QLoRA with --lora. --batch is the batch per optimizer step; --grad-accum
splits it into micro-batches so that only one micro-batch's activations are
held. --search lists offers with enough GPU memory.`,
		Example: `  suanli advise vram llama-3.1-8b
  suanli advise vram llama-3.1-70b --dtype int4 --search
  suanli advise vram --params 7B --dtype bf16 --task finetune --lora --batch 8 --seq 2048
  suanli advise vram --params 350M --dtype fp32 --task train --batch 64 --seq 512 --optimizer adam --grad-accum 4
  suanli advise vram resnet50 --json
  suanli advise vram --list`,
		Args:         cobra.MaximumNArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if list {
				return printModels(cmd)
			}
			var w advisor.Workload
			var model *advisor.Model
			if len(args) == 1 {
				m, ok := advisor.FindModel(args[0])
				if !ok {
					return suanli.FieldErrorf("model", "unknown model %q: see 'suanli advise vram --list', or give --params", args[0])
				}
				model, w = m, m.TypicalWorkload()
			}
			f := cmd.Flags()
			if params != "" {
				if model != nil {
					return suanli.FieldErrorf("params", "give a model name or --params, not both")
				}
				n, err := advisor.ParseParams(params)
				if err != nil {
					return err
				}
				w.Params = n
			}
			if model == nil && params == "" {
				return suanli.FieldErrorf("params", "name a model (see --list) or give --params, e.g. --params 7B")
			}
			if f.Changed("dtype") {
				d, err := advisor.ParseDtype(dtype)
				if err != nil {
					return err
				}
				w.Dtype = d
			}
			if f.Changed("task") {
				t, err := advisor.ParseTask(task)
				if err != nil {
					return err
				}
				w.Task = t
			}
			if f.Changed("optimizer") {
				o, err := advisor.ParseOptimizer(optimizer)
				if err != nil {
					return err
				}
				w.Optimizer = o
			}
			if f.Changed("batch") {
				w.Batch = batch
			}
			if f.Changed("seq") {
				w.Seq = seq
			}
			if f.Changed("grad-accum") {
				w.GradAccum = accum
			}
			if f.Changed("lora-rank") {
				w.LoRA, w.LoRARank = true, loraRank
			}
			if f.Changed("lora") {
				w.LoRA = lora
			}
			if f.Changed("checkpointing") {
				w.Checkpointing = ckpt
			}
			e, err := advisor.EstimateVRAM(w)
			if err != nil {
				return err
			}
			var res *suanli.OfferResult
			if doSearch {
				res, err = search(cmd, src, suanli.OfferQuery{Query: e.SearchQuery(), Order: "dph", Limit: limit})
				if err != nil {
					return fmt.Errorf("searching offers with %s: %w", e.SearchQuery(), err)
				}
			}
			if wantJSON(cmd) {
				out := struct {
					*advisor.Estimate
					TotalGiB     float64             `json:"total_gib"`
					SmallestCard int                 `json:"smallest_card_gb"`
					RequiredGiB  float64             `json:"required_gib"` // total_gib, or published_gb when larger
					Query        string              `json:"query"`
					Source       string              `json:"source,omitempty"`
					Offers       *suanli.OfferResult `json:"offers,omitempty"`
				}{Estimate: e, TotalGiB: advisor.GiBOf(e.Total), SmallestCard: e.SmallestCard(), RequiredGiB: advisor.GiBOf(e.Required()),
					Query: e.SearchQuery(), Offers: res}
				if model != nil {
					out.Source = model.Source
				}
				return printJSON(cmd, out)
			}
			printEstimate(cmd, e, model)
			if res != nil {
				printOffers(cmd, e.SearchQuery(), res)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&params, "params", "", "parameter count, e.g. 7B, 1.5B, 350M (instead of MODEL)")
	f.StringVar(&dtype, "dtype", "fp16", "weights: fp32, fp16, bf16, int8 or int4")
	f.StringVar(&task, "task", "infer", "infer, finetune or train")
	f.IntVar(&batch, "batch", 1, "samples per step (the effective batch)")
	f.IntVar(&seq, "seq", 2048, "tokens per sample (transformers)")
	f.StringVar(&optimizer, "optimizer", "adamw", "adam, adamw or sgd (with momentum)")
	f.BoolVar(&lora, "lora", false, "train LoRA adapters only (with int8/int4: QLoRA)")
	f.IntVar(&loraRank, "lora-rank", 16, "LoRA rank (implies --lora)")
	f.IntVar(&accum, "grad-accum", 1, "gradient accumulation: micro-batches per step")
	f.BoolVar(&ckpt, "checkpointing", false, "activation (gradient) checkpointing")
	f.BoolVar(&doSearch, "search", false, "list offers with enough GPU memory, cheapest first")
	f.IntVar(&limit, "limit", 10, "at most this many offers with --search")
	f.BoolVar(&list, "list", false, "list the built-in models and their sources")
	return cmd
}

func printEstimate(cmd *cobra.Command, e *advisor.Estimate, m *advisor.Model) {
	out := cmd.OutOrStdout()
	w := e.Workload
	desc := fmt.Sprintf("%s, %s", w.Task, w.Dtype)
	if w.Task != advisor.TaskInfer && w.Dtype.Bits() == 16 {
		desc += " mixed precision"
	}
	desc += fmt.Sprintf(", batch %d", w.Batch)
	if w.GradAccum > 1 {
		desc += fmt.Sprintf(" (%d × %d)", w.GradAccum, w.MicroBatch())
	}
	if w.Seq > 0 {
		desc += fmt.Sprintf(", sequence %d", w.Seq)
	}
	if w.Task != advisor.TaskInfer {
		desc += ", " + string(w.Optimizer)
		if w.LoRA {
			desc += fmt.Sprintf(", LoRA rank %d", w.LoRARank)
		}
		if w.Checkpointing {
			desc += ", checkpointing"
		}
	}
	fmt.Fprintf(out, "%s (%s parameters): %s\n\n", e.ModelName, advisor.FormatParams(e.Params), desc)
	t := table(out)
	fmt.Fprintln(t, "PART\tGiB")
	for _, p := range []struct {
		name string
		b    int64
	}{{"weights", e.Weights}, {"gradients", e.Gradients}, {"optimizer states", e.OptimizerStates},
		{"activations", e.Activations}, {"KV cache", e.KVCache}, {"overhead", e.Overhead}} {
		v := gib(p.b)
		if p.b == 0 {
			v = "-"
		}
		fmt.Fprintf(t, "%s\t%6s\n", p.name, v)
	}
	fmt.Fprintf(t, "total\t%6s\n", gib(e.Total))
	t.Flush()
	switch c := e.SmallestCard(); {
	case e.PublishedGB > 0:
		// The formula's estimate and the published figure both show; the
		// advice is the larger.
		fmt.Fprintf(out, "\nEstimate %s GiB (the formula above); published minimum for this workload: %g GB (see Source).\n", gib(e.Total), e.PublishedGB)
		if c > 0 {
			fmt.Fprintf(out, "Recommended: one GPU with %d GB or more (offer query: %s).\n", c, e.SearchQuery())
		} else {
			fmt.Fprintf(out, "Recommended: more than any single GPU; split the model over several (offer query: %s).\n", e.SearchQuery())
		}
	case c > 0:
		fmt.Fprintf(out, "\nMinimum %s GiB: one GPU with %d GB or more (offer query: %s).\n", gib(e.Total), c, e.SearchQuery())
	default:
		fmt.Fprintf(out, "\nMinimum %s GiB: more than any single GPU; split the model over several (offer query: %s).\n", gib(e.Total), e.SearchQuery())
	}
	if len(e.Alternatives) > 0 {
		fmt.Fprintln(out, "\nWhat changes:")
		t = table(out)
		fmt.Fprintln(t, "  CHANGE\tTOTAL GiB\tDIFFERENCE")
		for _, a := range e.Alternatives {
			fmt.Fprintf(t, "  %s\t%s\t%+.2f\n", a.Change, gib(a.Total), advisor.GiBOf(a.Delta))
		}
		t.Flush()
	}
	fmt.Fprintln(out, "\nAssumptions:")
	for _, a := range e.Assumptions {
		fmt.Fprintln(out, "  - "+a)
	}
	if m != nil {
		fmt.Fprintln(out, "\nSource: "+m.Source)
	}
}

func printOffers(cmd *cobra.Command, q string, res *suanli.OfferResult) {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "\nOffers (%s), cheapest first:\n", q)
	if len(res.Offers) == 0 {
		fmt.Fprintln(out, "  none match; try 'suanli search "+q+" --explain'")
		return
	}
	t := table(out)
	fmt.Fprintln(t, "  ID\tGPU\tN\tVRAM\t$/H\tWHERE")
	for _, o := range res.Offers {
		fmt.Fprintf(t, "  %d\t%s\t%d\t%.0f GB\t%s\t%s\n", o.ID, orDash(o.GPUName), o.NumGPUs, o.GPURAM, o.DPHTotal.Decimal(), orDash(where(o)))
	}
	t.Flush()
	fmt.Fprintf(out, "  %d of %d offers\n", len(res.Offers), res.Total)
}

func where(o *suanli.Offer) string {
	if o.Geolocation != "" {
		return o.Geolocation
	}
	return o.Country
}

func printModels(cmd *cobra.Command) error {
	ms := advisor.Models()
	if wantJSON(cmd) {
		return printJSON(cmd, ms)
	}
	out := cmd.OutOrStdout()
	t := table(out)
	fmt.Fprintln(t, "MODEL\tNAME\tKIND\tPARAMS\tTYPICAL\tPUBLISHED")
	for _, m := range ms {
		w := m.Typical
		typ := fmt.Sprintf("%s %s b%d", w.Task, w.Dtype, max(w.Batch, 1))
		pub := "-"
		if m.PublishedGB > 0 {
			pub = strconv.FormatFloat(m.PublishedGB, 'f', -1, 64) + " GB"
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Display, m.Kind, advisor.FormatParams(m.Params), typ, pub)
	}
	t.Flush()
	fmt.Fprintln(out, "\nSources: suanli advise vram --list --json")
	return nil
}

func newCPUOrGPUCmd(src OfferSource) *cobra.Command {
	var (
		kind, query string
		gpuCode     bool
		limit       int
		list        bool
	)
	cmd := &cobra.Command{
		Use:   "cpu-or-gpu",
		Short: "Say whether a many-core CPU offer does your work cheaper than a GPU",
		Long: `Prices the market's offers per unit of your kind of work (an hour of 32 busy
CPU cores) and compares the cheapest CPU-only offer with the cheapest GPU
offer. Work that does not use the GPU (web services, databases, dataframe
code) counts only a GPU offer's CPU cores, so a many-core CPU offer usually
wins; deep-learning training wins on the GPU by far.

Kinds: ` + kindNames() + `
The speedups are rules of thumb (--list shows them with sources). Use
--gpu-code when your code runs on GPUs where the kind's usual software does
not (RAPIDS for dataframes, a CUDA-ported simulation).`,
		Example: `  suanli advise cpu-or-gpu --workload web-service
  suanli advise cpu-or-gpu --workload feature-engineering --gpu-code
  suanli advise cpu-or-gpu --workload rendering --query 'reliability>0.95' --json
  suanli advise cpu-or-gpu --list`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if list {
				return printKinds(cmd)
			}
			if kind == "" {
				return suanli.FieldErrorf("workload", "say what runs: --workload with one of %s", kindNames())
			}
			p, err := advisor.ParseWorkloadKind(kind)
			if err != nil {
				return err
			}
			res, err := search(cmd, src, suanli.OfferQuery{Query: query, Order: "dph", Limit: limit})
			if err != nil {
				return err
			}
			a := advisor.AdviseCPUOrGPU(p, res.Offers, gpuCode)
			if wantJSON(cmd) {
				return printJSON(cmd, a)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s: %d offers priced per unit (an hour of %d busy cores).\n\n", p.Description, a.Considered, advisor.ReferenceCores)
			t := table(out)
			fmt.Fprintln(t, "\tOFFER\tMACHINE\t$/H\tUNITS/H\t$/UNIT")
			for _, row := range []struct {
				label string
				c     *advisor.OfferCost
			}{{"best CPU", a.BestCPU}, {"best GPU", a.BestGPU}} {
				if row.c == nil {
					fmt.Fprintf(t, "%s\t-\tno offer\t\t\t\n", row.label)
					continue
				}
				m := fmt.Sprintf("%d cores", row.c.CPUCores)
				if row.c.NumGPUs > 0 {
					m = fmt.Sprintf("%d× %s, %d cores", row.c.NumGPUs, row.c.GPUName, row.c.CPUCores)
				}
				fmt.Fprintf(t, "%s\t#%d\t%s\t%s\t%.2f\t%s\n", row.label, row.c.OfferID, m, row.c.DPH.Decimal(), row.c.UnitsPerH, row.c.CostPerUnit.Decimal())
			}
			t.Flush()
			fmt.Fprintf(out, "\n%s.\n\nWhen a CPU wins: %s\nSource: %s.\n", a.Explanation, p.CPUWinsWhen, p.Source)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kind, "workload", "", "kind of work: "+kindNames())
	f.StringVar(&query, "query", "", "offer query to narrow the offers, e.g. 'reliability>0.95'")
	f.BoolVar(&gpuCode, "gpu-code", false, "your code uses the GPU even where the kind's usual software does not")
	f.IntVar(&limit, "limit", 500, "price at most this many offers (cheapest first)")
	f.BoolVar(&list, "list", false, "list the workload kinds and their rules of thumb")
	return cmd
}

func kindNames() string {
	var n []string
	for _, p := range advisor.KindProfiles() {
		n = append(n, string(p.Kind))
	}
	return strings.Join(n, ", ")
}

func printKinds(cmd *cobra.Command) error {
	ps := advisor.KindProfiles()
	if wantJSON(cmd) {
		return printJSON(cmd, ps)
	}
	t := table(cmd.OutOrStdout())
	fmt.Fprintln(t, "KIND\tGPU SPEEDUP\tGPU BY DEFAULT\tCPU WINS WHEN")
	for _, p := range ps {
		sp := "none"
		if p.GPUSpeedup > 0 {
			sp = fmt.Sprintf("%g× per GPU", p.GPUSpeedup)
		}
		fmt.Fprintf(t, "%s\t%s\t%v\t%s\n", p.Kind, sp, p.GPUByDefault, p.CPUWinsWhen)
	}
	return t.Flush()
}

func newRentVsBuyCmd() *cobra.Command {
	var (
		hourly, price, util, kwh    string
		hours, instances, months, w int64
	)
	cmd := &cobra.Command{
		Use:   "rent-vs-buy",
		Short: "Say whether buying the hardware would pay off",
		Long: `Answers rent-or-buy twice.

The rule of thumb, computed exactly as stated:
  rent total  = hourly price × hours × instances
  device cost = purchase price / (36 months × monthly utilisation)
  consider buying when rent total > 2 × device cost
Hours are per month, so both sides are monthly. --months replaces the 36;
--utilization defaults to hours / 730 (the share of a month the hardware would
be busy).

Then the total cost of ownership: straight depreciation over --months plus
electricity (--power-watts of the whole purchase under load, for the same
hours, at --kwh-price), against renting; with the month in which the purchase
has paid for itself and a plain verdict. --hardware-price is the price of all
the hardware that would replace the rented instances.`,
		Example: `  suanli advise rent-vs-buy --hourly 2.5 --hours 300 --instances 1 --hardware-price 30000
  suanli advise rent-vs-buy --hourly 2.5 --hours 600 --hardware-price 30000 --months 36 --utilization 0.8 --power-watts 700 --kwh-price 0.15
  suanli advise rent-vs-buy --hourly 0.40 --hours 720 --hardware-price 2000 --power-watts 450 --kwh-price 0.30 --json`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			in := advisor.RentVsBuyInput{Hours: hours, Instances: instances, Months: months, PowerWatts: w}
			var err error
			for _, m := range []struct {
				flag, v string
				dst     *suanli.Money
			}{{"hourly", hourly, &in.Hourly}, {"hardware-price", price, &in.HardwarePrice}, {"kwh-price", kwh, &in.KWhPrice}} {
				if m.v == "" {
					continue
				}
				if *m.dst, err = suanli.ParseMoney(m.v); err != nil {
					return suanli.FieldErrorf(m.flag, "%v", err)
				}
			}
			if hourly == "" || price == "" || hours == 0 {
				return suanli.FieldErrorf("hourly", "give --hourly, --hours (per month) and --hardware-price, e.g. --hourly 2.5 --hours 300 --hardware-price 30000")
			}
			if util != "" {
				if in.UtilizationBP, err = advisor.ParseBP(util); err != nil {
					return suanli.FieldErrorf("utilization", "%v", err)
				}
				if in.UtilizationBP == 0 {
					return suanli.FieldErrorf("utilization", "0 means the hardware never runs: give a share above 0, e.g. 0.5")
				}
			}
			r, err := advisor.RentVsBuy(in)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd, r)
			}
			printRentVsBuy(cmd, r)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&hourly, "hourly", "", "rent per instance-hour, e.g. 2.5")
	f.Int64Var(&hours, "hours", 0, "hours each instance runs per month")
	f.Int64Var(&instances, "instances", 1, "instances rented at once")
	f.StringVar(&price, "hardware-price", "", "purchase price of all the hardware, e.g. 30000")
	f.Int64Var(&months, "months", advisor.RuleMonths, "device life in months")
	f.StringVar(&util, "utilization", "", "share of the month the hardware would be busy: 0.5 or 50% (default hours/730)")
	f.Int64Var(&w, "power-watts", 0, "power draw of the hardware under load, in watts")
	f.StringVar(&kwh, "kwh-price", "", "electricity price per kWh, e.g. 0.15")
	return cmd
}

func printRentVsBuy(cmd *cobra.Command, r *advisor.RentVsBuyResult) {
	out := cmd.OutOrStdout()
	rule, t := r.Rule, r.TCO
	fmt.Fprintln(out, "Rule of thumb")
	tw := table(out)
	fmt.Fprintf(tw, "  rent total (per month)\t%s\t= %s × %d h × %d\n", rule.RentTotal, r.Input.Hourly, r.Input.Hours, r.Input.Instances)
	fmt.Fprintf(tw, "  device cost\t%s\t= %s / (%d months × %s)\n", rule.DeviceCost, r.Input.HardwarePrice, r.Input.Months, advisor.FormatBP(r.Input.UtilizationBP))
	fmt.Fprintf(tw, "  2 × device cost\t%s\t\n", rule.Threshold)
	tw.Flush()
	if rule.ConsiderBuying {
		fmt.Fprintln(out, "  → rent total is above twice the device cost: consider buying.")
	} else {
		fmt.Fprintln(out, "  → rent total is not above twice the device cost: keep renting.")
	}
	if t.UtilizationNote != "" {
		fmt.Fprintln(out, "  ("+t.UtilizationNote+")")
	}
	fmt.Fprintf(out, "\nTotal cost of ownership over %d months\n", t.Months)
	tw = table(out)
	fmt.Fprintln(tw, "  \tPER MONTH\tOVER LIFE")
	fmt.Fprintf(tw, "  rent\t%s\t%s\n", t.RentMonthly, t.RentOverLife)
	fmt.Fprintf(tw, "  own: depreciation\t%s\t%s\n", t.Depreciation, r.Input.HardwarePrice)
	fmt.Fprintf(tw, "  own: power (%.0f kWh/month)\t%s\t%s\n", t.KWhMonthly, t.PowerMonthly, t.OwnOverLife-r.Input.HardwarePrice)
	fmt.Fprintf(tw, "  own: total\t%s\t%s\n", t.OwnMonthly, t.OwnOverLife)
	tw.Flush()
	be := "never"
	if t.BreakEvenMonth > 0 {
		be = "month " + strconv.FormatInt(t.BreakEvenMonth, 10)
	}
	fmt.Fprintf(out, "  break-even: %s\n\n%s\n(%s)\n", be, t.Verdict, t.NotIncluded)
}
