// Package vault gives the host agent one encrypted directory per object (an
// instance's disk, a volume), each under its own key, using Linux native
// filesystem encryption (fscrypt v2 policies: AES-256-XTS for contents,
// AES-256-CTS for file names). Erasing an object is a crypto-erase: its key
// leaves the kernel, the control plane destroys the only other copy, and the
// ciphertext is deleted.
//
// The package owns DIR (Options.Dir) and, where it makes one, the loop image
// DIR/disk.img mounted at DIR/mnt. Objects live in Root()/<name>.
//
// It must not store a key anywhere: keys are 64 random bytes the control plane
// keeps sealed and hands over on each Ensure; the kernel holds them only in
// memory, so after a reboot or remount every object stays locked until its
// key is supplied again. It must not unmount an image on Close, since
// instances may still be running on it.
//
// Storage setups, and what each guarantees:
//
//   - Native: DIR's filesystem accepts encryption policies (ext4 with the
//     encrypt feature, f2fs). File contents and names are encrypted on the
//     host's own disk.
//   - Loop image: DIR's filesystem does not (ext4 without the encrypt
//     feature, xfs, …), so DIR/disk.img, a sparse file on the host
//     filesystem, is formatted as ext4 with the encrypt feature and mounted
//     with `mount -o loop,discard` (needs root, mkfs.ext4 and loop devices).
//     The image file itself lives on the host filesystem; what it holds is
//     ciphertext, plus the image filesystem's own metadata (sizes, times,
//     permissions, directory layout) in the clear.
//
// In both setups: removing a key evicts the object's cached plaintext pages
// and names from memory. A file still open when its key is removed keeps its
// plaintext reachable through that open descriptor until closed (Report.Busy,
// the kernel's "files busy" status); the kernel wipes the key's secret anyway
// but tracks the key as "incompletely removed" until it is removed again or
// the filesystem unmounted. Deleted ciphertext stays on the disk until its
// blocks are overwritten (discard frees the image's blocks on the host
// filesystem, which may keep them too), but it cannot be read without the
// key. File sizes, counts and times are not hidden.
package vault
