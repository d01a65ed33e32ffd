package auth_test

import (
	"strings"
	"testing"

	"github.com/suanli/suanli/auth"
)

func TestSecretFormat(t *testing.T) {
	s := auth.NewSecret(auth.PrefixKey)
	if !strings.HasPrefix(s, "sl_live_") || !auth.WellFormed(s, auth.PrefixKey) {
		t.Fatalf("NewSecret = %q: not well formed", s)
	}
	if s2 := auth.NewSecret(auth.PrefixKey); s2 == s {
		t.Fatalf("two secrets are equal: %q", s)
	}
	// Any single-character change breaks the checksum.
	b := []byte(s)
	b[10] ^= 1
	if auth.WellFormed(string(b), auth.PrefixKey) {
		t.Errorf("WellFormed(%q) = true after a typo", b)
	}
	if auth.WellFormed(s[:len(s)-1], auth.PrefixKey) {
		t.Errorf("WellFormed(truncated) = true")
	}
	if auth.WellFormed(s, auth.PrefixJoin) {
		t.Errorf("WellFormed with the wrong prefix = true")
	}
	if auth.Hash(s) == auth.Hash(s+"x") || len(auth.Hash(s)) != 64 {
		t.Errorf("Hash is not a sha256 hex digest")
	}
}
