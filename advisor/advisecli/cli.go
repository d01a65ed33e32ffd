package advisecli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
)

// OfferSource returns the service that answers offer searches, built when a
// command first needs it (so that commands which need no server, such as
// `advise rent-vs-buy`, never dial one).
type OfferSource func(context.Context) (suanli.OfferService, error)

// Commands returns the advisor's top-level commands for the suanli CLI:
// advise (vram, cpu-or-gpu, rent-vs-buy), compare and catalog (import, ls).
// offers is called only by the commands that search the market (advise vram
// --search, advise cpu-or-gpu, compare). The imported catalog lives in
// $SUANLI_HOME/catalog.json (the root's --home flag when it has one, else
// SUANLI_HOME, else ~/.suanli).
func Commands(offers func(context.Context) (suanli.OfferService, error)) []*cobra.Command {
	src := OfferSource(offers)
	return []*cobra.Command{newAdviseCmd(src), newCompareCmd(src), newCatalogCmd()}
}

// addJSON gives cmd (and, being persistent, its subcommands) --json.
func addJSON(cmd *cobra.Command) {
	cmd.PersistentFlags().Bool("json", false, "print JSON instead of a table")
}

func wantJSON(cmd *cobra.Command) bool {
	f := cmd.Flag("json")
	return f != nil && f.Value.String() == "true"
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// search runs one offer search through the OfferSource.
func search(cmd *cobra.Command, src OfferSource, q suanli.OfferQuery) (*suanli.OfferResult, error) {
	if src == nil {
		return nil, suanli.Errorf(suanli.EUNAVAILABLE, "no marketplace to search: this build has no offer service")
	}
	svc, err := src(cmd.Context())
	if err != nil {
		return nil, err
	}
	return svc.SearchOffers(cmd.Context(), q)
}

// homeDir is where the advisor keeps its files: the root command's --home
// flag when the CLI has one, else $SUANLI_HOME, else ~/.suanli.
func homeDir(cmd *cobra.Command) (string, error) {
	if f := cmd.Flag("home"); f != nil && f.Value.String() != "" {
		return f.Value.String(), nil
	}
	if h := os.Getenv("SUANLI_HOME"); h != "" {
		return h, nil
	}
	dir, err := os.UserHomeDir()
	if err != nil {
		return "", suanli.Errorf(suanli.EINVALID, "no home directory to keep the catalog in: set SUANLI_HOME")
	}
	return filepath.Join(dir, ".suanli"), nil
}

// CatalogFile is the imported catalog's file name in the Suanli home.
const CatalogFile = "catalog.json"

// storedCatalog is catalog.json: the imported rows and a record of each
// import.
type storedCatalog struct {
	Rows    []advisor.CatalogRow `json:"rows"`
	Imports []importRecord       `json:"imports"`
}

// importRecord says where a provider's rows came from and when.
type importRecord struct {
	Provider string `json:"provider"`
	File     string `json:"file"`
	Date     string `json:"date"`
	Rows     int    `json:"rows"`
	Skipped  int    `json:"skipped"`
}

func catalogPath(cmd *cobra.Command) (string, error) {
	h, err := homeDir(cmd)
	if err != nil {
		return "", err
	}
	return filepath.Join(h, CatalogFile), nil
}

// loadCatalog reads the stored catalog; a missing file is an empty one.
func loadCatalog(path string) (*storedCatalog, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &storedCatalog{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the imported catalog: %w", err)
	}
	var c storedCatalog
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, suanli.Errorf(suanli.EINVALID, "%s is not a catalog (%v): move it away and import again", path, err)
	}
	return &c, nil
}

// saveCatalog writes the stored catalog atomically (temp file + rename).
func saveCatalog(path string, c *storedCatalog) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the catalog: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the catalog: %w", err)
	}
	return nil
}

// fullCatalog is the built-in catalog with the imported one merged over it.
func fullCatalog(cmd *cobra.Command) ([]advisor.CatalogRow, error) {
	h, err := homeDir(cmd)
	if err != nil {
		return nil, err
	}
	return LoadCatalog(h)
}

// LoadCatalog returns the catalog `suanli compare` uses: the built-in one
// with the rows imported into home (home/catalog.json) merged over it. A
// home without imports gives the built-in catalog. The web console reads
// it through this, so that both compare with the same prices.
func LoadCatalog(home string) ([]advisor.CatalogRow, error) {
	c, err := loadCatalog(filepath.Join(home, CatalogFile))
	if err != nil {
		return nil, err
	}
	return advisor.MergeCatalog(advisor.BuiltinCatalog(), c.Rows), nil
}

func gib(b int64) string { return fmt.Sprintf("%.2f", advisor.GiBOf(b)) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
