package sqlstore_test

import (
	"context"
	"github.com/suanli/suanli/sqlstore"
	"os"
	"path/filepath"
	"testing"
)

func TestPathWithHash(t *testing.T) {
	d := filepath.Join(t.TempDir(), "a#b?c")
	os.MkdirAll(d, 0o700)
	p := filepath.Join(d, "s.db")
	db, err := sqlstore.Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
}

func TestRedactDSN(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:secret@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgres://u:secret@h1:5432,h2:5433/db?target_session_attrs=read-write", "postgres://u:xxxxx@h1:5432,h2:5433/db?target_session_attrs=read-write"},
		{"postgresql://h/db", "postgresql://h/db"},
		{"/var/lib/suanli/suanli.db", "/var/lib/suanli/suanli.db"},
	} {
		if got := sqlstore.RedactDSN(tc.in); got != tc.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
