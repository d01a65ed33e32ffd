package advisecli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
)

func newCompareCmd(src OfferSource) *cobra.Command {
	var (
		limit int
		order string
	)
	cmd := &cobra.Command{
		Use:   "compare [QUERY...]",
		Short: "Compare offers with public-cloud GPU prices",
		Long: `Puts the market's GPU offers that match QUERY (the search query language)
next to public-cloud instances with the same GPU: price per GPU-hour, the
cheapest instance of each provider, and how much the offer saves (negative:
it costs more). Below, it lists how the price of the matched instance types
differs between regions.

GPUs are matched by normalised model name ("NVIDIA H100 80GB HBM3" = "H100
SXM"; an A100 is told 40GB from 80GB by its memory). When only the family is
known (an "H100" of unknown form), the match is marked "family".

Prices come from the built-in catalog (list prices with their date and
source; 'suanli catalog ls') merged with what 'suanli catalog import' loaded.`,
		Example: `  suanli compare gpu_name=H100_SXM
  suanli compare 'num_gpus>=1 dph<2' --limit 5
  suanli compare gpu_name=RTX_4090 --json`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			catalog, err := fullCatalog(cmd)
			if err != nil {
				return err
			}
			q := strings.Join(args, " ")
			res, err := search(cmd, src, suanli.OfferQuery{Query: q, Order: order, Limit: limit})
			if err != nil {
				return err
			}
			c := advisor.Compare(res.Offers, catalog, time.Now().UTC())
			if wantJSON(cmd) {
				return printJSON(cmd, c)
			}
			printComparison(cmd, q, c)
			return nil
		},
	}
	addJSON(cmd)
	cmd.Flags().IntVar(&limit, "limit", 10, "compare at most this many offers")
	cmd.Flags().StringVarP(&order, "order", "o", "dph", "order of the offers, as in search")
	return cmd
}

func printComparison(cmd *cobra.Command, q string, c *advisor.Comparison) {
	out := cmd.OutOrStdout()
	if len(c.Offers) == 0 {
		fmt.Fprintf(out, "No GPU offers match %q.\n", q)
		return
	}
	for i, oc := range c.Offers {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "Offer #%d: %d× %s at %s/GPU-h\n", oc.OfferID, oc.NumGPUs, orDash(oc.GPU), oc.PerGPUHour)
		if len(oc.Equivalents) == 0 {
			fmt.Fprintln(out, "  "+oc.Summary)
			continue
		}
		t := table(out)
		fmt.Fprintln(t, "  PROVIDER\tINSTANCE\tREGION\tGPUS\t$/GPU-H\tSAVINGS\tMATCH\tPRICE AS OF")
		for _, e := range oc.Equivalents {
			match := "exact"
			if !e.Exact {
				match = "family (" + e.GPU + ")"
			}
			fmt.Fprintf(t, "  %s\t%s\t%s\t%g\t%s\t%s\t%s\t%s\n", e.Provider, e.InstanceType, e.Region, e.GPUCount,
				e.PerGPUHour.Decimal(), advisor.FormatBP(e.SavingsBP), match, orDash(e.AsOf))
		}
		t.Flush()
		fmt.Fprintln(out, "  "+oc.Summary)
	}
	if len(c.Regions) > 0 {
		fmt.Fprintln(out, "\nRegion price differences:")
		t := table(out)
		fmt.Fprintln(t, "  PROVIDER\tINSTANCE\tGPU\tCHEAPEST\t\tDEAREST\t\tSPREAD")
		for _, r := range c.Regions {
			fmt.Fprintf(t, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t+%s\n", r.Provider, r.InstanceType, r.GPU, r.MinRegion, r.Min.Decimal(), r.MaxRegion, r.Max.Decimal(), advisor.FormatBP(r.SpreadBP))
		}
		t.Flush()
	}
}

func newCatalogCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Public-cloud GPU prices: import SkyPilot catalogs, list",
		Long: `The public-cloud price catalog that 'suanli compare' uses: a built-in table of
list prices (AWS, Azure, GCP, Alibaba Cloud, Lambda, RunPod, OCI; each row
with its source and date) and the rows imported from SkyPilot catalog files,
kept in $SUANLI_HOME/` + CatalogFile + `.`,
		Example: `  suanli catalog import skypilot-catalog/catalogs/v8/vast/vms.csv
  suanli catalog ls --gpu H100`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE:         func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	addJSON(cmd)
	cmd.AddCommand(newCatalogImportCmd(), newCatalogLsCmd())
	return cmd
}

func newCatalogImportCmd() *cobra.Command {
	var provider string
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Import a SkyPilot v8 catalog CSV (catalogs/v8/CLOUD/vms.csv)",
		Long: `Imports GPU instance prices from a SkyPilot catalog file (schema v8, as in
github.com/skypilot-org/skypilot-catalog, catalogs/v8/CLOUD/vms.csv). The
provider is taken from the file's folder (.../vast/vms.csv is "vast") unless
--provider names it. Rows without a GPU, without an on-demand price, or with
a malformed field are skipped, and the command says which and why.

Importing a provider again replaces its earlier rows; imported rows replace
built-in rows of the same provider, instance type and region. The result is
kept in $SUANLI_HOME/` + CatalogFile + `.`,
		Example: `  suanli catalog import ~/skypilot-catalog/catalogs/v8/vast/vms.csv
  suanli catalog import prices.csv --provider lambda --json`,
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			p := strings.ToLower(strings.TrimSpace(provider))
			if p == "" {
				p = advisor.ProviderFromPath(file)
			}
			if p == "" {
				return suanli.FieldErrorf("provider", "cannot tell the provider from %q: give --provider NAME (aws, lambda, ...)", file)
			}
			f, err := os.Open(file)
			if err != nil {
				return suanli.Errorf(suanli.EINVALID, "cannot open the catalog: %v", err)
			}
			defer f.Close()
			rows, skipped, err := advisor.ImportSkyPilot(f, p)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if len(rows) == 0 {
				return suanli.Errorf(suanli.EINVALID, "%s: no GPU rows to import (%d skipped)%s", file, len(skipped), skipSummary(skipped))
			}
			today := time.Now().UTC().Format(time.DateOnly)
			abs, _ := filepath.Abs(file)
			for i := range rows {
				rows[i].AsOf = today
				rows[i].Source = advisor.SkyPilotSource + ", " + abs
			}
			path, err := catalogPath(cmd)
			if err != nil {
				return err
			}
			stored, err := loadCatalog(path)
			if err != nil {
				return err
			}
			kept := stored.Rows[:0]
			for _, r := range stored.Rows {
				if r.Provider != p {
					kept = append(kept, r)
				}
			}
			stored.Rows = append(kept, rows...)
			imports := []importRecord{{Provider: p, File: abs, Date: today, Rows: len(rows), Skipped: len(skipped)}}
			for _, im := range stored.Imports {
				if im.Provider != p {
					imports = append(imports, im)
				}
			}
			stored.Imports = imports
			if err := saveCatalog(path, stored); err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd, struct {
					Provider    string         `json:"provider"`
					File        string         `json:"file"`
					Imported    int            `json:"imported"`
					Skipped     []advisor.Skip `json:"skipped"`
					Catalog     string         `json:"catalog"`
					CatalogRows int            `json:"catalog_rows"`
				}{p, abs, len(rows), append([]advisor.Skip{}, skipped...), path, len(stored.Rows)})
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Imported %d %s rows from %s; skipped %d.\n", len(rows), p, file, len(skipped))
			for _, s := range skipped {
				fmt.Fprintf(out, "  line %d %s: %s\n", s.Line, orDash(s.InstanceType), s.Reason)
			}
			var per []string
			for _, im := range stored.Imports {
				per = append(per, fmt.Sprintf("%s %d", im.Provider, im.Rows))
			}
			fmt.Fprintf(out, "The imported catalog (%s) now holds %d rows: %s.\n", path, len(stored.Rows), strings.Join(per, ", "))
			return nil
		},
	}
	cmd.Flags().StringVar(&provider, "provider", "", "provider name (default: the file's folder, e.g. vast)")
	return cmd
}

// skipSummary gives the first few skip reasons for an error message.
func skipSummary(skipped []advisor.Skip) string {
	if len(skipped) == 0 {
		return ""
	}
	var parts []string
	for i, s := range skipped {
		if i == 3 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("line %d: %s", s.Line, s.Reason))
	}
	return ": " + strings.Join(parts, "; ")
}

func newCatalogLsCmd() *cobra.Command {
	var provider, gpu string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the public-cloud GPU prices compare uses",
		Long: `Lists the catalog 'suanli compare' uses: the built-in rows merged with the
imported ones, by provider, GPU and price per GPU-hour. --gpu matches the
normalised GPU name (h100 matches H100 SXM, PCIe and NVL).`,
		Example: `  suanli catalog ls
  suanli catalog ls --provider lambda
  suanli catalog ls --gpu A100-80GB --json`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			rows, err := fullCatalog(cmd)
			if err != nil {
				return err
			}
			var want advisor.GPUKey
			if gpu != "" {
				want = advisor.NormalizeGPU(gpu, 0)
			}
			sel := []advisor.CatalogRow{}
			for _, r := range rows {
				if provider != "" && !strings.EqualFold(r.Provider, provider) {
					continue
				}
				if gpu != "" {
					if ok, _ := want.Match(r.Key()); !ok {
						continue
					}
				}
				sel = append(sel, r)
			}
			advisor.SortCatalog(sel)
			if wantJSON(cmd) {
				return printJSON(cmd, sel)
			}
			out := cmd.OutOrStdout()
			t := table(out)
			fmt.Fprintln(t, "PROVIDER\tINSTANCE\tGPU\tN\tVRAM\tVCPU\tRAM\tREGION\t$/H\t$/GPU-H\tAS OF")
			for _, r := range sel {
				fmt.Fprintf(t, "%s\t%s\t%s\t%g\t%.0f GB\t%g\t%.0f GB\t%s\t%s\t%s\t%s\n", r.Provider, r.InstanceType, r.GPU, r.GPUCount,
					r.GPUMemGiB, r.VCPUs, r.MemoryGiB, orDash(r.Region), r.Price.Decimal(), r.PerGPUHour().Decimal(), orDash(r.AsOf))
			}
			t.Flush()
			fmt.Fprintf(out, "%d rows\n", len(sel))
			return nil
		},
	}
	cmd.Flags().StringVar(&provider, "provider", "", "only this provider")
	cmd.Flags().StringVar(&gpu, "gpu", "", "only this GPU (normalised name, e.g. H100, A100-80GB, RTX_4090)")
	return cmd
}
