package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// An instance token is sl_inst_ followed by 64 hex digits: the instance id
// and the expiry (Unix seconds), 8 bytes each, and the first 16 bytes of an
// HMAC-SHA256 over them under the server's instance-token key. It is not
// stored anywhere: the server checks the MAC, the expiry, and that the
// instance still exists and is not destroyed.
const instanceTokenLen = len(PrefixInstance) + 64

// InstanceTokenTTL is how long an instance token lives; the server hands a
// new one to the agent when less than half of it is left.
const InstanceTokenTTL = time.Hour

// InstanceToken returns the token for instance id that expires at exp.
// Tokens are deterministic, so one sync after another hands the agent the
// same token until the server decides to refresh it.
func InstanceToken(key []byte, id int64, exp time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(id))
	binary.BigEndian.PutUint64(b[8:], uint64(exp.Unix()))
	return PrefixInstance + hex.EncodeToString(b[:]) + hex.EncodeToString(instanceMAC(key, b[:]))
}

func instanceMAC(key, b []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("suanli instance token v1\n"))
	m.Write(b)
	return m.Sum(nil)[:16]
}

// ParseInstanceToken checks tok's MAC and returns its instance id and
// expiry. ok is false for anything malformed or forged; the caller checks
// the expiry against its clock.
func ParseInstanceToken(key []byte, tok string) (id int64, exp time.Time, ok bool) {
	if len(tok) != instanceTokenLen || tok[:len(PrefixInstance)] != PrefixInstance {
		return 0, time.Time{}, false
	}
	raw, err := hex.DecodeString(tok[len(PrefixInstance):])
	if err != nil {
		return 0, time.Time{}, false
	}
	if !hmac.Equal(raw[16:], instanceMAC(key, raw[:16])) {
		return 0, time.Time{}, false
	}
	id = int64(binary.BigEndian.Uint64(raw[:8]))
	exp = time.Unix(int64(binary.BigEndian.Uint64(raw[8:16])), 0).UTC()
	return id, exp, id > 0
}

// InstanceTokenExpiry is the expiry the server gives an instance token
// issued at now: the end of the half-TTL window after the current one, so
// a token is reissued every half TTL and always has at least half of it
// left when handed out.
func InstanceTokenExpiry(now time.Time) time.Time {
	half := InstanceTokenTTL / 2
	return now.Truncate(half).Add(InstanceTokenTTL)
}
