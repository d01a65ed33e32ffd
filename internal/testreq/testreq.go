// Package testreq decides what a test does when a part it needs (Docker,
// PostgreSQL, Chromium, OpenSSH, shared test data) is missing: skip with a
// one-line reason on a developer's machine, fail in CI where
// SUANLI_TEST_REQUIRE=all (or a comma list naming the part) says the part must
// be there.
package testreq

import (
	"os"
	"strings"
	"testing"
)

// Required reports whether part must be present, per SUANLI_TEST_REQUIRE
// ("all", or a comma-separated list such as "docker,postgres").
func Required(part string) bool {
	v := os.Getenv("SUANLI_TEST_REQUIRE")
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p == "all" || p == part {
			return true
		}
	}
	return false
}

// Missing ends the test because part is missing: Fatal when the part is
// required, Skip otherwise. reason says what is missing and how to get it.
func Missing(tb testing.TB, part, reason string) {
	tb.Helper()
	if Required(part) {
		tb.Fatalf("%s required (SUANLI_TEST_REQUIRE) but missing: %s", part, reason)
	}
	tb.Skipf("skipping: %s missing: %s", part, reason)
}

// SharedData returns the path of a file under ../shared/data relative to the
// repository root (found by walking up from the test's directory), or ends
// the test through Missing("data", …) when it is not there.
func SharedData(tb testing.TB, rel string) string {
	tb.Helper()
	dir, _ := os.Getwd()
	for i := 0; i < 8; i++ {
		p := dir + "/../shared/data/" + rel
		if _, err := os.Stat(p); err == nil {
			return p
		}
		if _, err := os.Stat(dir + "/go.mod"); err == nil {
			break
		}
		dir += "/.."
	}
	if env := os.Getenv("SUANLI_SHARED_DATA"); env != "" {
		p := env + "/" + rel
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	Missing(tb, "data", "../shared/data/"+rel+" not found (set SUANLI_SHARED_DATA to the data directory)")
	return ""
}
