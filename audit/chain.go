package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

// Genesis is the PrevHash of the first entry.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// Hash returns the SHA-256 (hex) of e's canonical encoding: every field but
// Hash, PrevHash included, each length-prefixed so that no two different
// entries encode alike.
func Hash(e *suanli.AuditEvent) string {
	h := sha256.New()
	field := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
		h.Write([]byte{'\n'})
	}
	num := func(n int64) { field(strconv.FormatInt(n, 10)) }
	field("suanli-audit-v1")
	num(e.Seq)
	num(e.At.UnixMicro())
	num(e.ActorID)
	num(e.AccountID)
	num(e.KeyID)
	field(e.Action)
	field(e.Target)
	field(e.Source)
	field(e.RequestID)
	field(e.Result)
	field(e.Detail)
	field(e.PrevHash)
	return hex.EncodeToString(h.Sum(nil))
}

// checkpointText is what a checkpoint's signature covers.
func checkpointText(c *suanli.AuditCheckpoint) []byte {
	return []byte(fmt.Sprintf("suanli-audit-checkpoint-v1\nseq=%d\nhash=%s\nprev_seq=%d\nat=%d\n", c.Seq, c.Hash, c.PrevSeq, c.At.UnixMicro()))
}

// KeyID names a public key: the first 8 bytes of its SHA-256, in hex.
func KeyID(pub ed25519.PublicKey) string {
	h := sha256.Sum256(pub)
	return hex.EncodeToString(h[:8])
}

// Sign fills c's KeyID and Signature.
func Sign(key ed25519.PrivateKey, c *suanli.AuditCheckpoint) {
	c.KeyID = KeyID(key.Public().(ed25519.PublicKey))
	c.Signature = hex.EncodeToString(ed25519.Sign(key, checkpointText(c)))
}

// VerifyCheckpoint reports whether c carries a valid signature by pub.
func VerifyCheckpoint(pub ed25519.PublicKey, c *suanli.AuditCheckpoint) bool {
	sig, err := hex.DecodeString(c.Signature)
	if err != nil || c.KeyID != KeyID(pub) {
		return false
	}
	return ed25519.Verify(pub, checkpointText(c), sig)
}

// purgeDetail is the Detail of a purge entry; parsePurge reads it back.
func purgeDetail(through int64, cutoff string) string {
	return "through=" + strconv.FormatInt(through, 10) + " before=" + cutoff
}

func parsePurge(detail string) (int64, bool) {
	for _, f := range strings.Fields(detail) {
		if v, ok := strings.CutPrefix(f, "through="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
