package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/suanli/suanli"
)

// TableCopy is one table's progress in Copy: Rows copied so far of the
// source's Source rows. Done is set once, when the table is complete.
type TableCopy struct {
	Table  string `json:"table"`
	Rows   int64  `json:"rows"`
	Source int64  `json:"source_rows"`
	Done   bool   `json:"-"`
}

// LedgerTotals are what a move must not change in the ledger: the number of
// transactions and postings, their sums, and per ledger account the sum of
// its postings and its cached balance.
type LedgerTotals struct {
	Txns       int64        `json:"txns"`
	TxnSum     suanli.Money `json:"txn_sum"`
	Postings   int64        `json:"postings"`
	PostingSum suanli.Money `json:"posting_sum"`     // 0 in a balanced ledger
	Accounts   int          `json:"accounts"`        // ledger accounts with postings or a balance
	Balances   suanli.Money `json:"balances"`        // sum of all cached balances: 0 in a balanced ledger
	Credit     suanli.Money `json:"credit"`          // what the platform has credited (minus its credit account)
	Renters    suanli.Money `json:"renter_balances"` // all acct:N:balance
	Earnings   suanli.Money `json:"host_earnings"`   // all acct:N:earnings
	Fees       suanli.Money `json:"platform_fees"`

	postings map[string]suanli.Money
	balances map[string]suanli.Money
}

// CopyReport is what Copy did and checked.
type CopyReport struct {
	Tables []TableCopy   `json:"tables"`
	Rows   int64         `json:"rows"`
	Ledger *LedgerTotals `json:"ledger"`
	// Problems lists every difference verification found; when it is not
	// empty nothing was written to the target.
	Problems []string `json:"problems,omitempty"`
}

// copyBatchParams bounds the placeholders of one multi-row insert (SQLite
// allows 32766, PostgreSQL 65535).
const copyBatchParams = 30000

// copyTamper, when set (tests), runs in the target's transaction after the
// rows are copied and before they are verified.
var copyTamper func(ctx context.Context, tx *Tx) error

// Copy moves a whole marketplace from src to dst, which must be empty (its
// migrations applied, no rows): every table (schema_migrations aside) in
// foreign-key order with its ids, then PostgreSQL's id sequences are moved
// past the highest id. The source is read in one transaction (on SQLite it
// holds the write lock: stop the server first, or its writes wait), and the
// target is written in one transaction that commits only after it verifies,
// against the source, every table's row count and the ledger's totals (per
// ledger account: postings and balance), and that the copied ledger
// balances. On any difference nothing is written: the report lists the
// problems and the error says so.
//
// progress, when not nil, is called as tables are copied. Errors: EINVALID
// when dst is not empty or its tables differ from src's; EINTERNAL when
// verification fails.
func Copy(ctx context.Context, src, dst *DB, progress func(TableCopy)) (*CopyReport, error) {
	rep := &CopyReport{}
	err := src.read(ctx, func(stx *Tx) error {
		tables, err := stx.copyOrder(ctx)
		if err != nil {
			return err
		}
		return dst.withTx(ctx, func(dtx *Tx) error {
			if err := dtx.mustBeEmpty(ctx, tables); err != nil {
				return err
			}
			// The migrations seeded the latest close; the source's replaces it.
			if _, err := dtx.exec(ctx, `DELETE FROM bill_state`); err != nil {
				return err
			}
			for _, t := range tables {
				tc, err := copyTable(ctx, stx, dtx, t, progress)
				if err != nil {
					return fmt.Errorf("copy %s: %w", t, err)
				}
				rep.Tables = append(rep.Tables, tc)
				rep.Rows += tc.Rows
			}
			if err := dtx.resetSequences(ctx, tables); err != nil {
				return err
			}
			if copyTamper != nil {
				if err := copyTamper(ctx, dtx); err != nil {
					return err
				}
			}
			rep.Problems, rep.Ledger, err = verifyCopy(ctx, stx, dtx, tables)
			if err != nil {
				return err
			}
			if len(rep.Problems) > 0 {
				return suanli.Errorf(suanli.EINTERNAL, "verification failed, nothing was written to the target: %s", strings.Join(rep.Problems, "; "))
			}
			return nil
		})
	})
	if err != nil {
		return rep, err
	}
	return rep, nil
}

// tables lists the store's tables, schema_migrations aside, by name.
func (tx *Tx) tables(ctx context.Context) ([]string, error) {
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`
	if tx.s.dialect.Name == "postgres" {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`
	}
	rows, err := tx.query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		if n != "schema_migrations" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, rows.Err()
}

// foreignKeys returns, per table, the tables its foreign keys reference.
func (tx *Tx) foreignKeys(ctx context.Context) (map[string][]string, error) {
	q := `SELECT m.name, p."table" FROM sqlite_master m JOIN pragma_foreign_key_list(m.name) p WHERE m.type = 'table'`
	if tx.s.dialect.Name == "postgres" {
		q = `SELECT a.relname, b.relname FROM pg_constraint c JOIN pg_class a ON a.oid = c.conrelid JOIN pg_class b ON b.oid = c.confrelid
			JOIN pg_namespace n ON n.oid = c.connamespace WHERE c.contype = 'f' AND n.nspname = current_schema()`
	}
	rows, err := tx.query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	deps := map[string][]string{}
	for rows.Next() {
		var from, to string
		if err := rows.Scan(&from, &to); err != nil {
			return nil, err
		}
		deps[from] = append(deps[from], to)
	}
	return deps, rows.Err()
}

// copyOrder returns the tables so that each comes after the tables its
// foreign keys reference (by name among equals).
func (tx *Tx) copyOrder(ctx context.Context) ([]string, error) {
	tables, err := tx.tables(ctx)
	if err != nil {
		return nil, err
	}
	deps, err := tx.foreignKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	placed := map[string]bool{}
	for len(out) < len(tables) {
		progressed := false
		for _, t := range tables {
			if placed[t] {
				continue
			}
			ready := true
			for _, d := range deps[t] {
				if d != t && !placed[d] && slices.Contains(tables, d) {
					ready = false
				}
			}
			if ready {
				out, placed[t], progressed = append(out, t), true, true
			}
		}
		if !progressed {
			return nil, fmt.Errorf("copy: the foreign keys among %v form a cycle", tables)
		}
	}
	return out, nil
}

// mustBeEmpty refuses a target that already holds rows, or whose tables
// differ from the source's. Its bill_state may hold the row its migrations
// seeded (no close yet).
func (tx *Tx) mustBeEmpty(ctx context.Context, tables []string) error {
	have, err := tx.tables(ctx)
	if err != nil {
		return err
	}
	if !slices.Equal(have, sortedCopy(tables)) {
		return suanli.Errorf(suanli.EINVALID, "target tables %v differ from the source's %v: upgrade the older side (start its server once) and try again", have, sortedCopy(tables))
	}
	for _, t := range tables {
		q := `SELECT COUNT(*) FROM ` + t
		if t == "bill_state" {
			q += ` WHERE NOT (id = 1 AND close_id = 0 AND through_us = 0)`
		}
		var n int64
		if err := tx.queryRow(ctx, q).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return suanli.Errorf(suanli.EINVALID, "target is not empty: table %s has %d rows; migrate into a new database or schema (e.g. add ?search_path=NEW_SCHEMA to the DSN after CREATE SCHEMA NEW_SCHEMA)", t, n)
		}
	}
	return nil
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// columns returns a table's columns and their database type names, as the
// transaction's database sees them.
func (tx *Tx) columns(ctx context.Context, table string) ([]string, []string, error) {
	rows, err := tx.query(ctx, `SELECT * FROM `+table+` LIMIT 0`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, nil, err
	}
	var names, types []string
	for _, c := range cts {
		names, types = append(names, c.Name()), append(types, strings.ToUpper(c.DatabaseTypeName()))
	}
	return names, types, rows.Err()
}

// copyTable copies one table's rows, ordered by its first column (the id
// or key), in multi-row inserts.
func copyTable(ctx context.Context, stx, dtx *Tx, table string, progress func(TableCopy)) (TableCopy, error) {
	tc := TableCopy{Table: table}
	cols, _, err := stx.columns(ctx, table)
	if err != nil {
		return tc, err
	}
	dcols, dtypes, err := dtx.columns(ctx, table)
	if err != nil {
		return tc, err
	}
	dtype := map[string]string{}
	for i, c := range dcols {
		dtype[c] = dtypes[i]
	}
	if !slices.Equal(sortedCopy(cols), sortedCopy(dcols)) {
		return tc, suanli.Errorf(suanli.EINVALID, "table %s: source columns %v, target columns %v: upgrade the older side and try again", table, cols, dcols)
	}
	if err := stx.queryRow(ctx, `SELECT COUNT(*) FROM `+table).Scan(&tc.Source); err != nil {
		return tc, err
	}
	rows, err := stx.query(ctx, `SELECT `+strings.Join(cols, ", ")+` FROM `+table+` ORDER BY `+cols[0])
	if err != nil {
		return tc, err
	}
	defer rows.Close()
	per := max(1, min(1000, copyBatchParams/len(cols)))
	insert := `INSERT INTO ` + table + ` (` + strings.Join(cols, ", ") + `) VALUES `
	batch := make([]any, 0, per*len(cols))
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n := len(batch) / len(cols)
		if _, err := dtx.exec(ctx, insert+values(n, len(cols)), batch...); err != nil {
			return err
		}
		tc.Rows += int64(n)
		batch = batch[:0]
		if progress != nil && tc.Rows%(int64(per)*50) < int64(n) {
			progress(tc)
		}
		return nil
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return tc, err
		}
		for i, v := range vals {
			cv, err := convertValue(v, dtype[cols[i]])
			if err != nil {
				return tc, fmt.Errorf("column %s: %w", cols[i], err)
			}
			batch = append(batch, cv)
		}
		if len(batch) == per*len(cols) {
			if err := flush(); err != nil {
				return tc, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return tc, err
	}
	if err := flush(); err != nil {
		return tc, err
	}
	tc.Done = true
	if progress != nil {
		progress(tc)
	}
	return tc, nil
}

// convertValue turns a value read from one database into what the other's
// column of type typ (its database type name) takes: SQLite keeps booleans
// as integers and may hand back text as bytes; PostgreSQL wants bool for
// BOOL, bytes for BYTEA and valid text for TEXT.
func convertValue(v any, typ string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch typ {
	case "BOOL", "BOOLEAN":
		switch x := v.(type) {
		case bool:
			return x, nil
		case int64:
			return x != 0, nil
		case string:
			return x == "1" || strings.EqualFold(x, "true"), nil
		}
		return nil, fmt.Errorf("%T %v is not a boolean", v, v)
	case "BYTEA", "BLOB":
		switch x := v.(type) {
		case string:
			return []byte(x), nil
		}
	case "TEXT", "VARCHAR":
		switch x := v.(type) {
		case []byte:
			return string(x), nil
		}
	case "INT8", "INT4", "BIGINT", "INTEGER":
		switch x := v.(type) {
		case bool:
			if x {
				return int64(1), nil
			}
			return int64(0), nil
		}
	}
	if b, ok := v.([]byte); ok {
		return slices.Clone(b), nil // the driver may reuse its buffer for the next row
	}
	return v, nil
}

// resetSequences moves each PostgreSQL id sequence past the highest id
// copied, so that the next row inserted without an id gets a new one.
func (tx *Tx) resetSequences(ctx context.Context, tables []string) error {
	if tx.s.dialect.Name != "postgres" {
		return nil
	}
	for _, t := range tables {
		// A table without an id column has no sequence (and asking would
		// abort the transaction).
		var seq sql.NullString
		if err := tx.queryRow(ctx, `SELECT pg_get_serial_sequence(table_name, column_name) FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = ? AND column_name = 'id'`, t).Scan(&seq); isNoRows(err) {
			continue
		} else if err != nil {
			return err
		}
		if !seq.Valid {
			continue
		}
		if _, err := tx.exec(ctx, `SELECT setval(?, COALESCE((SELECT MAX(id) FROM `+t+`), 0) + 1, false)`, seq.String); err != nil {
			return fmt.Errorf("reset %s: %w", seq.String, err)
		}
	}
	return nil
}

// ledgerTotals reads the ledger's totals in tx.
func (tx *Tx) ledgerTotals(ctx context.Context) (*LedgerTotals, error) {
	lt := &LedgerTotals{postings: map[string]suanli.Money{}, balances: map[string]suanli.Money{}}
	var txnSum int64
	if err := tx.queryRow(ctx, `SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM ledger_txns`).Scan(&lt.Txns, &txnSum); err != nil {
		return nil, err
	}
	lt.TxnSum = suanli.Money(txnSum)
	rows, err := tx.query(ctx, `SELECT account, COALESCE(SUM(amount), 0), COUNT(*) FROM postings GROUP BY account`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var a string
		var sum, n int64
		if err := rows.Scan(&a, &sum, &n); err != nil {
			rows.Close()
			return nil, err
		}
		lt.postings[a] = suanli.Money(sum)
		lt.PostingSum += suanli.Money(sum)
		lt.Postings += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = tx.query(ctx, `SELECT account, balance FROM ledger_balances`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var a string
		var b int64
		if err := rows.Scan(&a, &b); err != nil {
			return nil, err
		}
		lt.balances[a] = suanli.Money(b)
		lt.Balances += suanli.Money(b)
		switch {
		case a == suanli.LedgerPlatformCredit:
			lt.Credit -= suanli.Money(b)
		case a == suanli.LedgerPlatformFees:
			lt.Fees += suanli.Money(b)
		case strings.HasSuffix(a, ":earnings"):
			lt.Earnings += suanli.Money(b)
		case strings.HasSuffix(a, ":balance"):
			lt.Renters += suanli.Money(b)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for a := range lt.postings {
		seen[a] = true
	}
	for a := range lt.balances {
		seen[a] = true
	}
	lt.Accounts = len(seen)
	return lt, nil
}

// verifyCopy compares the target (dtx) with the source (stx): every
// table's row count, and the ledger's totals account by account; and checks
// that the copied ledger balances (each cached balance equals its
// postings). It returns the problems found and the target's totals.
func verifyCopy(ctx context.Context, stx, dtx *Tx, tables []string) ([]string, *LedgerTotals, error) {
	var problems []string
	for _, t := range tables {
		var a, b int64
		if err := stx.queryRow(ctx, `SELECT COUNT(*) FROM `+t).Scan(&a); err != nil {
			return nil, nil, err
		}
		if err := dtx.queryRow(ctx, `SELECT COUNT(*) FROM `+t).Scan(&b); err != nil {
			return nil, nil, err
		}
		if a != b {
			problems = append(problems, fmt.Sprintf("table %s: source has %d rows, target %d", t, a, b))
		}
	}
	sl, err := stx.ledgerTotals(ctx)
	if err != nil {
		return nil, nil, err
	}
	dl, err := dtx.ledgerTotals(ctx)
	if err != nil {
		return nil, nil, err
	}
	if sl.Txns != dl.Txns || sl.TxnSum != dl.TxnSum {
		problems = append(problems, fmt.Sprintf("ledger transactions: source %d summing to %d, target %d summing to %d", sl.Txns, sl.TxnSum, dl.Txns, dl.TxnSum))
	}
	if sl.Postings != dl.Postings {
		problems = append(problems, fmt.Sprintf("postings: source %d, target %d", sl.Postings, dl.Postings))
	}
	accounts := map[string]bool{}
	for _, m := range []map[string]suanli.Money{sl.postings, sl.balances, dl.postings, dl.balances} {
		for a := range m {
			accounts[a] = true
		}
	}
	var names []string
	for a := range accounts {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		if sl.postings[a] != dl.postings[a] {
			problems = append(problems, fmt.Sprintf("ledger account %s: source postings sum to %d, target %d", a, sl.postings[a], dl.postings[a]))
		}
		if sl.balances[a] != dl.balances[a] {
			problems = append(problems, fmt.Sprintf("ledger account %s: source balance %d, target %d", a, sl.balances[a], dl.balances[a]))
		}
		if dl.balances[a] != dl.postings[a] {
			where := "in the copy"
			if sl.balances[a] != sl.postings[a] {
				where = "in the source already: repair the source's ledger first"
			}
			problems = append(problems, fmt.Sprintf("ledger account %s: balance %d but its postings sum to %d, %s", a, dl.balances[a], dl.postings[a], where))
		}
	}
	if dl.PostingSum != 0 || dl.Balances != 0 {
		problems = append(problems, fmt.Sprintf("ledger: postings sum to %d and balances to %d, want 0", dl.PostingSum, dl.Balances))
	}
	return problems, dl, nil
}
