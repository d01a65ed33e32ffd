package main

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/suanli/suanli"
)

// sqliteBaseline is the same market in SQLite, as a store-backed search
// would run it: one table, an index per filtered field plus composites for
// the common filter+order pairs, WAL, mmap, ANALYZE, prepared statements.
// The derived fields are stored columns computed at the default storage
// size, and the per-viewer rentable is "rentable AND NOT simulated" (the
// benchmark searches as an anonymous renter).
type sqliteBaseline struct {
	db    *sql.DB // readers
	w     *sql.DB // the one writer connection
	cols  []string
	stmts map[string]*sql.Stmt
	upd   *sql.Stmt
}

// offerColumns lists the Offer struct fields by JSON name, in order.
func offerColumns() (names []string, index []int) {
	t := reflect.TypeFor[suanli.Offer]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
		index = append(index, i)
	}
	return names, index
}

func sqlType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Float64:
		return "REAL NOT NULL"
	case reflect.String:
		return "TEXT NOT NULL COLLATE NOCASE"
	default: // ints, money, bools, end_date as unix seconds
		return "INTEGER NOT NULL"
	}
}

// sqlIndexes are the secondary indexes: one per field the query mix filters
// or sorts on, and composites for its filter+order pairs.
var sqlIndexes = []string{
	"gpu_name", "num_gpus", "gpu_ram", "dph_total", "dlperf_per_dphtotal", "reliability", "verified", "country",
	"region", "inet_down", "datacenter", "cuda_vers", "disk_space", "min_bid", "rentable", "machine_id", "host_id",
	"rentable, simulated, dlperf_per_dphtotal", "rentable, simulated, dph_total", "gpu_name, num_gpus, dph_total",
	"gpu_name, country", "country, num_gpus, inet_down", "datacenter, gpu_name, cuda_vers", "num_gpus, min_bid",
}

func openSQLite(ctx context.Context, dir string, offers []*suanli.Offer, progress func(string, ...any)) (*sqliteBaseline, error) {
	path := filepath.Join(dir, "offers.db")
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)" +
		"&_pragma=mmap_size(8589934592)&_pragma=cache_size(-1048576)&_pragma=temp_store(MEMORY)"
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	names, idx := offerColumns()
	t := reflect.TypeFor[suanli.Offer]()
	var defs []string
	for i, n := range names {
		def := n + " " + sqlType(t.Field(idx[i]).Type)
		if n == "id" {
			def = "id INTEGER PRIMARY KEY"
		}
		defs = append(defs, def)
	}
	if _, err := w.ExecContext(ctx, "CREATE TABLE offers ("+strings.Join(defs, ", ")+")"); err != nil {
		return nil, fmt.Errorf("create table: %w", err)
	}
	start := time.Now()
	ins := "INSERT INTO offers VALUES (" + strings.TrimSuffix(strings.Repeat("?,", len(names)), ",") + ")"
	for lo := 0; lo < len(offers); lo += 20000 {
		tx, err := w.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		st, err := tx.PrepareContext(ctx, ins)
		if err != nil {
			tx.Rollback()
			return nil, err
		}
		for _, o := range offers[lo:min(lo+20000, len(offers))] {
			if _, err := st.ExecContext(ctx, rowValues(o)...); err != nil {
				tx.Rollback()
				return nil, fmt.Errorf("insert offer %d: %w", o.ID, err)
			}
		}
		if err := tx.Commit(); err != nil {
			return nil, err
		}
		progress("sqlite: inserted %d of %d offers", min(lo+20000, len(offers)), len(offers))
	}
	progress("sqlite: %d rows in %.1fs; creating %d indexes", len(offers), time.Since(start).Seconds(), len(sqlIndexes))
	start = time.Now()
	for i, cols := range sqlIndexes {
		q := fmt.Sprintf("CREATE INDEX offers_i%d ON offers (%s)", i, cols)
		if _, err := w.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	if _, err := w.ExecContext(ctx, "ANALYZE"); err != nil {
		return nil, err
	}
	progress("sqlite: indexes and ANALYZE in %.1fs", time.Since(start).Seconds())
	db, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	upd, err := w.PrepareContext(ctx, "UPDATE offers SET rentable=?, gpu_price=?, dph_base=?, min_bid=?, dph_total=?, dlperf_per_dphtotal=?, flops_per_dphtotal=? WHERE id=?")
	if err != nil {
		return nil, err
	}
	return &sqliteBaseline{db: db, w: w, cols: names, stmts: map[string]*sql.Stmt{}, upd: upd}, nil
}

// rowValues returns o's columns in table order.
func rowValues(o *suanli.Offer) []any {
	v := reflect.ValueOf(o).Elem()
	out := make([]any, v.NumField())
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			out[i] = 0
			if f.Bool() {
				out[i] = 1
			}
		case reflect.Int, reflect.Int64:
			out[i] = f.Int()
		case reflect.Float64:
			out[i] = f.Float()
		case reflect.String:
			out[i] = f.String()
		case reflect.Pointer: // end_date: open-ended is later than any date
			if f.IsNil() {
				out[i] = int64(math.MaxInt64)
			} else {
				out[i] = f.Interface().(*time.Time).Unix()
			}
		}
	}
	return out
}

// prepare prepares the statements of q (before any timing).
func (s *sqliteBaseline) prepare(ctx context.Context, q *benchQuery) error {
	for _, text := range []string{q.sqlSelect(s.cols), q.sqlCount()} {
		if _, ok := s.stmts[text]; ok {
			continue
		}
		st, err := s.db.PrepareContext(ctx, text)
		if err != nil {
			return fmt.Errorf("prepare %s: %w", text, err)
		}
		s.stmts[text] = st
	}
	return nil
}

// search runs q: the page of offers, then the count of all matches.
func (s *sqliteBaseline) search(ctx context.Context, q *benchQuery) (*suanli.OfferResult, error) {
	limit := q.q.Limit
	if limit == 0 {
		limit = 64
	}
	rows, err := s.stmts[q.sqlSelect(s.cols)].QueryContext(ctx, append(q.args[:len(q.args):len(q.args)], limit, q.q.Offset)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	res := &suanli.OfferResult{Offers: []*suanli.Offer{}}
	for rows.Next() {
		o := &suanli.Offer{}
		v := reflect.ValueOf(o).Elem()
		dest := make([]any, v.NumField())
		var end int64
		for i := range dest {
			if v.Field(i).Kind() == reflect.Pointer {
				dest[i] = &end
			} else {
				dest[i] = v.Field(i).Addr().Interface()
			}
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if end != math.MaxInt64 {
			t := time.Unix(end, 0).UTC()
			o.EndDate = &t
		}
		res.Offers = append(res.Offers, o)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := s.stmts[q.sqlCount()].QueryRowContext(ctx, q.args...).Scan(&res.Total); err != nil {
		return nil, err
	}
	return res, nil
}

// apply writes changed offers in one transaction.
func (s *sqliteBaseline) apply(ctx context.Context, changed []*suanli.Offer) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st := tx.StmtContext(ctx, s.upd)
	for _, o := range changed {
		if _, err := st.ExecContext(ctx, o.Rentable, int64(o.GPUPrice), int64(o.DPHBase), int64(o.MinBid), int64(o.DPHTotal), o.DLPerfPerDPH, o.FlopsPerDPH, o.ID); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (s *sqliteBaseline) close() {
	for _, st := range s.stmts {
		st.Close()
	}
	s.upd.Close()
	s.db.Close()
	s.w.Close()
}
