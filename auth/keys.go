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

// Credential prefixes, so that a leaked credential is recognisable (and a
// secret scanner can match it): a live API key reads sl_live_…, a temporary
// token sl_tmp_…, an agent's join token sl_join_…, a team invitation
// sl_inv_…, an instance's own token sl_inst_….
const (
	PrefixKey      = "sl_live_"
	PrefixTemp     = "sl_tmp_"
	PrefixJoin     = "sl_join_"
	PrefixInvite   = "sl_inv_"
	PrefixInstance = "sl_inst_"
)

// Lifetimes (DESIGN §7). An API key lives at most MaxKeyLifetime; a
// temporary token between MinTempLifetime and MaxTempLifetime,
// DefaultTempLifetime when none is asked for.
const (
	MaxKeyLifetime      = 366 * 24 * time.Hour
	MinTempLifetime     = 15 * time.Minute
	MaxTempLifetime     = 12 * time.Hour
	DefaultTempLifetime = time.Hour
)

// MaxActivePerName is how many active keys may share a name: two, so that a
// key can be rotated (the new one issued before the old one is revoked)
// without ever piling up forgotten keys.
const MaxActivePerName = 2

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
