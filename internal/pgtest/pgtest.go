package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/suanli/suanli/internal/testreq"
)

// Env is the environment variable naming the test server: a PostgreSQL
// DSN of a database in which the tests may create and drop schemas.
const Env = "SUANLI_TEST_POSTGRES_DSN"

// prefix starts every schema this package makes; the rest of the name is
// the unix second it was made and a random part.
const prefix = "suanli_test_"

// staleAfter is how old a leftover test schema (from a test run that was
// killed before its cleanup) must be before the next run drops it.
const staleAfter = 6 * time.Hour

var (
	mu      sync.Mutex
	admin   *sql.DB // the connection to Env's database, shared by the process's tests
	swept   bool    // leftover schemas were dropped once
	lastDSN string  // the DSN admin was opened (or failed to open) for
	lastErr error   // why it failed: later tests skip at once instead of waiting again
)

// DSN returns the DSN of a new, empty schema on the test server: Env's DSN
// with search_path set to the schema, so that every connection opened
// with it (sqlstore.Open, a server process given --db) works in that schema
// alone. The schema and everything in it is dropped at the test's cleanup;
// close what uses it before then (cleanups run last-registered first).
func DSN(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv(Env)
	if base == "" {
		testreq.Missing(tb, "postgres", Env+" is not set: point it at a database the tests may create schemas in, e.g. "+
			Env+"=postgres://suanli:suanli@127.0.0.1:5432/suanli?sslmode=disable")
		return ""
	}
	db, err := connect(base)
	if err != nil {
		testreq.Missing(tb, "postgres", fmt.Sprintf("%s=%s does not answer (%v): start PostgreSQL or fix the DSN", Env, redact(base), err))
		return ""
	}
	name := prefix + strconv.FormatInt(time.Now().Unix(), 10) + "_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA `+name); err != nil {
		tb.Fatalf("pgtest: create schema %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, `DROP SCHEMA IF EXISTS `+name+` CASCADE`); err != nil {
			tb.Errorf("pgtest: drop schema %s: %v", name, err)
		}
	})
	dsn, err := WithSchema(base, name)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	// A test's data need not survive a power cut: commits return without
	// waiting for the disk, which makes a suite of many small transactions
	// several times faster. Nothing else about PostgreSQL changes.
	return dsn + "&synchronous_commit=off"
}

// WithSchema returns dsn with its search_path set to schema.
func WithSchema(dsn, schema string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("%s: not a URL DSN (postgres://user:pass@host:port/db?sslmode=disable): %w", redact(dsn), err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// connect opens (once per process) and pings the admin connection.
func connect(dsn string) (*sql.DB, error) {
	mu.Lock()
	defer mu.Unlock()
	if lastDSN == dsn && (admin != nil || lastErr != nil) {
		return admin, lastErr
	}
	if admin != nil {
		admin.Close()
	}
	admin, lastDSN, lastErr = nil, dsn, nil
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		lastErr = err
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		lastErr = err
		return nil, err
	}
	db.SetMaxIdleConns(2)
	admin = db
	if !swept {
		swept = true
		sweep(ctx, db)
	}
	return db, nil
}

// sweep drops test schemas left behind by runs that were killed before
// their cleanups, once they are older than staleAfter. Errors are ignored:
// another run may be dropping the same schema.
func sweep(ctx context.Context, db *sql.DB) {
	rows, err := db.QueryContext(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'suanli\_test\_%'`)
	if err != nil {
		return
	}
	var stale []string
	for rows.Next() {
		var n string
		if rows.Scan(&n) != nil {
			break
		}
		sec, err := strconv.ParseInt(strings.SplitN(strings.TrimPrefix(n, prefix), "_", 2)[0], 10, 64)
		if err == nil && time.Since(time.Unix(sec, 0)) > staleAfter {
			stale = append(stale, n)
		}
	}
	rows.Close()
	for _, n := range stale {
		db.ExecContext(ctx, `DROP SCHEMA IF EXISTS `+n+` CASCADE`)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// redact hides the password in dsn, for messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// StoreEnv names the variable that moves other packages' store fixtures
// (control's market harness, the HTTP tests) from SQLite to PostgreSQL:
// SUANLI_TEST_STORE=postgres. The store's own suite always runs on both.
const StoreEnv = "SUANLI_TEST_STORE"

// StoreDSN returns where a test fixture's store lives: sqlitePath, or a
// fresh schema (DSN) when SUANLI_TEST_STORE=postgres.
func StoreDSN(tb testing.TB, sqlitePath string) string {
	tb.Helper()
	if os.Getenv(StoreEnv) == "postgres" {
		return DSN(tb)
	}
	return sqlitePath
}
