package vault

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Overwrite writes zeros over every regular file under dir (symbolic links
// are not followed), syncing each, and returns how many files and bytes it
// overwrote. It is the release of data that was never encrypted: on
// copy-on-write or flash storage the old blocks may survive it until they
// are reused. A missing dir is not an error.
func Overwrite(dir string) (files, bytes int64, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		n, err := zeroFile(p)
		files, bytes = files+1, bytes+n
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return files, bytes, err
}

func zeroFile(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	zero := make([]byte, 64<<10)
	var done int64
	for done < fi.Size() {
		n := min(int64(len(zero)), fi.Size()-done)
		if _, err := f.Write(zero[:n]); err != nil {
			return done, err
		}
		done += n
	}
	return done, f.Sync()
}
