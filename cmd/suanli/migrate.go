package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// migrateSummary is `suanli migrate --json`'s output.
type migrateSummary struct {
	From     string                 `json:"from"`
	To       string                 `json:"to"` // without its password
	Verified bool                   `json:"verified"`
	Tables   []sqlstore.TableCopy   `json:"tables"`
	Rows     int64                  `json:"rows"`
	Ledger   *sqlstore.LedgerTotals `json:"ledger,omitempty"`
	Problems []string               `json:"problems,omitempty"`
	Seconds  float64                `json:"seconds"`
	Error    string                 `json:"error,omitempty"`
}

func newMigrateCmd(a *app) *cobra.Command {
	var from, to string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "migrate --from sqlite:PATH --to postgres://…",
		Short: "Move a marketplace's database to another (SQLite to PostgreSQL), verified",
		Long: `Copy every table of a marketplace's database into an empty one, keeping
every id, and verify the copy before saying done: each table's row count
and the ledger's totals (per ledger account: the sum of its postings and
its balance) must match the source, and the copied ledger must balance.
The target is written in one transaction that commits only after it
verifies: on any difference nothing is written and the problems are listed.

--from and --to each take sqlite:PATH or a postgres:// (postgresql://) URL;
a PostgreSQL target's tables are made in the schema its search_path names
(?search_path=SCHEMA, default public). The target must be empty. Stop the
server using the source first (the copy holds the source's write lock);
pending schema migrations are applied to both sides before the copy. Then
start the server on the target:  suanli server --db postgres://…`,
		Example: `  suanli migrate --from sqlite:$HOME/.suanli/suanli.db --to 'postgres://suanli:secret@db:5432/suanli?sslmode=require'
  suanli migrate --from sqlite:market.db --to postgres://… --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			out := cmd.OutOrStdout()
			progress := out // progress lines; with --json they go to stderr
			if jsonOut {
				progress = cmd.ErrOrStderr()
			}
			sum := &migrateSummary{From: from, To: sqlstore.RedactDSN(to)}
			err := runMigrate(cmd, from, to, progress, sum)
			sum.Seconds = time.Since(start).Seconds()
			if jsonOut {
				if err != nil {
					sum.Error = errorText(err)
				}
				if perr := a.printJSON(cmd, sum); perr != nil {
					return perr
				}
				return err
			}
			if err != nil {
				return err
			}
			l := sum.Ledger
			fmt.Fprintf(out, "verified: %d tables, %d rows, row counts match\n", len(sum.Tables), sum.Rows)
			fmt.Fprintf(out, "verified: ledger of %d transactions and %d postings over %d accounts matches, account by account, and balances\n", l.Txns, l.Postings, l.Accounts)
			fmt.Fprintf(out, "          credit granted %s = renter balances %s + host earnings %s + platform fees %s + other %s\n",
				l.Credit, l.Renters, l.Earnings, l.Fees, l.Credit-l.Renters-l.Earnings-l.Fees)
			fmt.Fprintf(out, "done in %s: start the server with --db %s\n", time.Since(start).Round(time.Millisecond), sum.To)
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "source database: sqlite:PATH or postgres://…")
	cmd.Flags().StringVar(&to, "to", "", "target database, empty: postgres://… or sqlite:PATH")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print a JSON summary (progress goes to stderr)")
	return cmd
}

// parseDB turns a --from/--to value into a store DSN: sqlite:PATH → PATH,
// postgres:// URLs as they are.
func parseDB(flag, v string) (string, error) {
	switch {
	case v == "":
		return "", suanli.FieldErrorf(flag, "missing: give sqlite:PATH or postgres://USER:PASS@HOST:PORT/DB")
	case sqlstore.IsPostgres(v):
		return v, nil
	case strings.HasPrefix(v, "sqlite:"):
		p := strings.TrimPrefix(strings.TrimPrefix(v, "sqlite:"), "//")
		if p == "" {
			return "", suanli.FieldErrorf(flag, "%q names no file: give sqlite:PATH", v)
		}
		return p, nil
	}
	return "", suanli.FieldErrorf(flag, "%q: give sqlite:PATH or postgres://USER:PASS@HOST:PORT/DB", v)
}

func runMigrate(cmd *cobra.Command, from, to string, progress io.Writer, sum *migrateSummary) error {
	ctx := cmd.Context()
	src, err := parseDB("from", from)
	if err != nil {
		return err
	}
	dst, err := parseDB("to", to)
	if err != nil {
		return err
	}
	if src == dst {
		return suanli.FieldErrorf("to", "is the source: give an empty database to copy into")
	}
	if !sqlstore.IsPostgres(src) {
		if _, err := os.Stat(src); err != nil {
			return suanli.FieldErrorf("from", "%s: %v", src, err)
		}
	}
	if !sqlstore.IsPostgres(dst) {
		if fi, err := os.Stat(dst); err == nil && fi.Size() > 0 {
			return suanli.FieldErrorf("to", "%s exists: give a new file", dst)
		}
	}
	fmt.Fprintf(progress, "opening %s\n", from)
	s, err := sqlstore.Open(ctx, src)
	if err != nil {
		return fmt.Errorf("open source: %w", err)
	}
	defer s.Close()
	fmt.Fprintf(progress, "opening %s\n", sqlstore.RedactDSN(to))
	d, err := sqlstore.Open(ctx, dst)
	if err != nil {
		return fmt.Errorf("open target: %w", err)
	}
	defer d.Close()
	rep, err := sqlstore.Copy(ctx, s, d, func(tc sqlstore.TableCopy) {
		if tc.Done {
			fmt.Fprintf(progress, "copied %-22s %9d rows\n", tc.Table, tc.Rows)
		} else {
			fmt.Fprintf(progress, "copying %-21s %9d of %d rows\n", tc.Table, tc.Rows, tc.Source)
		}
	})
	if rep != nil {
		sum.Tables, sum.Rows, sum.Ledger, sum.Problems = rep.Tables, rep.Rows, rep.Ledger, rep.Problems
	}
	if err != nil {
		if len(sum.Problems) > 0 {
			for _, p := range sum.Problems {
				fmt.Fprintf(progress, "problem: %s\n", p)
			}
		}
		return err
	}
	sum.Verified = true
	return nil
}
