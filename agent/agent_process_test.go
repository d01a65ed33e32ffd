package agent_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/process"
)

// TestAgentWithProcessRuntime runs the loop with the real process runtime:
// the instance's command runs, its exit and its log reach the server long
// before the 30s heartbeat, and destroying it deletes its directory.
func TestAgentWithProcessRuntime(t *testing.T) {
	dir := t.TempDir()
	srv := newTestServer(t, 30*time.Second)
	spec := suanli.InstanceSpec{ID: 9, Desired: suanli.DesiredRunning, Image: "none",
		Cmd: []string{"sh", "-c", `echo "hello from $SUANLI_INSTANCE_ID"; sleep 0.3; echo bye >&2; exit 2`}}
	srv.set(spec)
	stop := startAgent(t, srv, process.New(dir, nil), nil)
	defer stop()

	deadline := time.Now().Add(10 * time.Second)
	for {
		r, _ := srv.report(9)
		if r.Status == suanli.StatusExited && srv.log(9) == "hello from 9\nbye\n" {
			if r.ExitCode == nil || *r.ExitCode != 2 {
				t.Errorf("report %+v, want exit code 2", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: report %+v, log %q; want exited and the whole log", r, srv.log(9))
		}
		time.Sleep(20 * time.Millisecond)
	}

	srv.set()
	instDir := filepath.Join(dir, "instances", "9")
	for {
		if _, err := os.Stat(instDir); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still there after the server dropped the instance", instDir)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
