//go:build !linux

package vault

import (
	"context"
	"errors"
	"fmt"
	"runtime"
)

var errUnsupported = errors.New("fscrypt needs Linux")

// Open returns (nil, nil) for Mode "off" and "auto": fscrypt is Linux-only.
// Mode "on" is an error.
func Open(ctx context.Context, o Options) (*Vault, error) {
	if off, err := checkMode(o.Mode); off || err != nil || o.Mode == "auto" {
		return nil, err
	}
	return nil, fmt.Errorf("disk encryption: not available on %s, only on Linux: use --disk-encryption=off", runtime.GOOS)
}

// Supported always returns an error: fscrypt is Linux-only.
func Supported(dir string) error {
	return fmt.Errorf("%s does not accept fscrypt policies: %w", dir, errUnsupported)
}

func getPolicy(dir string) (keyID, bool, error)           { return keyID{}, false, errUnsupported }
func setPolicy(dir string, id keyID) error                { return errUnsupported }
func addKey(path string, key []byte, id keyID) error      { return errUnsupported }
func removeKey(path string, id keyID) (bool, bool, error) { return false, false, errUnsupported }

// IsMountPoint is false: no image is ever mounted off Linux.
func IsMountPoint(path string) (bool, error) { return false, nil }
