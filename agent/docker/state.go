package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// instanceState is what the runtime must remember about an instance beyond
// what the daemon keeps: whether this runtime stopped it (so a stopped
// container reads "stopped", not "exited", after an agent restart) and the
// traffic counters folded across container restarts (each start gets a new
// network namespace whose counters start at zero).
type instanceState struct {
	Stopped bool `json:"stopped"`
	// StartAsked is when this runtime last started the container. A
	// container inspected as exited with an end before it (a Status that
	// raced a start) is not reported as a new exit.
	StartAsked time.Time `json:"start_asked,omitzero"`
	// DiskExceeded is why the disk watch stopped the current run (disk.go):
	// Status reports the exit with it. A start clears it.
	DiskExceeded string `json:"disk_exceeded,omitempty"`

	RunStartedAt string `json:"run_started_at,omitempty"` // the run the Last counters belong to
	TxBase       uint64 `json:"tx_base"`                  // bytes of earlier runs
	RxBase       uint64 `json:"rx_base"`
	TxLast       uint64 `json:"tx_last"` // bytes of the current (or last) run, as last sampled
	RxLast       uint64 `json:"rx_last"`
}

func (r *Runtime) statePath(id int64) string {
	return filepath.Join(r.dataDir, r.fileStem(id)+".json")
}

func (r *Runtime) logPath(id int64) string {
	return filepath.Join(r.dataDir, r.fileStem(id)+".log")
}

func (r *Runtime) posPath(id int64) string {
	return filepath.Join(r.dataDir, r.fileStem(id)+".logpos")
}

func (r *Runtime) fileStem(id int64) string {
	if r.ns == "" {
		return "instance-" + strconv.FormatInt(id, 10)
	}
	return "instance-" + r.ns + "-" + strconv.FormatInt(id, 10)
}

// loadState reads the instance's state file; a missing or unreadable file
// reads as the zero state (logged when unreadable). Callers hold the
// instance lock.
func (r *Runtime) loadState(id int64) *instanceState {
	st := &instanceState{}
	b, err := os.ReadFile(r.statePath(id))
	if errors.Is(err, os.ErrNotExist) {
		return st
	} else if err != nil {
		r.log.Warn("read instance state", "instance_id", id, "err", err)
		return st
	}
	if err := json.Unmarshal(b, st); err != nil {
		r.log.Warn("decode instance state", "instance_id", id, "err", err)
		return &instanceState{}
	}
	return st
}

// saveState replaces the instance's state file atomically. Callers hold the
// instance lock.
func (r *Runtime) saveState(id int64, st *instanceState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return writeFileAtomic(r.statePath(id), b)
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}
