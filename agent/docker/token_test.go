package docker_test

import (
	"strings"
	"testing"

	"github.com/suanli/suanli/agent/docker"
)

// The instance token reaches the workload in its environment at start and
// in SUANLI_TOKEN_FILE, which WriteToken refreshes in the running container.
func TestInstanceToken(t *testing.T) {
	t.Parallel()
	for name, ro := range map[string]bool{"writable rootfs": false, "read-only rootfs": true} {
		t.Run(name, func(t *testing.T) { testInstanceToken(t, ro) })
	}
}

func testInstanceToken(t *testing.T, readOnly bool) {
	e := newEnv(t)
	r := e.runtime(func(o *docker.Options) { o.ReadOnlyRootfs = readOnly })
	spec := e.spec(1)
	spec.Token = "sl_inst_first"
	MustEnsure(t, r, spec)
	if code, out := execOut(t, r, 1, "/t", "env", "SUANLI_TOKEN"); code != 0 || out != "sl_inst_first" {
		t.Errorf("SUANLI_TOKEN = %q (exit %d), want the spec's token", out, code)
	}
	if code, out := execOut(t, r, 1, "/t", "env", "SUANLI_TOKEN_FILE"); code != 0 || out != "/run/suanli/token" {
		t.Errorf("SUANLI_TOKEN_FILE = %q (exit %d)", out, code)
	}
	if code, out := execOut(t, r, 1, "/t", "cat", "/run/suanli/token"); code != 0 || strings.TrimSpace(out) != "sl_inst_first" {
		t.Errorf("token file = %q (exit %d), want the first token", out, code)
	}
	if err := r.WriteToken(t.Context(), 1, "sl_inst_second"); err != nil {
		t.Fatal(err)
	}
	if code, out := execOut(t, r, 1, "/t", "cat", "/run/suanli/token"); code != 0 || strings.TrimSpace(out) != "sl_inst_second" {
		t.Errorf("token file after WriteToken = %q (exit %d), want the second token", out, code)
	}
	if err := r.WriteToken(t.Context(), 99, "sl_inst_x"); err == nil {
		t.Errorf("WriteToken for an instance without a container succeeded")
	}
}
