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
