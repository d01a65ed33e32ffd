package vault

import (
	"crypto/hkdf"
	"crypto/sha512"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/suanli/suanli/internal/units"
)

// KeySize is the length of an object's key in bytes: a 512-bit fscrypt master
// key, as AES-256-XTS needs.
const KeySize = 64

// Options configure Open. The zero value (Mode "") means "off".
type Options struct {
	// Dir is the vault's directory, created 0700 if missing.
	Dir string
	// Mode is "off" (Open returns nil, nil), "auto" (use Dir's filesystem if
	// it accepts encryption policies, or an existing image Dir/disk.img;
	// otherwise nil, nil) or "on" (as auto, but create and mount the image
	// when needed, which takes root, mkfs.ext4 and loop devices; an error if
	// impossible).
	Mode string
	// ImageSize is the size in bytes of a new sparse image; 0 means 64 GiB.
	// An existing image keeps its size.
	ImageSize int64
	// Logger receives lowercase events (image created, image mounted); nil
	// discards them.
	Logger *slog.Logger
}

// DefaultImageSize is the size of a new image when Options.ImageSize is 0.
// The file is sparse: it takes host disk space only as objects fill it.
const DefaultImageSize = 64 << 30

// Vault holds encrypted object directories under Root(). Its methods may be
// called from several goroutines, but not for the same object name at once.
// Open makes one; the zero value is not usable.
type Vault struct {
	dir    string // Options.Dir
	root   string // where object directories live
	image  string // the loop image, or "" on a native filesystem
	fstype string // the filesystem holding root
	log    *slog.Logger
}

// Report says what Erase did, in terms an audit log can record.
type Report struct {
	// Method is "crypto-erase", or "delete" when the directory was not
	// encrypted, or "none" when there was nothing to erase.
	Method string
	// Files and Bytes count the regular files deleted and their sizes.
	Files, Bytes int64
	// Busy is set when some of the object's files were still open as its key
	// was removed: their plaintext stays reachable through those open
	// descriptors until they are closed. The kernel has wiped the key
	// itself by then, but keeps the key "incompletely removed" until a later
	// removal of the same key or an unmount.
	Busy bool
	// Detail is one human sentence saying what was done and what remains.
	Detail string
}

// Root returns the directory holding the objects: DIR/objects on a native
// filesystem, DIR/mnt/objects with an image.
func (v *Vault) Root() string { return v.root }

// Describe returns one line saying how objects are encrypted, for listings.
func (v *Vault) Describe() string {
	s := "fscrypt v2 AES-256-XTS, per-object keys, "
	if v.image != "" {
		return s + "loop image " + v.image + " (" + v.fstype + ")"
	}
	return s + "on " + v.dir + " (" + v.fstype + ")"
}

// Ensure returns the directory of object name, encrypted with key, and makes
// sure key is in the kernel so that the directory reads as plaintext. It
// creates the directory when missing. An existing directory must be
// encrypted with the same key ("instance-12 is encrypted with another key"
// otherwise), or be an empty unencrypted one, left behind by a crash between
// creating it and setting its policy. Adding the key again is harmless; after
// a reboot or remount it is what unlocks the object.
func (v *Vault) Ensure(name string, key []byte) (dir string, err error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	if len(key) != KeySize {
		return "", fmt.Errorf("%s: key is %d bytes, want %d", name, len(key), KeySize)
	}
	id := identifier(key)
	dir = filepath.Join(v.root, name)
	if fi, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	} else if err != nil {
		return "", err
	} else if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory: remove it", dir)
	}
	cur, encrypted, err := getPolicy(dir)
	if err != nil {
		return "", fmt.Errorf("%s: read encryption policy: %w", name, err)
	}
	if encrypted && cur != id {
		return "", fmt.Errorf("%s is encrypted with another key (identifier %x, this key's is %x)", name, cur, id)
	}
	if !encrypted {
		if empty, err := isEmpty(dir); err != nil {
			return "", err
		} else if !empty {
			return "", fmt.Errorf("%s exists but is not encrypted: move its files out of %s, or erase it", name, dir)
		}
	}
	if err := addKey(v.root, key, id); err != nil {
		return "", fmt.Errorf("%s: add key to the kernel: %w", name, err)
	}
	if !encrypted {
		if err := setPolicy(dir, id); err != nil {
			return "", fmt.Errorf("%s: set encryption policy: %w", name, err)
		}
		v.log.Info("vault object created", "object", name, "key_id", fmt.Sprintf("%x", id))
	}
	return dir, nil
}

// Erase crypto-erases object name: it reads the key identifier from the
// directory's policy, counts its files, removes the key from the kernel
// (evicting cached plaintext) and deletes the directory. It does not need the
// key. A missing directory gives a Report with Method "none".
func (v *Vault) Erase(name string) (Report, error) {
	if err := checkName(name); err != nil {
		return Report{}, err
	}
	dir := filepath.Join(v.root, name)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return Report{Method: "none", Detail: name + " does not exist; nothing to erase"}, nil
	} else if err != nil {
		return Report{}, err
	}
	id, encrypted, err := getPolicy(dir)
	if err != nil {
		return Report{}, fmt.Errorf("erase %s: read encryption policy: %w", name, err)
	}
	var r Report
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		r.Files, r.Bytes = r.Files+1, r.Bytes+fi.Size()
		return nil
	})
	if err != nil {
		return Report{}, fmt.Errorf("erase %s: count files: %w", name, err)
	}
	what := fmt.Sprintf("%d %s (%s)", r.Files, plural(r.Files, "file"), units.Bytes(r.Bytes))
	if !encrypted {
		r.Method = "delete"
		r.Detail = name + " was not encrypted; " + what + " deleted, not crypto-erased"
	} else {
		// Any descriptor on the filesystem serves for the ioctl; Root() is
		// one that belongs to no object.
		busy, absent, err := removeKey(v.root, id)
		if err != nil {
			return Report{}, fmt.Errorf("erase %s: remove key %x: %w", name, id, err)
		}
		r.Method, r.Busy = "crypto-erase", busy
		switch {
		case absent:
			r.Detail = "key was not in the kernel (the object was locked); "
		case busy:
			r.Detail = "key removed from the kernel, but some files were still open and stay readable through those descriptors until closed; "
		default:
			r.Detail = "key removed from the kernel; "
		}
		r.Detail += what + " of ciphertext deleted; the key's only other copy is the control plane's, which it destroys"
	}
	if err := os.RemoveAll(dir); err != nil {
		return r, fmt.Errorf("erase %s: delete: %w", name, err)
	}
	v.log.Info("vault object erased", "object", name, "method", r.Method, "files", r.Files, "bytes", r.Bytes, "busy", r.Busy)
	return r, nil
}

// Objects returns the names of the object directories under Root(), sorted.
func (v *Vault) Objects() ([]string, error) {
	entries, err := os.ReadDir(v.root)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Close releases the vault. It leaves an image mounted, because instances
// may still be running on it and the next Open (an agent restart) picks the
// mount up again; keys stay in the kernel until Erase, unmount or reboot.
func (v *Vault) Close() error { return nil }

// keyID is an fscrypt v2 master key identifier.
type keyID [16]byte

// identifier derives key's identifier as the kernel does:
// HKDF-SHA512 with no salt and info "fscrypt\0" followed by context 1
// (HKDF_CONTEXT_KEY_IDENTIFIER).
func identifier(key []byte) keyID {
	b, err := hkdf.Key(sha512.New, key, nil, "fscrypt\x00\x01", len(keyID{}))
	if err != nil {
		panic(err) // only for lengths far beyond 16 bytes
	}
	return keyID(b)
}

// checkName accepts a plain file name such as "instance-12".
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("object name %q: want a plain file name such as instance-12", name)
	}
	return nil
}

func isEmpty(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.ReadDir(1)
	if err == io.EOF {
		return true, nil
	}
	return false, err
}

// checkMode validates Options.Mode; off is true for "off" and "".
func checkMode(mode string) (off bool, err error) {
	switch mode {
	case "", "off":
		return true, nil
	case "auto", "on":
		return false, nil
	}
	return false, fmt.Errorf("disk encryption mode %q: want off, auto or on", mode)
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
