package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/suanli/suanli"
	_ "modernc.org/sqlite" // the "sqlite" driver
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Dialect is what differs between SQLite and PostgreSQL: the driver, the
// placeholder style, a few words of DDL and how a writing transaction gets
// the database to itself. The SQL itself is written once, with ?
// placeholders; code that must differ asks the dialect (Name) and says why.
type Dialect struct {
	Name   string // "sqlite" or "postgres"
	Driver string
	// Dollar placeholders ($1, $2) instead of ?.
	Dollar bool
	// DDL rewrites applied to migrations, old → new, in order. Each old is
	// a whole word or phrase of SQL (matched at word boundaries).
	DDL []string
	// WriteLock, when set, is run first in every writing transaction to
	// serialise writers across connections and processes (see withTx). The
	// one ? is the database's lock key (DB.lockKey). SQLite needs none: its
	// writing transactions begin IMMEDIATE on the one writer connection.
	WriteLock string
}

// SQLite is the default dialect.
var SQLite = Dialect{Name: "sqlite", Driver: "sqlite"}

// Postgres is the PostgreSQL dialect (pgx's database/sql driver).
//
// SQLite's INTEGER is 64 bits wide and PostgreSQL's 32: every INTEGER
// becomes BIGINT (money is int64 micro-units, times are unix microseconds),
// and an INTEGER PRIMARY KEY (SQLite's rowid) a BIGSERIAL. BLOB is BYTEA.
var Postgres = Dialect{Name: "postgres", Driver: "pgx", Dollar: true,
	DDL: []string{
		"INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY",
		"INTEGER", "BIGINT",
		"BLOB", "BYTEA",
	},
	WriteLock: `SELECT pg_advisory_xact_lock(?)`,
}

// PostgresMaxConns is how many connections one store opens to PostgreSQL
// at most.
const PostgresMaxConns = 20

// IsPostgres reports whether dsn names a PostgreSQL database
// (postgres:// or postgresql://) rather than a SQLite file.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// DB is the store. Its methods are safe for concurrent use. On SQLite all
// writes go through one connection, so transactions never see SQLITE_BUSY;
// on PostgreSQL writing transactions take one advisory lock per schema
// (withTx), so the rules that read then write (balances, capacity, closes)
// hold across connections and across server processes sharing the database.
type DB struct {
	db      *sql.DB
	dialect Dialect
	path    string
	origin  string    // this handle on the change feed and in leases (changes.go)
	lockKey int64     // the advisory lock writers take (PostgreSQL): a hash of database and schema
	bill    billCache // the hour close's book and the close calendar (closes.go)
	// beforeClose runs before every close (SetBeforeClose).
	beforeClose atomic.Pointer[func(context.Context)]
	// dead are origins of server processes known to have died (SetDead).
	dead atomic.Pointer[[]string]
}

// SetBeforeClose sets a function every hour close (CloseBooks, Settle)
// calls first: the control plane writes the heartbeats it holds in memory,
// so that compute is billed up to the last heartbeat heard. Nil removes it.
func (s *DB) SetBeforeClose(fn func(context.Context)) {
	if fn == nil {
		s.beforeClose.Store(nil)
		return
	}
	s.beforeClose.Store(&fn)
}

// Open opens (creating when needed) the database at dsn and applies the
// migrations. A dsn starting with postgres:// or postgresql:// selects
// PostgreSQL (its search_path, e.g. ?search_path=market2, picks the schema);
// anything else is a SQLite file path.
func Open(ctx context.Context, dsn string) (*DB, error) {
	s, err := open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

// open connects without migrating.
func open(ctx context.Context, dsn string) (*DB, error) {
	d := SQLite
	if IsPostgres(dsn) {
		d = Postgres
	}
	var db *sql.DB
	var err error
	if d.Name == "sqlite" {
		// synchronous=FULL: the ledger survives power loss (DESIGN §6).
		q := "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(ON)&_txlock=immediate"
		// The path is escaped: '#' or '?' in a directory name must not end it.
		db, err = sql.Open(d.Driver, "file:"+(&url.URL{Path: dsn}).EscapedPath()+q)
		if err == nil {
			db.SetMaxOpenConns(1)
		}
	} else {
		db, err = sql.Open(d.Driver, dsn)
		if err == nil {
			// Bounded, so that a burst of requests queues here rather than
			// exhausting the server's max_connections (100 by default,
			// shared by every replica); idle ones are kept for the next.
			db.SetMaxOpenConns(PostgresMaxConns)
			db.SetMaxIdleConns(8)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d.Name, err)
	}
	s := &DB{db: db, dialect: d, path: dsn, origin: newOrigin()}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s %s: %w", d.Name, RedactDSN(dsn), err)
	}
	if d.Name == "postgres" {
		var where string
		if err := db.QueryRowContext(ctx, `SELECT current_database() || '.' || COALESCE(current_schema(), '')`).Scan(&where); err != nil {
			db.Close()
			return nil, fmt.Errorf("open %s: %w", d.Name, err)
		}
		if strings.HasSuffix(where, ".") {
			db.Close()
			return nil, suanli.Errorf(suanli.EINVALID, "open %s: no schema to write in: the search_path names no existing schema (create it, or fix search_path in the DSN)", RedactDSN(dsn))
		}
		h := fnv.New64a()
		h.Write([]byte("suanli/" + where))
		s.lockKey = int64(h.Sum64())
	}
	return s, nil
}

var dsnPassword = regexp.MustCompile(`(://[^:/@]*:)[^@]*@`)

// RedactDSN returns dsn with its password replaced, for logs and messages.
func RedactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		// Not a URL Go parses (several hosts, say): cut user:password@.
		return dsnPassword.ReplaceAllString(dsn, "${1}xxxxx@")
	}
	if u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Close closes the database.
func (s *DB) Close() error { return s.db.Close() }

// Dialect returns the dialect in use.
func (s *DB) Dialect() Dialect { return s.dialect }

// SQL returns the underlying database handle, for benchmarks and tools.
func (s *DB) SQL() *sql.DB { return s.db }

// migrate applies the embedded migrations in file-name order. A migration
// is known by its whole file name (0002_budgets.sql), not only its number, so
// two changes that picked the same number on different branches both apply.
// Each migration is one transaction that holds the write lock, so servers
// starting together on one PostgreSQL database apply each exactly once.
func (s *DB) migrate(ctx context.Context) error {
	err := s.withTx(ctx, func(tx *Tx) error {
		_, err := tx.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	names, err := Migrations()
	if err != nil {
		return err
	}
	for _, base := range names {
		ddl, err := s.dialect.Migration(base)
		if err != nil {
			return err
		}
		err = s.withTx(ctx, func(tx *Tx) error {
			var n int
			if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE name = ?`, base).Scan(&n); err != nil || n > 0 {
				return err
			}
			for _, stmt := range strings.Split(ddl, ";") {
				if strings.TrimSpace(stmt) == "" {
					continue
				}
				if _, err := tx.tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("%s: %w", base, err)
				}
			}
			_, err := tx.exec(ctx, `INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)`, base, time.Now().UnixMicro())
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	return nil
}

// Migrations returns the names of the embedded migrations, in the order
// they apply.
func Migrations() ([]string, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for i, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		if _, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0]); err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number", name)
		}
		names[i] = base
	}
	return names, nil
}

// Migration returns the embedded migration name (0001_init.sql) with the
// dialect's DDL rewrites applied.
func (d Dialect) Migration(name string) (string, error) {
	body, err := migrationFS.ReadFile("migrations/" + name)
	if err != nil {
		return "", fmt.Errorf("migration %s: %w", name, err)
	}
	ddl := string(body)
	for i := 0; i+1 < len(d.DDL); i += 2 {
		ddl = regexp.MustCompile(`\b`+regexp.QuoteMeta(d.DDL[i])+`\b`).ReplaceAllLiteralString(ddl, d.DDL[i+1])
	}
	return ddl, nil
}

// q rewrites ? placeholders for the dialect.
func (s *DB) q(query string) string {
	if !s.dialect.Dollar {
		return query
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// Tx is a transaction with the dialect's placeholder rewriting.
type Tx struct {
	tx *sql.Tx
	s  *DB
}

func (t *Tx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.s.q(query), args...)
}

func (t *Tx) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.s.q(query), args...)
}

func (t *Tx) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.s.q(query), args...)
}

// collect scans every row with scan and closes rows. No rows is an empty
// slice, not nil (a JSON list, not null).
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanInt64(r scanner) (int64, error) {
	var v int64
	err := r.Scan(&v)
	return v, err
}

// int64s runs a query of one integer column and returns its values.
func (t *Tx) int64s(ctx context.Context, query string, args ...any) ([]int64, error) {
	rows, err := t.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanInt64)
}

// insert runs an INSERT … RETURNING id and returns the id.
func (t *Tx) insert(ctx context.Context, query string, args ...any) (int64, error) {
	var id int64
	err := t.queryRow(ctx, query+" RETURNING id", args...).Scan(&id)
	return id, err
}

// withTx runs fn in a transaction, committing when it returns nil.
//
// A writing transaction has the database to itself, on both dialects, so
// that the rules which read and then write (a balance before a charge, free
// GPUs before a placement, the latest close before the next) hold without
// each of them taking its own locks. On SQLite the transaction begins
// IMMEDIATE on the one writer connection. On PostgreSQL its first statement
// takes a transaction-scoped advisory lock, one per database and schema
// (Dialect.WriteLock), which also serialises writers in other server
// processes sharing the database; it is released at commit or rollback.
// Reads (read, and the single statements outside transactions) never wait
// for it. Its statements run at READ COMMITTED, so each one after the lock
// sees everything the previous writer committed.
func (s *DB) withTx(ctx context.Context, fn func(tx *Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	t := &Tx{tx: tx, s: s}
	if s.dialect.WriteLock != "" {
		if _, err := t.exec(ctx, s.dialect.WriteLock, s.lockKey); err != nil {
			return fmt.Errorf("write lock: %w", err)
		}
	}
	if err := fn(t); err != nil {
		return err
	}
	return tx.Commit()
}

// read runs fn in a transaction that is rolled back: a consistent read (on
// PostgreSQL a read-only REPEATABLE READ snapshot, which takes no lock).
func (s *DB) read(ctx context.Context, fn func(tx *Tx) error) error {
	var opts *sql.TxOptions
	if s.dialect.Name == "postgres" {
		opts = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	}
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(&Tx{tx: tx, s: s})
}

func us(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromUS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

func usPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromUSPtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromUS(v.Int64)
	return &t
}

func notFound(what string, id int64) error {
	return suanli.Errorf(suanli.ENOTFOUND, "%s %d not found", what, id)
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
