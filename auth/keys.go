package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash/crc32"
	"math/big"
	"strings"
	"time"
)

// Key prefixes. A live API key reads sl_live_…, an agent's join token sl_join_….
const (
	PrefixKey  = "sl_live_"
	PrefixJoin = "sl_join_"
)

// MaxKeyLifetime is the longest an API key may live (DESIGN §7).
const MaxKeyLifetime = 366 * 24 * time.Hour

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func base62(b []byte, width int) string {
	n := new(big.Int).SetBytes(b)
	var out []byte
	base := big.NewInt(62)
	mod := new(big.Int)
	for n.Sign() > 0 {
		n.DivMod(n, base, mod)
		out = append(out, alphabet[mod.Int64()])
	}
	for len(out) < width {
		out = append(out, '0')
	}
	return string(out)
}

// NewSecret returns a new credential with the given prefix: 32 random
// base62 characters and a 6-character CRC32 checksum.
func NewSecret(prefix string) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	body := base62(b, 32)[:32]
	return prefix + body + checksum(prefix+body)
}

func checksum(s string) string {
	c := crc32.ChecksumIEEE([]byte(s))
	return base62([]byte{byte(c >> 24), byte(c >> 16), byte(c >> 8), byte(c)}, 6)[:6]
}

// WellFormed reports whether secret has the prefix and a valid checksum, so
// mistyped or truncated keys are refused without a database lookup.
func WellFormed(secret, prefix string) bool {
	if !strings.HasPrefix(secret, prefix) || len(secret) != len(prefix)+38 {
		return false
	}
	body := secret[:len(secret)-6]
	return checksum(body) == secret[len(secret)-6:]
}

// Hash is what the store keeps of a secret.
func Hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// DisplayPrefix is the part of a secret safe to show in lists.
func DisplayPrefix(secret string) string {
	if len(secret) < 12 {
		return secret
	}
	return secret[:12]
}
