package process_test

import (
	"os"
	"strings"
	"testing"
)

// The workload sees its token in SUANLI_TOKEN at start and reads the
// current one from SUANLI_TOKEN_FILE, which WriteToken refreshes.
func TestInstanceToken(t *testing.T) {
	r, _ := newRuntime(t)
	spec := shSpec(1, `echo "env=$SUANLI_TOKEN"; echo "file=$SUANLI_TOKEN_FILE"; while [ "$(cat "$SUANLI_TOKEN_FILE")" != sl_inst_second ]; do sleep 0.05; done; echo refreshed`)
	spec.Token = "sl_inst_first"
	if err := r.Ensure(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	log := waitLog(t, r, 1, "file=")
	if !strings.Contains(log, "env=sl_inst_first\n") {
		t.Fatalf("log %q: SUANLI_TOKEN is not the spec's token", log)
	}
	path := strings.TrimSpace(strings.SplitN(strings.SplitN(log, "file=", 2)[1], "\n", 2)[0])
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file %s: %v, mode %v; want 0600", path, err, fi)
	}
	if err := r.WriteToken(t.Context(), 1, "sl_inst_second"); err != nil {
		t.Fatal(err)
	}
	waitLog(t, r, 1, "refreshed")
	if err := r.WriteToken(t.Context(), 99, "sl_inst_x"); err == nil {
		t.Errorf("WriteToken for an unknown instance succeeded")
	}
}
