package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Sealer encrypts secrets for storage (registry credentials, secret env):
// AES-256-GCM under a key derived from the server's master key, with a
// random nonce per secret and the secret's purpose as additional data, so
// that a sealed value moved to another row or column does not open. It is
// safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// sealVersion prefixes every sealed value, so that the format can change.
const sealVersion = 1

// NewSealer returns a sealer for a 32-byte master key.
func NewSealer(master []byte) (*Sealer, error) {
	if len(master) != 32 {
		return nil, fmt.Errorf("secret key: %d bytes, want 32", len(master))
	}
	block, err := aes.NewCipher(DeriveKey(master, "seal"))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plain; purpose (e.g. "instance 7") binds it to its place.
func (s *Sealer) Seal(plain []byte, purpose string) []byte {
	nonce := make([]byte, s.aead.NonceSize(), 1+s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	out := append([]byte{sealVersion}, nonce...)
	return s.aead.Seal(out, nonce, plain, []byte(purpose))
}

// Open decrypts what Seal returned for the same purpose.
func (s *Sealer) Open(sealed []byte, purpose string) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n+s.aead.Overhead() || sealed[0] != sealVersion {
		return nil, errors.New("sealed secret: malformed")
	}
	plain, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(purpose))
	if err != nil {
		return nil, errors.New("sealed secret: does not open with this server's secret key (was secret.key replaced?)")
	}
	return plain, nil
}

// DeriveKey returns a 32-byte subkey of master for one purpose, so that one
// file on disk yields independent keys for sealing and for instance tokens.
func DeriveKey(master []byte, purpose string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("suanli " + purpose))
	return m.Sum(nil)
}

// LoadOrCreateKey reads a 32-byte key stored as hex in path, creating it
// (mode 0600, in a directory made 0700 when missing) on first use. A key
// file readable by others is refused: fix its mode.
func LoadOrCreateKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create key %s: %w", path, err)
		}
		_, err = f.WriteString(hex.EncodeToString(key) + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("write key %s: %w", path, err)
		}
		return key, nil
	} else if err != nil {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("key %s is readable by others (mode %v): chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("key %s: want 64 hex digits", path)
	}
	return key, nil
}
