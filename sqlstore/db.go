package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
	_ "modernc.org/sqlite" // the "sqlite" driver
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Dialect is what differs between SQLite and PostgreSQL: the driver, the
// placeholder style and a few words of DDL. The SQL itself is written once,
// with ? placeholders.
type Dialect struct {
	Name   string // "sqlite" or "postgres"
	Driver string
	// Dollar placeholders ($1, $2) instead of ?.
	Dollar bool
	// DDL rewrites applied to migrations, old → new.
	DDL []string
}

// SQLite is the default dialect.
var SQLite = Dialect{Name: "sqlite", Driver: "sqlite"}

// Postgres is the PostgreSQL dialect (pgx's database/sql driver).
var Postgres = Dialect{Name: "postgres", Driver: "pgx", Dollar: true,
	DDL: []string{"INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY", "BLOB", "BYTEA"}}

// DB is the store. Its methods are safe for concurrent use; on SQLite all
// writes go through one connection, so transactions never see SQLITE_BUSY.
type DB struct {
	db      *sql.DB
	dialect Dialect
	path    string
	origin  string    // this handle on the change feed and in leases (changes.go)
	bill    billCache // the hour close's book and the close calendar (closes.go)
}

// Open opens (creating when needed) the database at dsn and applies the
// migrations. A dsn starting with postgres:// or postgresql:// selects
// PostgreSQL; anything else is a SQLite file path.
func Open(ctx context.Context, dsn string) (*DB, error) {
	d := SQLite
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
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
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d.Name, err)
	}
	s := &DB{db: db, dialect: d, path: dsn, origin: newOrigin()}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", d.Name, err)
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
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
func (s *DB) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		if _, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0]); err != nil {
			return fmt.Errorf("migration %s: name must start with a number", name)
		}
		var n int
		if err := s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM schema_migrations WHERE name = ?`), base).Scan(&n); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if n > 0 {
			continue
		}
		body, _ := migrationFS.ReadFile(name)
		ddl := string(body)
		for i := 0; i+1 < len(s.dialect.DDL); i += 2 {
			ddl = strings.ReplaceAll(ddl, s.dialect.DDL[i], s.dialect.DDL[i+1])
		}
		err = s.withTx(ctx, func(tx *Tx) error {
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

// insert runs an INSERT … RETURNING id and returns the id.
func (t *Tx) insert(ctx context.Context, query string, args ...any) (int64, error) {
	var id int64
	err := t.queryRow(ctx, query+" RETURNING id", args...).Scan(&id)
	return id, err
}

// withTx runs fn in a transaction, committing when it returns nil.
func (s *DB) withTx(ctx context.Context, fn func(tx *Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(&Tx{tx: tx, s: s}); err != nil {
		return err
	}
	return tx.Commit()
}

// read runs fn in a transaction that is rolled back (a consistent read).
func (s *DB) read(ctx context.Context, fn func(tx *Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
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
