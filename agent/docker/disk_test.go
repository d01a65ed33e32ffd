package docker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/docker"
)

// TestDiskWatch runs where the storage driver enforces no size (this
// machine's fuse-overlayfs, or overlay2 without project quota): the disk
// watch stops an instance whose writable layer and anonymous volumes
// together exceed its rented disk, with SIGTERM and its grace, and Status
// reports it exited with why and what to do. A rented GB is 1 MiB here
// (DiskBytesPerGB), so that about a megabyte of writes exceeds DiskGB 1.
func TestDiskWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runtime(func(o *docker.Options) {
		o.DiskCheckInterval = 200 * time.Millisecond
		o.DiskBytesPerGB = 1 << 20
	})
	ctx := t.Context()
	spec := e.spec(20)
	MustEnsure(t, r, spec)
	rep := report(t, r, 20)
	if !strings.Contains(rep.Message, "disk 1 GB watched every 200ms") {
		if strings.Contains(rep.Message, "disk") {
			t.Fatalf("running message %q, want it to say the disk is watched", rep.Message)
		}
		t.Skipf("storage driver %s enforces the disk size itself: nothing to watch", r.StorageDriver())
	}
	ports, err := r.Ports(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	// 600 KiB in the image's anonymous volume (/vol), then 5 × 100 KiB in
	// the writable layer: each alone is under the 1 MiB, together over it.
	const inVolume = 600 << 10
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/write?n=%d", ports[8080], inVolume)); got != fmt.Sprintf("wrote %d", inVolume) {
		t.Fatalf("GET /write = %q", got)
	}
	start := time.Now()
	if err := r.CheckDisks(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("one disk check of one instance (storage driver %s): %v", r.StorageDriver(), time.Since(start).Round(100*time.Microsecond))
	if rep := report(t, r, 20); rep.Status != suanli.StatusRunning {
		t.Fatalf("with %d bytes written: %+v, want still running", inVolume, rep)
	}
	chunk := strings.Repeat("x", 100<<10)
	for i := range 5 {
		if code, _ := execOut(t, r, 20, "/t", "write", fmt.Sprintf("/layer%d", i), chunk); code != 0 {
			t.Fatalf("write /layer%d exited %d", i, code)
		}
	}
	waitFor(t, 15*time.Second, func() (bool, string) {
		rep = report(t, r, 20)
		return rep.Status == suanli.StatusExited, fmt.Sprintf("report = %+v, want exited by the disk watch", rep)
	})
	for _, want := range []string{"disk use 1.1 GB exceeded the rented 1 GB", "writable layer 0.5 GB", "volumes 0.6 GB", "recreate with a larger --disk"} {
		if !strings.Contains(rep.Message, want) {
			t.Errorf("exited message %q, want it to say %q", rep.Message, want)
		}
	}
	waitLog(t, r, 20, "got SIGTERM, bye\n") // stopped with SIGTERM, not killed

	// Like an exit: not started again until stopped, then running.
	MustEnsure(t, r, spec)
	if rep := report(t, r, 20); rep.Status != suanli.StatusExited || !strings.Contains(rep.Message, "--disk") {
		t.Errorf("after Ensure(running): %+v, want still exited with the disk message", rep)
	}
	spec.Desired = suanli.DesiredStopped
	MustEnsure(t, r, spec)
	if rep := report(t, r, 20); rep.Status != suanli.StatusStopped {
		t.Errorf("after Ensure(stopped): %+v, want stopped", rep)
	}
}
