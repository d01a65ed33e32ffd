// Package vaulttest opens real vaults for tests: a loop image in a
// temporary directory, unmounted when the test ends. Tests that cannot
// mount (not root, no loop devices) skip through testreq ("fscrypt"), and
// fail in CI where SUANLI_TEST_REQUIRE says the part must be there.
package vaulttest

import (
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/suanli/suanli/agent/vault"
	"github.com/suanli/suanli/internal/testreq"
)

// Require ends the test unless it can make and mount a loop image.
func Require(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		testreq.Missing(tb, "fscrypt", "not root: the vault tests mount loop images (run the tests as root)")
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			testreq.Missing(tb, "fscrypt", tool+" not in PATH (apt-get install e2fsprogs util-linux)")
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		testreq.Missing(tb, "fscrypt", "no loop devices (modprobe loop)")
	}
}

// Open opens a vault with a 64 MiB image in a fresh temporary directory,
// and unmounts the image when the test ends, before the directory goes.
func Open(tb testing.TB) (*vault.Vault, string) {
	tb.Helper()
	Require(tb)
	dir := tb.TempDir()
	tb.Cleanup(func() { Unmount(tb, dir) })
	return Reopen(tb, dir, "on"), dir
}

// Reopen opens the vault in dir again with mode.
func Reopen(tb testing.TB, dir, mode string) *vault.Vault {
	tb.Helper()
	v, err := vault.Open(tb.Context(), vault.Options{Dir: dir, Mode: mode, ImageSize: 64 << 20})
	if err != nil {
		tb.Fatalf("Open(%s, %s): %v", dir, mode, err)
	}
	if v == nil {
		tb.Fatalf("Open(%s, %s) = nil vault", dir, mode)
	}
	return v
}

// Unmount unmounts dir/mnt if it is Mounted; the loop device is freed with it.
func Unmount(tb testing.TB, dir string) {
	tb.Helper()
	mnt := filepath.Join(dir, "mnt")
	if !Mounted(tb, mnt) {
		return
	}
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		tb.Errorf("umount %s: %v: %s", mnt, err, out)
	}
}

// Mounted reports whether path is a mount point.
func Mounted(tb testing.TB, path string) bool {
	tb.Helper()
	ok, err := vault.IsMountPoint(path)
	if err != nil {
		tb.Fatal(err)
	}
	return ok
}

// Key returns a random key.
func Key(tb testing.TB) []byte {
	tb.Helper()
	key := make([]byte, vault.KeySize)
	rand.Read(key)
	return key
}
