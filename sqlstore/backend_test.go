package sqlstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/suanli/suanli/internal/pgtest"
	"github.com/suanli/suanli/sqlstore"
)

// Backend is a database the store suite runs on. NewDSN returns where a
// new, empty store lives: a file in a fresh temp dir (SQLite), or a fresh
// schema on the server named by SUANLI_TEST_POSTGRES_DSN (PostgreSQL, which
// skips the test when the variable is unset, or fails it in CI). The same
// DSN opens the same store again (a restart).
type Backend struct {
	Name   string
	NewDSN func(tb testing.TB) string
}

// Backends are the databases every store test runs on.
var Backends = []Backend{
	{Name: "sqlite", NewDSN: func(tb testing.TB) string { return filepath.Join(tb.TempDir(), "suanli.db") }},
	{Name: "postgres", NewDSN: pgtest.DSN},
}

// EachBackend runs fn once per backend, as subtests named after them.
func EachBackend(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range Backends {
		t.Run(b.Name, func(t *testing.T) { fn(t, b) })
	}
}

// MustOpen opens a new, empty store on b, closed at cleanup.
func (b Backend) MustOpen(tb testing.TB) *sqlstore.DB {
	tb.Helper()
	return MustOpenDSN(tb, b.NewDSN(tb))
}

// MustOpenDSN opens the store at dsn, closed at cleanup.
func MustOpenDSN(tb testing.TB, dsn string) *sqlstore.DB {
	tb.Helper()
	db, err := sqlstore.Open(context.Background(), dsn)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// MustOpen opens a new, empty store for a test written before EachBackend:
// on PostgreSQL when SUANLI_TEST_POSTGRES_DSN is set (as in CI), else on
// SQLite. New tests use EachBackend and b.MustOpen, which run on both.
func MustOpen(tb testing.TB) *sqlstore.DB {
	tb.Helper()
	if os.Getenv(pgtest.Env) != "" {
		return Backends[1].MustOpen(tb)
	}
	return Backends[0].MustOpen(tb)
}
