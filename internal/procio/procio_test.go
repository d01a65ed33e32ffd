package procio_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/suanli/suanli/internal/procio"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want procio.Counters
		ok   bool
	}{
		{"rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 4096\nwrite_bytes: 8388608\ncancelled_write_bytes: 0\n",
			procio.Counters{ReadBytes: 4096, WriteBytes: 8388608}, true},
		{"read_bytes: 1\nwrite_bytes: 2", procio.Counters{ReadBytes: 1, WriteBytes: 2}, true},
		{"rchar: 6976\nread_bytes: 1\n", procio.Counters{}, false},
		{"read_bytes: x\nwrite_bytes: 2\n", procio.Counters{}, false},
		{"", procio.Counters{}, false},
	} {
		got, err := procio.Parse([]byte(tt.in))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// TestRead: a file this process writes and syncs counts in its write bytes.
func TestRead(t *testing.T) {
	before, err := procio.Read(os.Getpid())
	if err != nil {
		t.Skipf("skipping: no per-process I/O accounting here: %v", err)
	}
	const size = 1 << 20
	if err := os.WriteFile(filepath.Join(t.TempDir(), "blob"), make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	after, err := procio.Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after.WriteBytes - before.WriteBytes; d < size && !onTmpfs(t.TempDir()) {
		t.Errorf("WriteBytes grew by %d after writing %d bytes, want at least that", d, size)
	}
}

// onTmpfs reports whether dir is on tmpfs, whose writes are never counted.
func onTmpfs(dir string) bool {
	var sfs syscall.Statfs_t
	return syscall.Statfs(dir, &sfs) == nil && sfs.Type == 0x01021994 // TMPFS_MAGIC
}
