package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// billConfig is what `suanli-bench bill` runs.
type billConfig struct {
	Instances  int
	Accounts   int
	Hosts      int
	Hours      int
	Churn      int
	Sample     int
	Seed       uint64
	Dir        string
	Keep       bool
	JSON       bool
	Audit      bool
	CPUProfile string
}

// billSide is one store's run: the product's hour close or the baseline.
type billSide struct {
	Name    string          `json:"name"`
	Closes  []time.Duration `json:"closes_ns"`
	CPU     []time.Duration `json:"closes_cpu_ns"` // the process's CPU time (user+system) during each close
	Total   time.Duration   `json:"total_ns"`
	Warm    time.Duration   `json:"warm_ns,omitempty"`
	WarmCPU time.Duration   `json:"warm_cpu_ns,omitempty"`
	Meters  int             `json:"meters_loaded,omitempty"`
	SizeMB  float64         `json:"size_mb"`
	Written []int           `json:"postings_written"`
}

// billResult is what the benchmark reports (-json).
type billResult struct {
	Machine     string    `json:"machine"`
	NProc       int       `json:"nproc"`
	Command     string    `json:"command"`
	Instances   int       `json:"instances"`
	Accounts    int       `json:"accounts"`
	Providers   int       `json:"providers"`
	Hours       int       `json:"hours"`
	Churn       int       `json:"churn"`
	Lines       []int     `json:"lines"`
	Postings    []int     `json:"postings"`
	Product     billSide  `json:"product"`
	Baseline    billSide  `json:"baseline"`
	PostingsPS  float64   `json:"postings_per_s"`
	Ratio       float64   `json:"ratio"`
	Verified    []string  `json:"verified"`
	FixtureSecs float64   `json:"fixture_s"`
	At          time.Time `json:"at"`
}

func runBill(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg billConfig
	fs := flag.NewFlagSet("bill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Instances, "instances", 1_000_000, "running instances (two active meters each: compute and storage)")
	fs.IntVar(&cfg.Accounts, "accounts", 10_000, "renter accounts the instances belong to")
	fs.IntVar(&cfg.Hosts, "hosts", 1_000, "provider accounts, one machine each")
	fs.IntVar(&cfg.Hours, "hours", 2, "hour closes to run on each side")
	fs.IntVar(&cfg.Churn, "churn", 200, "status changes (stop, start, destroy) between closes, the same on both sides")
	fs.IntVar(&cfg.Sample, "sample", 300, "instances whose itemized charges are compared line by line (all are compared in total)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the generated marketplace and churn")
	fs.StringVar(&cfg.Dir, "dir", "", "directory for the databases; the generated store is kept there and reused by runs of the same shape and seed; delete it after a schema change (default: a temporary one, removed afterwards)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the settled databases too")
	fs.BoolVar(&cfg.JSON, "json", false, "print the result as JSON before the summary line")
	fs.BoolVar(&cfg.Audit, "audit", true, "also run the full ledger audit (CheckLedger) on both stores and compare")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the closes (both sides) to this file")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: suanli-bench bill [flags]

Settles -instances running instances in -hours hour closes, twice from the
same generated store: with the product's close (sqlstore.DB.Settle: the
in-memory book, one ledger transaction with a posting per account, the
derived sub-ledger) and with a batched row-per-charge settlement on the same
schema and durability (sqlstore.DB.SettleRows: a ledger row and its postings
per charge, a row update per meter). Both sides see the same status changes
between closes. Before any ratio it checks that both answer alike: every
ledger balance, every instance's settled total, the itemized charges of
-sample instances, accounts' charges and reports, providers' earnings,
ledger totals. The last line is "bill: N postings/s, ratio vs sqlite N.Nx".

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Instances < 1 || cfg.Accounts < 1 || cfg.Hosts < 1 || cfg.Hours < 1 || cfg.Churn < 0 || cfg.Sample < 0 {
		return fmt.Errorf("bill: -instances, -accounts, -hosts and -hours must be at least 1, -churn and -sample not negative")
	}
	res := &billResult{Machine: cpuModel(), NProc: runtime.NumCPU(), Command: "go run ./cmd/suanli-bench bill " + strings.Join(args, " "),
		Instances: cfg.Instances, Accounts: cfg.Accounts, Providers: cfg.Hosts, Hours: cfg.Hours, Churn: cfg.Churn, At: time.Now().UTC()}
	res.Command = strings.TrimSpace(res.Command)
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "suanli-bench-bill-")
		if err != nil {
			return err
		}
		dir = d
		if !cfg.Keep {
			defer os.RemoveAll(d)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out := func(format string, a ...any) { fmt.Fprintf(stdout, "bill: "+format+"\n", a...) }
	out("machine: %d × %s (nproc %d), %s %s/%s, load average %s", runtime.NumCPU(), res.Machine, runtime.NumCPU(), runtime.Version(), runtime.GOOS,
		runtime.GOARCH, loadAverage())

	// With -dir the generated store is kept and reused by later runs with
	// the same shape and seed.
	fixture := filepath.Join(dir, fmt.Sprintf("fixture-%d-%d-%d-%d.db", cfg.Instances, cfg.Accounts, cfg.Hosts, cfg.Seed))
	if _, err := os.Stat(fixture); err == nil && cfg.Dir != "" {
		out("fixture: %d running instances (%d active meters), %d renters, %d providers, seed %d, reused from %s",
			cfg.Instances, 2*cfg.Instances, cfg.Accounts, cfg.Hosts, cfg.Seed, fixture)
	} else {
		for _, suffix := range []string{".tmp", ".tmp-wal", ".tmp-shm"} {
			os.Remove(fixture + suffix) // a run that was stopped half way
		}
		start := time.Now()
		if err := writeBillFixture(ctx, fixture+".tmp", cfg, stderr); err != nil {
			return err
		}
		if err := os.Rename(fixture+".tmp", fixture); err != nil {
			return err
		}
		res.FixtureSecs = time.Since(start).Seconds()
		out("fixture: %d running instances (%d active meters), %d renters, %d providers, seed %d, written in %.1f s",
			cfg.Instances, 2*cfg.Instances, cfg.Accounts, cfg.Hosts, cfg.Seed, res.FixtureSecs)
	}
	paths := map[string]string{"close": filepath.Join(dir, "close.db"), "rows": filepath.Join(dir, "rows.db")}
	for _, p := range paths {
		if err := copyFile(fixture, p); err != nil {
			return err
		}
	}
	if !cfg.Keep {
		for _, p := range paths {
			defer os.Remove(p)
		}
	}
	plan := churnPlan(cfg)
	stopProfile, err := startCPUProfile(cfg.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()

	// The product: warm the book as the server does at start, then close.
	prod, err := sqlstore.Open(ctx, paths["close"])
	if err != nil {
		return err
	}
	defer prod.Close()
	res.Product.Name = "close"
	start, cpu := time.Now(), cpuTime()
	if res.Product.Meters, err = prod.WarmBook(ctx); err != nil {
		return err
	}
	res.Product.Warm, res.Product.WarmCPU = time.Since(start), cpuTime()-cpu
	out("product: book rebuilt from the store in %.2f s (cpu %.2f s, %d active meters), as the server does at start; closes follow",
		res.Product.Warm.Seconds(), res.Product.WarmCPU.Seconds(), res.Product.Meters)
	closes := make([]*sqlstore.BookClose, cfg.Hours)
	for h := 1; h <= cfg.Hours; h++ {
		if err := applyChurn(ctx, prod, plan[h-1]); err != nil {
			return err
		}
		at := billT0.Add(time.Duration(h) * time.Hour)
		if err := heartbeats(ctx, prod, at); err != nil {
			return err
		}
		start, cpu := time.Now(), cpuTime()
		c, err := prod.CloseBooks(ctx, at)
		if err != nil {
			return err
		}
		d := time.Since(start)
		closes[h-1] = c
		res.Product.Closes, res.Product.Total = append(res.Product.Closes, d), res.Product.Total+d
		res.Product.CPU = append(res.Product.CPU, cpuTime()-cpu)
		res.Product.Written = append(res.Product.Written, c.Written)
		res.Lines, res.Postings = append(res.Lines, c.Lines), append(res.Postings, c.Legs)
		fmt.Fprintf(stderr, "product: close %d: %.3f s\n", h, d.Seconds())
	}

	// The baseline: the same churn, settled row by row.
	base, err := sqlstore.Open(ctx, paths["rows"])
	if err != nil {
		return err
	}
	defer base.Close()
	// The baseline gets a 1 GiB page cache (the product runs with SQLite's
	// default): row per charge should not lose to page spills.
	if _, err := base.SQL().ExecContext(ctx, `PRAGMA cache_size = -1048576`); err != nil {
		return err
	}
	res.Baseline.Name = "sqlite"
	for h := 1; h <= cfg.Hours; h++ {
		if err := applyChurn(ctx, base, plan[h-1]); err != nil {
			return err
		}
		at := billT0.Add(time.Duration(h) * time.Hour)
		if err := heartbeats(ctx, base, at); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "sqlite: close %d (row per charge)…", h)
		start, cpu := time.Now(), cpuTime()
		if _, err := base.SettleRows(ctx, at); err != nil {
			return err
		}
		d := time.Since(start)
		res.Baseline.Closes, res.Baseline.Total = append(res.Baseline.Closes, d), res.Baseline.Total+d
		res.Baseline.CPU = append(res.Baseline.CPU, cpuTime()-cpu)
		res.Baseline.Written = append(res.Baseline.Written, res.Postings[h-1])
		fmt.Fprintf(stderr, " %.3f s\n", d.Seconds())
	}
	for h := range cfg.Hours {
		c := closes[h]
		out("close %d at T0+%dh: %d meters, %d lines, %d postings (%d written by the close), %s charged: product %.3f s (cpu %.3f s), sqlite %.3f s (cpu %.3f s)",
			h+1, h+1, c.Meters, c.Lines, c.Legs, c.Written, c.Amount, res.Product.Closes[h].Seconds(), res.Product.CPU[h].Seconds(),
			res.Baseline.Closes[h].Seconds(), res.Baseline.CPU[h].Seconds())
	}

	if cfg.CPUProfile != "" {
		pprof.StopCPUProfile()
	}
	fmt.Fprintln(stderr, "verifying: both stores must answer alike")
	verified, err := verifyBill(ctx, cfg, prod, base)
	if err != nil {
		return err
	}
	res.Verified = verified
	out("verified identical: %s", strings.Join(verified, "; "))

	prod.Close()
	base.Close()
	res.Product.SizeMB, res.Baseline.SizeMB = fileMB(paths["close"]), fileMB(paths["rows"])
	out("store size after: product %.0f MB, sqlite %.0f MB", res.Product.SizeMB, res.Baseline.SizeMB)
	out("load average at the end: %s (other processes on the machine slow both sides' wall times; cpu times are this process's own)", loadAverage())
	legs := 0
	for _, n := range res.Postings {
		legs += n
	}
	res.PostingsPS = float64(legs) / res.Product.Total.Seconds()
	res.Ratio = res.Baseline.Total.Seconds() / res.Product.Total.Seconds()
	if cfg.JSON {
		b, _ := json.Marshal(res)
		fmt.Fprintln(stdout, string(b))
	}
	fmt.Fprintf(stdout, "bill: %.0f postings/s, ratio vs sqlite %.1fx\n", res.PostingsPS, res.Ratio)
	return nil
}

// churnOp is a status change between closes.
type churnOp struct {
	ID     int64
	Status string
	At     time.Time
}

// churnPlan decides, from the seed, the status changes of each hour: stops,
// restarts of stopped instances, and destroys.
func churnPlan(cfg billConfig) [][]churnOp {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xc4a2))
	status := map[int64]string{}
	plan := make([][]churnOp, cfg.Hours)
	for h := range cfg.Hours {
		begin := billT0.Add(time.Duration(h) * time.Hour)
		for range cfg.Churn {
			id := rng.Int64N(int64(cfg.Instances)) + 1
			cur := status[id]
			if cur == "" {
				cur = suanli.StatusRunning
			}
			next := suanli.StatusStopped
			switch {
			case cur == suanli.StatusDestroyed:
				continue
			case cur == suanli.StatusStopped:
				next = suanli.StatusRunning
			case rng.IntN(10) == 0:
				next = suanli.StatusDestroyed
			}
			status[id] = next
			plan[h] = append(plan[h], churnOp{ID: id, Status: next, At: begin.Add(time.Duration(rng.Int64N(int64(time.Hour))))})
		}
		slices.SortStableFunc(plan[h], func(a, b churnOp) int { return a.At.Compare(b.At) })
	}
	return plan
}

// heartbeats records what the agents' syncs would have by the close at at:
// every host beat within the last 10 s, except every 50th, silent since 20
// minutes into the first hour (its compute is billed to that heartbeat and
// no further).
func heartbeats(ctx context.Context, db *sqlstore.DB, at time.Time) error {
	_, err := db.SQL().ExecContext(ctx, `UPDATE machines SET last_heartbeat = CASE WHEN id % 50 = 0 THEN ? ELSE ? - (id * 7919) % 10000000 END`,
		billT0.Add(20*time.Minute).UnixMicro(), at.UnixMicro())
	return err
}

func applyChurn(ctx context.Context, db *sqlstore.DB, ops []churnOp) error {
	for _, op := range ops {
		if _, err := db.UpdateInstance(ctx, op.ID, op.At, op.At, func(i *suanli.Instance) error {
			i.Status = op.Status
			return nil
		}); err != nil {
			return fmt.Errorf("churn: instance %d → %s: %w", op.ID, op.Status, err)
		}
	}
	return nil
}

// verifyBill checks that the product and the baseline answer every read
// alike, and returns what it compared.
func verifyBill(ctx context.Context, cfg billConfig, prod, base *sqlstore.DB) ([]string, error) {
	var done []string
	same := func(what string, read func(db *sqlstore.DB) (any, error)) error {
		a, err := read(prod)
		if err != nil {
			return fmt.Errorf("verify %s on the product: %w", what, err)
		}
		b, err := read(base)
		if err != nil {
			return fmt.Errorf("verify %s on the baseline: %w", what, err)
		}
		if d := cmp.Diff(b, a); d != "" {
			if len(d) > 4000 {
				d = d[:4000] + "…"
			}
			return fmt.Errorf("verify %s: the product and the baseline differ (-sqlite +product):\n%s", what, d)
		}
		return nil
	}
	balances := 0
	if err := same("ledger balances", func(db *sqlstore.DB) (any, error) {
		rows, err := db.SQL().QueryContext(ctx, `SELECT account, balance FROM ledger_balances ORDER BY account`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		m := map[string]int64{}
		for rows.Next() {
			var a string
			var v int64
			if err := rows.Scan(&a, &v); err != nil {
				return nil, err
			}
			m[a] = v
		}
		balances = len(m)
		return m, rows.Err()
	}); err != nil {
		return nil, err
	}
	done = append(done, fmt.Sprintf("%d ledger balances", balances))
	var settled map[int64]suanli.Money
	if err := same("settled per instance", func(db *sqlstore.DB) (any, error) {
		m, err := db.SettledByInstance(ctx)
		settled = m
		return m, err
	}); err != nil {
		return nil, err
	}
	var total suanli.Money
	for _, v := range settled {
		total += v
	}
	done = append(done, fmt.Sprintf("%d instances' settled totals (%s)", len(settled), total))
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5a3))
	noIDs := func(s *suanli.ChargeSummary, err error) (any, error) {
		if err != nil {
			return nil, err
		}
		for _, c := range s.Charges {
			c.ID = 0 // a close's lines carry its transaction's id; the baseline has one per line
		}
		return s, nil
	}
	lines := 0
	for range min(cfg.Sample, cfg.Instances) {
		id := rng.Int64N(int64(cfg.Instances)) + 1
		if err := same(fmt.Sprintf("charges of instance %d", id), func(db *sqlstore.DB) (any, error) {
			s, err := db.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &id, Limit: 10_000})
			if err == nil && db == prod {
				lines += len(s.Charges)
			}
			return noIDs(s, err)
		}); err != nil {
			return nil, err
		}
	}
	done = append(done, fmt.Sprintf("%d instances' itemized charges (%d lines)", min(cfg.Sample, cfg.Instances), lines))
	from, to := billT0.Add(-2*time.Hour), billT0.Add(time.Duration(cfg.Hours+1)*time.Hour)
	nAcct := min(20, cfg.Accounts)
	for range nAcct {
		id := rng.Int64N(int64(cfg.Accounts)) + 1
		if err := same(fmt.Sprintf("charges of account %d", id), func(db *sqlstore.DB) (any, error) {
			return noIDs(db.FindCharges(ctx, suanli.ChargeFilter{AccountID: &id, Limit: 50, Offset: rng.IntN(3) * 0}))
		}); err != nil {
			return nil, err
		}
		if err := same(fmt.Sprintf("charge rows (invoices, reports, budgets) of account %d", id), func(db *sqlstore.DB) (any, error) {
			rows, err := db.ChargeRows(ctx, id, from, to)
			for i := range rows {
				rows[i].TxnID = 0
			}
			return rows, err
		}); err != nil {
			return nil, err
		}
	}
	done = append(done, fmt.Sprintf("%d accounts' charges and charge rows", nAcct))
	nHost := min(20, cfg.Hosts)
	for range nHost {
		id := int64(cfg.Accounts) + rng.Int64N(int64(cfg.Hosts)) + 1
		if err := same(fmt.Sprintf("earnings of provider %d", id), func(db *sqlstore.DB) (any, error) {
			return db.EarningsByMachine(ctx, id, from, to)
		}); err != nil {
			return nil, err
		}
	}
	done = append(done, fmt.Sprintf("%d providers' earnings by machine", nHost))
	if err := same("ledger stats", func(db *sqlstore.DB) (any, error) { return db.Stats(ctx) }); err != nil {
		return nil, err
	}
	if cfg.Audit {
		fmt.Fprintln(os.Stderr, "verifying: full ledger audit on both stores")
		if err := same("ledger audit", func(db *sqlstore.DB) (any, error) {
			c, err := db.CheckLedger(ctx)
			if err != nil {
				return nil, err
			}
			if c.PostingSum != 0 || c.BalanceSum != 0 || len(c.Mismatched) > 0 || len(c.UnbalancedTxn) > 0 || len(c.SubLedger) > 0 {
				return nil, fmt.Errorf("the ledger does not balance: %+v", c)
			}
			return c, nil
		}); err != nil {
			return nil, err
		}
		done = append(done, "ledger audit (postings, balances, charge total, sub-ledger)")
	} else {
		done = append(done, "ledger stats")
	}
	return done, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func fileMB(path string) float64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return float64(st.Size()) / (1 << 20)
}

// loadAverage reads the 1, 5 and 15 minute load averages ("?" elsewhere).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
