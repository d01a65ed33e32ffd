package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// billT0 is the fixture's "now": every instance started running within
// the hour before it, and hour closes fall on the hours after it.
var billT0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// billCredit is what each renter starts with.
const billCredit = 100_000 * suanli.Micro

// writeBillFixture creates a store at path with the schema of the product
// (sqlstore's migrations) and fills it, with multi-row inserts, with what
// ApplyPlan writes for cfg.Instances running rentals: renters with credit,
// providers with one machine each, instances, and their four meters
// (compute and storage active, traffic idle). Rates, fees, disks, owners
// and start times come from cfg.Seed.
func writeBillFixture(ctx context.Context, path string, cfg billConfig, progress io.Writer) error {
	db, err := sqlstore.Open(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	// A big page cache, or SQLite spills this transaction's pages to the WAL
	// again and again.
	if _, err := db.SQL().ExecContext(ctx, `PRAGMA cache_size = -262144`); err != nil {
		return err
	}
	w := &bulk{db: db.SQL()}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xb111))
	created := billT0.Add(-24 * time.Hour).UnixMicro()

	if err := w.begin(ctx); err != nil {
		return err
	}
	// Accounts: renters 1..A, providers A+1..A+H.
	accounts := w.table(ctx, `INSERT INTO accounts (id, name, email, role, created_at) VALUES `, 5)
	for i := 1; i <= cfg.Accounts+cfg.Hosts; i++ {
		name := fmt.Sprintf("renter-%d", i)
		if i > cfg.Accounts {
			name = fmt.Sprintf("provider-%d", i-cfg.Accounts)
		}
		accounts.row(int64(i), name, "", suanli.RoleUser, created)
	}
	if err := accounts.flush(); err != nil {
		return err
	}
	// One machine per provider.
	machines := w.table(ctx, `INSERT INTO machines (id, owner_id, hardware, simulated, status, last_heartbeat, listing, created_at) VALUES `, 8)
	for h := 1; h <= cfg.Hosts; h++ {
		hw := suanli.Hardware{Hostname: fmt.Sprintf("gpu-%d", h), CPUArch: "amd64", CPUCores: 64, RAMMB: 512 << 10, DiskFreeGB: 8000}
		for g := 0; g < 8; g++ {
			hw.GPUs = append(hw.GPUs, suanli.GPU{Index: g, UUID: fmt.Sprintf("GPU-%d-%d", h, g), Name: "H100", MemoryMB: 81920})
		}
		listing := suanli.Listing{Listed: true, PriceGPU: 2_000_000, PriceDisk: 100_000, PriceInetUp: 10_000, PriceInetDown: 10_000}
		machines.row(int64(h), int64(cfg.Accounts+h), jsonString(hw), false, suanli.MachineOnline, billT0.UnixMicro(), jsonString(listing), created)
	}
	if err := machines.flush(); err != nil {
		return err
	}
	// Each renter's credit: a ledger transaction with its two postings.
	txns := w.table(ctx, `INSERT INTO ledger_txns (id, kind, account_id, instance_id, amount, from_us, to_us, quantity, memo, created_at) VALUES `, 10)
	postings := w.table(ctx, `INSERT INTO postings (txn_id, account, amount) VALUES `, 3)
	balances := w.table(ctx, `INSERT INTO ledger_balances (account, balance) VALUES `, 2)
	for r := 1; r <= cfg.Accounts; r++ {
		txns.row(int64(r), "credit", int64(r), 0, -int64(billCredit), created, created, "", "bench credit", created)
	}
	if err := txns.flush(); err != nil { // before the postings that refer to them
		return err
	}
	for r := 1; r <= cfg.Accounts; r++ {
		postings.row(int64(r), suanli.LedgerPlatformCredit, -int64(billCredit))
		postings.row(int64(r), suanli.LedgerBalance(int64(r)), int64(billCredit))
		balances.row(suanli.LedgerBalance(int64(r)), int64(billCredit))
	}
	balances.row(suanli.LedgerPlatformCredit, -int64(billCredit)*int64(cfg.Accounts))
	for _, t := range []*bulkTable{postings, balances} {
		if err := t.flush(); err != nil {
			return err
		}
	}
	// Instances and their meters, committed in slices.
	instances := w.table(ctx, `INSERT INTO instances (id, account_id, machine_id, host_id, label, image, cmd, env, disk_gb, gpu_name, gpu_count,
		gpu_indexes, cpu_cores, ram_mb, rental_type, bid, rates, simulated, status, status_message, desired, created_at, started_at, updated_at,
		version, project, tags, guards) VALUES `, 28)
	meters := w.table(ctx, `INSERT INTO meters (id, instance_id, account_id, host_id, kind, rate, period_us, fee_bp, active, since, remainder, close_id, dirty) VALUES `, 13)
	fees := []int64{0, 500, 1000, 1500, 2000}
	projects := []string{"", "train", "eval", "serve"}
	guards := jsonString(suanli.Guards{})
	start := time.Now()
	for i := 1; i <= cfg.Instances; i++ {
		renter := int64(rng.IntN(cfg.Accounts) + 1)
		machine := int64(rng.IntN(cfg.Hosts) + 1)
		host := int64(cfg.Accounts) + machine
		gpus := int64(1 << rng.IntN(4)) // 1, 2, 4 or 8
		disk := int64(10 + rng.IntN(500))
		rates := suanli.Rates{ComputePerHour: suanli.Money(gpus * (100_000 + rng.Int64N(3_900_000))), StoragePerMonth: suanli.Money(50_000 + rng.Int64N(150_000)),
			InetUpPerGB: 10_000, InetDownPerGB: 10_000, FeeBasisPoints: fees[rng.IntN(len(fees))]}
		since := billT0.Add(-time.Duration(rng.Int64N(int64(time.Hour)))).UnixMicro()
		idx := make([]int, gpus)
		for g := range idx {
			idx[g] = g
		}
		instances.row(int64(i), renter, machine, host, "", "pytorch/pytorch:2.5", "[]", "{}", disk, "H100", gpus, jsonString(idx), 0, 0,
			suanli.RentalOnDemand, 0, jsonString(rates), false, suanli.StatusRunning, "", suanli.DesiredRunning, since, since, since,
			2, projects[rng.IntN(len(projects))], `{"team":"t`+fmt.Sprint(renter%7)+`"}`, guards)
		id := int64(i-1) * 4
		meters.row(id+1, int64(i), renter, host, suanli.MeterCompute, int64(rates.ComputePerHour), suanli.MicrosPerHour, rates.FeeBasisPoints, true, since, 0, 0, false)
		meters.row(id+2, int64(i), renter, host, suanli.MeterStorage, int64(rates.StoragePerMonth)*disk, suanli.MicrosPerMonth, rates.FeeBasisPoints, true, since, 0, 0, false)
		meters.row(id+3, int64(i), renter, host, suanli.MeterInetUp, int64(rates.InetUpPerGB), 1_000_000_000, rates.FeeBasisPoints, false, since, 0, 0, false)
		meters.row(id+4, int64(i), renter, host, suanli.MeterInetDown, int64(rates.InetDownPerGB), 1_000_000_000, rates.FeeBasisPoints, false, since, 0, 0, false)
		if i%100_000 == 0 || i == cfg.Instances {
			for _, t := range []*bulkTable{instances, meters} {
				if err := t.flush(); err != nil {
					return err
				}
			}
			if err := w.commit(); err != nil {
				return err
			}
			fmt.Fprintf(progress, "\rfixture: %d/%d instances (%.0f/s)", i, cfg.Instances, float64(i)/time.Since(start).Seconds())
			if i < cfg.Instances {
				if err := w.begin(ctx); err != nil {
					return err
				}
			}
		}
	}
	fmt.Fprintln(progress)
	return w.err
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// bulk writes rows with multi-row INSERTs in one transaction at a time.
type bulk struct {
	db  *sql.DB
	tx  *sql.Tx
	err error
}

func (b *bulk) begin(ctx context.Context) error {
	b.tx, b.err = b.db.BeginTx(ctx, nil)
	return b.err
}

func (b *bulk) commit() error {
	if b.err != nil {
		b.tx.Rollback()
		return b.err
	}
	return b.tx.Commit()
}

// bulkTable buffers rows for one INSERT prefix and writes them in batches.
type bulkTable struct {
	b      *bulk
	ctx    context.Context
	prefix string
	cols   int
	args   []any
}

func (b *bulk) table(ctx context.Context, prefix string, cols int) *bulkTable {
	return &bulkTable{b: b, ctx: ctx, prefix: prefix, cols: cols}
}

// row buffers one row, writing a batch when the buffer holds enough rows
// to approach SQLite's 32766 bound variables.
func (t *bulkTable) row(vals ...any) {
	if len(vals) != t.cols {
		panic(fmt.Sprintf("bulk: %d values for %d columns", len(vals), t.cols))
	}
	t.args = append(t.args, vals...)
	if len(t.args)+t.cols > 32000 {
		if err := t.flush(); err != nil && t.b.err == nil {
			t.b.err = err
		}
	}
}

func (t *bulkTable) flush() error {
	if t.b.err != nil || len(t.args) == 0 {
		return t.b.err
	}
	n := len(t.args) / t.cols
	g := "(" + strings.TrimSuffix(strings.Repeat("?, ", t.cols), ", ") + ")"
	_, err := t.b.tx.ExecContext(t.ctx, t.prefix+strings.TrimSuffix(strings.Repeat(g+", ", n), ", "), t.args...)
	t.args = t.args[:0]
	if err != nil {
		t.b.err = fmt.Errorf("fixture: %w", err)
	}
	return t.b.err
}
