package vault

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Open opens the vault in o.Dir, creating and mounting its loop image when
// o.Mode is "on" and the directory's own filesystem cannot encrypt. With Mode
// "off", or "auto" when encryption is unavailable, it returns (nil, nil).
// Errors say why encryption is unavailable and how to fix it. Reopening a
// vault whose image is still mounted (an agent restart) uses that mount:
// whatever is mounted at DIR/mnt is taken to be the vault's image.
func Open(ctx context.Context, o Options) (*Vault, error) {
	if off, err := checkMode(o.Mode); off || err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("disk encryption: %w", err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil, fmt.Errorf("disk encryption: %w", err)
	}
	mounts, err := readMounts()
	if err != nil {
		return nil, fmt.Errorf("disk encryption: %w", err)
	}
	v := &Vault{dir: dir, log: log}
	image, mnt := filepath.Join(dir, "disk.img"), filepath.Join(dir, "mnt")
	_, statErr := os.Stat(image)
	host := mounts.containing(dir)
	supported := Supported(dir)
	switch m, mounted := mounts[mnt]; {
	case mounted:
		v.image, v.root, v.fstype = image, filepath.Join(mnt, "objects"), m.fstype
	case statErr == nil:
		if err := mountImage(ctx, image, mnt); err != nil {
			return nil, err
		}
		log.Info("vault image mounted", "image", image, "dir", mnt)
		v.image, v.root, v.fstype = image, filepath.Join(mnt, "objects"), "ext4"
	case supported == nil:
		v.root, v.fstype = filepath.Join(dir, "objects"), host.fstype
	case o.Mode == "auto":
		log.Info("disk encryption unavailable", "dir", dir, "fstype", host.fstype, "err", supported)
		return nil, nil
	default:
		if err := canMakeImage(dir, host, supported); err != nil {
			return nil, err
		}
		size := o.ImageSize
		if size == 0 {
			size = DefaultImageSize
		}
		if err := makeImage(ctx, image, size); err != nil {
			return nil, err
		}
		log.Info("vault image created", "image", image, "bytes", size)
		if err := mountImage(ctx, image, mnt); err != nil {
			return nil, err
		}
		log.Info("vault image mounted", "image", image, "dir", mnt)
		v.image, v.root, v.fstype = image, filepath.Join(mnt, "objects"), "ext4"
	}
	if err := os.MkdirAll(v.root, 0o700); err != nil {
		return nil, fmt.Errorf("disk encryption: %w", err)
	}
	if err := Supported(v.root); err != nil {
		return nil, fmt.Errorf("disk encryption: %w", err)
	}
	return v, nil
}

// Supported returns nil when dir's filesystem accepts fscrypt encryption
// policies, and otherwise an error saying it does not.
func Supported(dir string) error {
	if _, _, err := getPolicy(dir); err != nil {
		return fmt.Errorf("%s does not accept fscrypt policies: %w", dir, err)
	}
	return nil
}

// canMakeImage explains why a loop image cannot be made for dir, or returns nil.
func canMakeImage(dir string, host mount, why error) error {
	where := "on " + host.fstype
	fix := "move the data directory to ext4 with the encrypt feature"
	if host.fstype == "ext4" {
		where, fix = "on ext4 without the encrypt feature", "`tune2fs -O encrypt "+host.source+"`"
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("disk encryption: %s is %s and the agent is not root: run as root, or %s, or --disk-encryption=off (fscrypt: %v)", dir, where, fix, errors.Unwrap(why))
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("disk encryption: %s is %s and %s is not installed for a loop image: install util-linux and e2fsprogs, or %s, or --disk-encryption=off", dir, where, tool, fix)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("disk encryption: %s is %s and this host has no loop devices (%v): modprobe loop, or %s, or --disk-encryption=off", dir, where, err, fix)
	}
	return nil
}

// makeImage creates a sparse ext4 image with the encrypt feature. It formats
// image.new and renames it, so a crash never leaves an unformatted image.
func makeImage(ctx context.Context, image string, size int64) error {
	tmp := image + ".new"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("disk encryption: create image: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = run(ctx, "mkfs.ext4", "-q", "-F", "-O", "encrypt", "-E", "nodiscard", "-m", "0", "-L", "suanli-vault", tmp)
	}
	if err == nil {
		err = os.Rename(tmp, image)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("disk encryption: create image %s: %w", image, err)
	}
	return nil
}

// mountImage mounts image at mnt through a loop device that the kernel frees
// on unmount (util-linux sets autoclear). With discard, blocks freed in the
// image are punched out of the image file, so it does not grow forever.
func mountImage(ctx context.Context, image, mnt string) error {
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		return fmt.Errorf("disk encryption: %w", err)
	}
	if err := run(ctx, "mount", "-o", "loop,discard", image, mnt); err != nil {
		return fmt.Errorf("disk encryption: mount %s: %w (the agent must be root to mount its image)", image, err)
	}
	return nil
}

// run runs a tool and returns an error holding its output when it fails.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}

// mount is one line of /proc/self/mountinfo.
type mount struct{ fstype, source string }

// mountTable maps mount points to their mounts; a later mount on the same
// point hides an earlier one, as in the kernel.
type mountTable map[string]mount

func readMounts() (mountTable, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t := mountTable{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 2 {
			continue
		}
		t[unescape(a[4])] = mount{fstype: b[0], source: unescape(b[1])}
	}
	return t, sc.Err()
}

// IsMountPoint reports whether path is a mount point now (an image's
// mount, for callers that unmount it: tests, an operator's cleanup).
func IsMountPoint(path string) (bool, error) {
	t, err := readMounts()
	if err != nil {
		return false, err
	}
	_, ok := t[path]
	return ok, nil
}

// containing returns the mount holding path (the longest mount point above it).
func (t mountTable) containing(path string) mount {
	for p := path; ; p = filepath.Dir(p) {
		if m, ok := t[p]; ok || p == "/" {
			return m
		}
	}
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func ioctl(f *os.File, req uint, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}

func openDir(dir string) (*os.File, error) {
	return os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
}

// getPolicy reads dir's encryption policy: its key identifier, or
// encrypted false when dir is not encrypted. The filesystem not supporting
// encryption is an error (EOPNOTSUPP, ENOTTY).
func getPolicy(dir string) (id keyID, encrypted bool, err error) {
	f, err := openDir(dir)
	if err != nil {
		return id, false, err
	}
	defer f.Close()
	arg := unix.FscryptGetPolicyExArg{Size: uint64(unsafe.Sizeof(unix.FscryptPolicyV2{}))}
	err = ioctl(f, unix.FS_IOC_GET_ENCRYPTION_POLICY_EX, unsafe.Pointer(&arg))
	if errors.Is(err, unix.ENODATA) {
		return id, false, nil
	} else if err != nil {
		return id, false, err
	}
	p := (*unix.FscryptPolicyV2)(unsafe.Pointer(&arg.Policy))
	if p.Version != unix.FSCRYPT_POLICY_V2 {
		return id, true, fmt.Errorf("%s has an fscrypt policy of version %d, not 2", dir, p.Version)
	}
	return keyID(p.Master_key_identifier), true, nil
}

// setPolicy encrypts the empty directory dir under key id, which must have
// been added (addKey).
func setPolicy(dir string, id keyID) error {
	f, err := openDir(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	p := unix.FscryptPolicyV2{
		Version:                   unix.FSCRYPT_POLICY_V2,
		Contents_encryption_mode:  unix.FSCRYPT_MODE_AES_256_XTS,
		Filenames_encryption_mode: unix.FSCRYPT_MODE_AES_256_CTS,
		Flags:                     unix.FSCRYPT_POLICY_FLAGS_PAD_32,
		Master_key_identifier:     id,
	}
	return ioctl(f, unix.FS_IOC_SET_ENCRYPTION_POLICY, unsafe.Pointer(&p))
}

// addKeyArg is struct fscrypt_add_key_arg with its flexible raw[] array.
type addKeyArg struct {
	unix.FscryptAddKeyArg
	raw [KeySize]byte
}

// addKey adds key to the keyring of the filesystem holding path and checks
// that the kernel derives the identifier id from it. Adding a key twice is a
// no-op.
func addKey(path string, key []byte, id keyID) error {
	f, err := openDir(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var arg addKeyArg
	arg.Key_spec.Type = unix.FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER
	arg.Raw_size = uint32(copy(arg.raw[:], key))
	err = ioctl(f, unix.FS_IOC_ADD_ENCRYPTION_KEY, unsafe.Pointer(&arg))
	clear(arg.raw[:])
	if err != nil {
		return err
	}
	if got := keyID(arg.Key_spec.U[:16]); got != id {
		return fmt.Errorf("kernel derived key identifier %x, want %x", got, id)
	}
	return nil
}

// removeKey removes key id from the keyring of the filesystem holding path.
// busy reports files still open under the key; absent, a key that was not
// there.
func removeKey(path string, id keyID) (busy, absent bool, err error) {
	f, err := openDir(path)
	if err != nil {
		return false, false, err
	}
	defer f.Close()
	var arg unix.FscryptRemoveKeyArg
	arg.Key_spec.Type = unix.FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER
	copy(arg.Key_spec.U[:], id[:])
	err = ioctl(f, unix.FS_IOC_REMOVE_ENCRYPTION_KEY, unsafe.Pointer(&arg))
	if errors.Is(err, unix.ENOKEY) {
		return false, true, nil
	} else if err != nil {
		return false, false, err
	}
	if arg.Removal_status_flags&unix.FSCRYPT_KEY_REMOVAL_STATUS_FLAG_OTHER_USERS != 0 {
		return false, false, errors.New("other users added the key too, so it stays in the kernel: remove it with FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS")
	}
	return arg.Removal_status_flags&unix.FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY != 0, false, nil
}
