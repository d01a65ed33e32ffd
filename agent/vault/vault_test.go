//go:build linux

package vault_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/suanli/suanli/agent/vault"
	"github.com/suanli/suanli/agent/vault/vaulttest"
)

func MustEnsure(tb testing.TB, v *vault.Vault, name string, key []byte) string {
	tb.Helper()
	dir, err := v.Ensure(name, key)
	if err != nil {
		tb.Fatalf("Ensure(%s): %v", name, err)
	}
	return dir
}

func MustWrite(tb testing.TB, path string, data []byte) {
	tb.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
}

func mustRead(tb testing.TB, path string, want []byte) {
	tb.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		tb.Fatalf("read %s: %d bytes that differ from the %d written", path, len(got), len(want))
	}
}

func TestEnsure(t *testing.T) {
	v, _ := vaulttest.Open(t)
	if d := v.Describe(); !strings.Contains(d, "fscrypt v2 AES-256-XTS") {
		t.Errorf("Describe() = %q", d)
	}
	key := vaulttest.Key(t)
	dir := MustEnsure(t, v, "instance-12", key)
	if dir != filepath.Join(v.Root(), "instance-12") {
		t.Errorf("Ensure(instance-12) = %s, want it under %s", dir, v.Root())
	}
	plain := []byte("the renter's data\n")
	MustWrite(t, filepath.Join(dir, "data.txt"), plain)
	mustRead(t, filepath.Join(dir, "data.txt"), plain)

	if again := MustEnsure(t, v, "instance-12", key); again != dir {
		t.Errorf("second Ensure = %s, want %s", again, dir)
	}
	mustRead(t, filepath.Join(dir, "data.txt"), plain)
	if _, err := v.Ensure("instance-12", vaulttest.Key(t)); err == nil || !strings.Contains(err.Error(), "instance-12") {
		t.Errorf("Ensure(instance-12, other key) = %v, want an error naming instance-12", err)
	}
	if got, err := v.Objects(); err != nil || !slices.Equal(got, []string{"instance-12"}) {
		t.Errorf("Objects() = %v, %v, want [instance-12]", got, err)
	}
}

// TestEncryptedAtRest writes a marker into an object and another into a
// plain file of the same image: the raw image holds the plain one (the search
// works) and not the encrypted one, in contents or names.
func TestEncryptedAtRest(t *testing.T) {
	v, vdir := vaulttest.Open(t)
	image := filepath.Join(vdir, "disk.img")
	if _, err := os.Stat(image); err != nil {
		t.Skipf("no loop image (the temporary directory encrypts natively): %v", err)
	}
	secret, control := make([]byte, 32), make([]byte, 32)
	rand.Read(secret)
	rand.Read(control)
	secretName, controlName := "secret-"+rand.Text(), "control-"+rand.Text()

	dir := MustEnsure(t, v, "volume-7", vaulttest.Key(t))
	MustWrite(t, filepath.Join(dir, secretName), bytes.Repeat(secret, 1<<15))
	MustWrite(t, filepath.Join(vdir, "mnt", controlName), bytes.Repeat(control, 1<<15))
	syscall.Sync()
	raw, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, control) || !bytes.Contains(raw, []byte(controlName)) {
		t.Fatal("the raw image lacks the unencrypted control file's contents or name: the search proves nothing")
	}
	if bytes.Contains(raw, secret) {
		t.Error("the raw image holds the object's plaintext contents")
	}
	if bytes.Contains(raw, []byte(secretName)) {
		t.Error("the raw image holds the object's plaintext file name")
	}

	r, err := v.Erase("volume-7")
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != "crypto-erase" || r.Files != 1 || r.Bytes != 1<<20 || r.Busy {
		t.Errorf("Erase(volume-7) = %+v, want crypto-erase of 1 file, %d bytes, not busy", r, 1<<20)
	}
	t.Logf("report: %s", r.Detail)
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("after Erase, Lstat(%s) = %v, want not found", dir, err)
	}
	if r, err := v.Erase("volume-7"); err != nil || r.Method != "none" {
		t.Errorf("second Erase = %+v, %v, want Method none", r, err)
	}
}

// TestEraseLeavesOthers erases one object and reads another under its own key.
func TestEraseLeavesOthers(t *testing.T) {
	v, _ := vaulttest.Open(t)
	a := MustEnsure(t, v, "instance-1", vaulttest.Key(t))
	b := MustEnsure(t, v, "instance-2", vaulttest.Key(t))
	MustWrite(t, filepath.Join(a, "f"), []byte("a"))
	MustWrite(t, filepath.Join(b, "f"), []byte("b"))
	if _, err := v.Erase("instance-1"); err != nil {
		t.Fatal(err)
	}
	mustRead(t, filepath.Join(b, "f"), []byte("b"))
	if got, err := v.Objects(); err != nil || !slices.Equal(got, []string{"instance-2"}) {
		t.Errorf("Objects() = %v, %v, want [instance-2]", got, err)
	}
}

// TestEraseBusy erases an object with a file still open: the report says so,
// and the open descriptor still reads plaintext, the documented limit.
func TestEraseBusy(t *testing.T) {
	v, _ := vaulttest.Open(t)
	dir := MustEnsure(t, v, "instance-3", vaulttest.Key(t))
	MustWrite(t, filepath.Join(dir, "f"), []byte("still open"))
	f, err := os.Open(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := v.Erase("instance-3")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Busy || !strings.Contains(r.Detail, "open") {
		t.Errorf("Erase with an open file = %+v, want Busy and a detail that says so", r)
	}
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	t.Logf("open descriptor after key removal reads %q, %v", buf[:n], err)
	if string(buf[:n]) != "still open" {
		t.Errorf("open descriptor reads %q, want the plaintext (the kernel keeps busy files unlocked)", buf[:n])
	}
}

// TestReopen simulates a reboot: after unmounting, the object is locked;
// Open mounts the image again and Ensure with the same key unlocks it.
func TestReopen(t *testing.T) {
	v, vdir := vaulttest.Open(t)
	key := vaulttest.Key(t)
	dir := MustEnsure(t, v, "volume-9", key)
	plain := []byte("survives a reboot")
	MustWrite(t, filepath.Join(dir, "data.txt"), plain)
	other := MustEnsure(t, v, "volume-10", vaulttest.Key(t))
	MustWrite(t, filepath.Join(other, "f"), plain)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if v2 := vaulttest.Reopen(t, vdir, "auto"); v2.Root() != v.Root() {
		t.Errorf("Open while mounted: Root() = %s, want %s", v2.Root(), v.Root())
	}
	vaulttest.Unmount(t, vdir)
	if _, err := os.Stat(filepath.Join(vdir, "disk.img")); err == nil && vaulttest.Mounted(t, filepath.Join(vdir, "mnt")) {
		t.Fatal("image still mounted after umount")
	}

	v = vaulttest.Reopen(t, vdir, "auto")
	if _, err := os.ReadFile(filepath.Join(dir, "data.txt")); err == nil {
		t.Error("after remount and before Ensure, the file reads without its key")
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() == "data.txt" {
		t.Errorf("locked ReadDir(%s) = %v, %v, want one entry with an encrypted name", dir, entries, err)
	}
	MustEnsure(t, v, "volume-9", key)
	mustRead(t, filepath.Join(dir, "data.txt"), plain)

	// Erase needs no key: volume-10's was never added after the remount.
	r, err := v.Erase("volume-10")
	if err != nil || r.Method != "crypto-erase" || r.Files != 1 || !strings.Contains(r.Detail, "not in the kernel") {
		t.Errorf("Erase(locked volume-10) = %+v, %v, want a crypto-erase of 1 file whose key was not in the kernel", r, err)
	}
	if _, err := os.Lstat(other); !os.IsNotExist(err) {
		t.Errorf("after Erase, Lstat(%s) = %v, want not found", other, err)
	}
}

func TestOpenModes(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []string{"", "off"} {
		if v, err := vault.Open(t.Context(), vault.Options{Dir: dir, Mode: mode}); v != nil || err != nil {
			t.Errorf("Open(mode %q) = %v, %v, want nil, nil", mode, v, err)
		}
	}
	if _, err := vault.Open(t.Context(), vault.Options{Dir: dir, Mode: "yes"}); err == nil {
		t.Error("Open(mode yes) succeeded, want an error")
	}
	if vault.Supported(dir) == nil {
		t.Skipf("%s encrypts natively; auto would use it", dir)
	}
	if v, err := vault.Open(t.Context(), vault.Options{Dir: dir, Mode: "auto"}); v != nil || err != nil {
		t.Errorf("Open(auto) on a filesystem without fscrypt and no image = %v, %v, want nil, nil", v, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "disk.img")); err == nil {
		t.Error("Open(auto) created an image")
	}
}

func TestEnsureRejects(t *testing.T) {
	v, _ := vaulttest.Open(t)
	key := vaulttest.Key(t)
	for _, name := range []string{"", ".", "..", "a/b", "../x", "/abs"} {
		if _, err := v.Ensure(name, key); err == nil {
			t.Errorf("Ensure(%q) succeeded, want an error", name)
		}
		if _, err := v.Erase(name); err == nil {
			t.Errorf("Erase(%q) succeeded, want an error", name)
		}
	}
	for _, n := range []int{0, 32, 65} {
		if _, err := v.Ensure("instance-1", make([]byte, n)); err == nil {
			t.Errorf("Ensure with a %d-byte key succeeded, want an error", n)
		}
	}
	plain := filepath.Join(v.Root(), "instance-4")
	MustWrite(t, filepath.Join(mkdir(t, plain), "f"), []byte("x"))
	if _, err := v.Ensure("instance-4", key); err == nil || !strings.Contains(err.Error(), "instance-4") {
		t.Errorf("Ensure on an unencrypted directory with files = %v, want an error naming it", err)
	}
	// An empty unencrypted directory is what a crash before the policy leaves.
	mkdir(t, filepath.Join(v.Root(), "instance-5"))
	MustWrite(t, filepath.Join(MustEnsure(t, v, "instance-5", key), "f"), []byte("x"))
	if r, err := v.Erase("instance-4"); err != nil || r.Method != "delete" || r.Files != 1 {
		t.Errorf("Erase(unencrypted instance-4) = %+v, %v, want Method delete of 1 file", r, err)
	}
}

func mkdir(tb testing.TB, dir string) string {
	tb.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	return dir
}
