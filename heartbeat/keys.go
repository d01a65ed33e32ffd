package heartbeat

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"time"

	"github.com/suanli/suanli"
)

// DefaultKeyPeriod is how long one heartbeat key is current.
const DefaultKeyPeriod = 24 * time.Hour

// Keys derives every machine's heartbeat keys from one secret, so that
// nothing is stored and every replica holding the same secret (the server's
// secret.key) derives the same keys. Time is cut into epochs of Period; the
// key of machine M for epoch E is HMAC-SHA256(secret, "suanli heartbeat key"
// ‖ M ‖ E). A full sync hands the agent the current epoch's key and the
// next one's (Channel), so that agents roll over without a sync; the
// control plane accepts the previous, current and next epochs' keys, and
// answers a beat signed with the previous one with a KindSync (FlagRekey).
// A leaked key is therefore useless two periods later. Keys is safe for
// concurrent use; its zero value is not usable (NewKeys).
type Keys struct {
	secret [32]byte
	period time.Duration
}

// NewKeys returns the key deriver for secret (at least 16 bytes; the
// control plane passes a key derived from its master secret). period ≤ 0
// means DefaultKeyPeriod.
func NewKeys(secret []byte, period time.Duration) (*Keys, error) {
	if len(secret) < 16 {
		return nil, errors.New("heartbeat: key secret shorter than 16 bytes")
	}
	if period <= 0 {
		period = DefaultKeyPeriod
	}
	k := &Keys{period: period}
	k.secret = sha256.Sum256(secret)
	return k, nil
}

// Epoch returns the epoch current at t.
func (k *Keys) Epoch(t time.Time) uint32 {
	return uint32(t.Unix() / int64(k.period/time.Second))
}

// start returns when epoch e begins.
func (k *Keys) start(e uint32) time.Time {
	return time.Unix(int64(e)*int64(k.period/time.Second), 0).UTC()
}

// Key returns machine id's key for epoch e.
func (k *Keys) Key(id int64, e uint32) [32]byte {
	m := hmac.New(sha256.New, k.secret[:])
	var b [20 + 12]byte
	copy(b[:20], "suanli heartbeat key")
	binary.BigEndian.PutUint64(b[20:28], uint64(id))
	binary.BigEndian.PutUint32(b[28:32], e)
	m.Write(b[:])
	var out [32]byte
	m.Sum(out[:0])
	return out
}

// Channel returns what a sync response tells machine id about the light
// channel at now: the address to beat to and the keys of the current and
// next epochs.
func (k *Keys) Channel(id int64, addr string, now time.Time) *suanli.HeartbeatChannel {
	e := k.Epoch(now)
	c := &suanli.HeartbeatChannel{Addr: addr}
	for _, ep := range []uint32{e, e + 1} {
		key := k.Key(id, ep)
		c.Keys = append(c.Keys, suanli.HeartbeatKey{Epoch: ep, From: k.start(ep), Key: key[:]})
	}
	return c
}

// usable reports whether a beat signed for epoch e is accepted at epoch
// now, and whether its agent should fetch a newer key.
func usable(e, now uint32) (ok, rekey bool) {
	switch {
	case e == now || e == now+1:
		return true, false
	case now > 0 && e == now-1:
		return true, true
	}
	return false, false
}
