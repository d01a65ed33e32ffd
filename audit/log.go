package audit

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/suanli/suanli"
)

// Defaults for the zero values of Log's fields.
const (
	DefaultInterval  = 30 * time.Second     // Log.Interval: under the 60 s DESIGN §7 asks for
	DefaultRetention = 186 * 24 * time.Hour // Log.Retention: six calendar months
)

// Store keeps the log. sqlstore implements it.
type Store interface {
	// AppendAuditEvent appends one entry in one transaction: it reads the
	// last entry's Seq and Hash (0 and "" when there is none), calls seal
	// with them, and inserts what seal returns. Appends are serialised.
	AppendAuditEvent(ctx context.Context, seal func(prevSeq int64, prevHash string) *suanli.AuditEvent) (*suanli.AuditEvent, error)
	// ScanAuditEvents calls fn for every entry in Seq order.
	ScanAuditEvents(ctx context.Context, fn func(*suanli.AuditEvent) error) error
	// FindAuditEvents lists entries by filter, newest first.
	FindAuditEvents(ctx context.Context, f suanli.AuditFilter) ([]*suanli.AuditEvent, error)
	// AppendAuditCheckpoint stores a signed checkpoint.
	AppendAuditCheckpoint(ctx context.Context, c *suanli.AuditCheckpoint) error
	// FindAuditCheckpoints returns every checkpoint in Seq order.
	FindAuditCheckpoints(ctx context.Context) ([]*suanli.AuditCheckpoint, error)
	// PurgeAuditEvents deletes the entries up to and including through and
	// the checkpoints before it (the one at through stays, as the anchor).
	PurgeAuditEvents(ctx context.Context, through int64) (int64, error)
}

// Log appends to, checkpoints, purges and verifies the audit log. Store and
// Key are required; the other zero values mean their defaults. It is safe
// for concurrent use.
type Log struct {
	Store  Store
	Key    ed25519.PrivateKey // signs checkpoints
	Now    func() time.Time   // default time.Now
	Logger *slog.Logger       // default: discard
	// HeadFile, when set, receives a copy of every checkpoint (mode 0600),
	// outside the database, so that truncating the database's entries and
	// checkpoints together is detected.
	HeadFile  string
	Interval  time.Duration // between checkpoints; DefaultInterval
	Retention time.Duration // entries older are purged; DefaultRetention

	mu sync.Mutex // serialises checkpoints and purges
}

func (l *Log) now() time.Time {
	if l.Now == nil {
		return time.Now().UTC()
	}
	return l.Now().UTC()
}

func (l *Log) logger() *slog.Logger {
	if l.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Logger
}

func (l *Log) interval() time.Duration {
	if l.Interval <= 0 {
		return DefaultInterval
	}
	return l.Interval
}

func (l *Log) retention() time.Duration {
	if l.Retention <= 0 {
		return DefaultRetention
	}
	return l.Retention
}

// PublicKey returns the key that verifies checkpoints.
func (l *Log) PublicKey() ed25519.PublicKey { return l.Key.Public().(ed25519.PublicKey) }

// Record appends e (its Seq, At, PrevHash and Hash are set here) and returns
// the stored entry.
func (l *Log) Record(ctx context.Context, e suanli.AuditEvent) (*suanli.AuditEvent, error) {
	at := l.now().Truncate(time.Microsecond)
	return l.Store.AppendAuditEvent(ctx, func(prevSeq int64, prevHash string) *suanli.AuditEvent {
		out := e
		if prevHash == "" {
			prevHash = Genesis
		}
		out.Seq, out.At, out.PrevHash = prevSeq+1, at, prevHash
		out.Hash = Hash(&out)
		return &out
	})
}

// Checkpoint signs the chain's head when it moved since the last
// checkpoint, stores the checkpoint and writes the head file. It returns
// nil when there was nothing new.
func (l *Log) Checkpoint(ctx context.Context) (*suanli.AuditCheckpoint, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkpointLocked(ctx)
}

func (l *Log) checkpointLocked(ctx context.Context) (*suanli.AuditCheckpoint, error) {
	head, err := l.Store.FindAuditEvents(ctx, suanli.AuditFilter{Limit: 1})
	if err != nil || len(head) == 0 {
		return nil, err
	}
	cps, err := l.Store.FindAuditCheckpoints(ctx)
	if err != nil {
		return nil, err
	}
	var prev int64
	if len(cps) > 0 {
		prev = cps[len(cps)-1].Seq
	}
	if prev >= head[0].Seq {
		return nil, nil
	}
	c := &suanli.AuditCheckpoint{Seq: head[0].Seq, Hash: head[0].Hash, PrevSeq: prev, At: l.now().Truncate(time.Microsecond)}
	Sign(l.Key, c)
	if err := l.Store.AppendAuditCheckpoint(ctx, c); err != nil {
		return nil, err
	}
	if l.HeadFile != "" {
		if err := writeHead(l.HeadFile, c); err != nil {
			return c, fmt.Errorf("audit head file: %w", err)
		}
	}
	return c, nil
}

func writeHead(path string, c *suanli.AuditCheckpoint) error {
	b, _ := json.MarshalIndent(c, "", "  ")
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path) // CreateTemp made it 0600
}

func readHead(path string) (*suanli.AuditCheckpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c suanli.AuditCheckpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// Purge deletes the entries older than the retention, up to the newest
// checkpoint older than it (which stays as the anchor), after recording the
// purge as an entry of its own. It returns how many entries went.
func (l *Log) Purge(ctx context.Context) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cutoff := l.now().Add(-l.retention())
	cps, err := l.Store.FindAuditCheckpoints(ctx)
	if err != nil {
		return 0, err
	}
	var anchor *suanli.AuditCheckpoint
	for _, c := range cps {
		if c.At.Before(cutoff) {
			anchor = c
		}
	}
	if anchor == nil {
		return 0, nil
	}
	first, err := l.firstSeq(ctx)
	if err != nil || first > anchor.Seq {
		return 0, err // already purged through the anchor
	}
	if _, err := l.Record(ctx, suanli.AuditEvent{Action: "audit.purge", Target: "audit", Result: "ok",
		Detail: purgeDetail(anchor.Seq, cutoff.Format(time.RFC3339))}); err != nil {
		return 0, err
	}
	n, err := l.Store.PurgeAuditEvents(ctx, anchor.Seq)
	if err != nil {
		return 0, err
	}
	l.logger().Info("audit log purged", "through_seq", anchor.Seq, "entries", n, "before", cutoff.Format(time.RFC3339))
	if _, err := l.checkpointLocked(ctx); err != nil {
		return n, err
	}
	return n, nil
}

var errStop = errors.New("stop")

func (l *Log) firstSeq(ctx context.Context) (int64, error) {
	var first int64
	err := l.Store.ScanAuditEvents(ctx, func(e *suanli.AuditEvent) error {
		first = e.Seq
		return errStop
	})
	if err == errStop {
		err = nil
	}
	return first, err
}

// Run checkpoints every Interval and purges hourly until ctx ends, then
// writes a last checkpoint. Errors are logged.
func (l *Log) Run(ctx context.Context) {
	if _, err := l.Checkpoint(ctx); err != nil {
		l.logger().Error("audit checkpoint", "err", err)
	}
	cp := time.NewTicker(l.interval())
	defer cp.Stop()
	purge := time.NewTicker(time.Hour)
	defer purge.Stop()
	for {
		select {
		case <-ctx.Done():
			if _, err := l.Checkpoint(context.WithoutCancel(ctx)); err != nil {
				l.logger().Error("audit checkpoint at shutdown", "err", err)
			}
			return
		case <-cp.C:
			if _, err := l.Checkpoint(ctx); err != nil {
				l.logger().Error("audit checkpoint", "err", err)
			}
		case <-purge.C:
			if _, err := l.Purge(ctx); err != nil {
				l.logger().Error("audit purge", "err", err)
			}
		}
	}
}

// Verify walks the whole log and its checkpoints. Each problem names the
// entry (or checkpoint) and what it points to: an edit, a deletion, an
// insertion or reordering, a truncation, or a forged checkpoint.
func (l *Log) Verify(ctx context.Context) (*suanli.AuditReport, error) {
	pub := l.PublicKey()
	r := &suanli.AuditReport{PublicKey: hex.EncodeToString(pub)}
	problem := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }

	cps, err := l.Store.FindAuditCheckpoints(ctx)
	if err != nil {
		return nil, err
	}
	r.Checkpoints = len(cps)
	cpAt := map[int64]*suanli.AuditCheckpoint{}
	for i, c := range cps {
		if !VerifyCheckpoint(pub, c) {
			problem("checkpoint at entry %d: signature does not verify (checkpoint edited or forged)", c.Seq)
			continue
		}
		cpAt[c.Seq] = c
		if i > 0 && c.PrevSeq != cps[i-1].Seq {
			problem("checkpoint at entry %d follows checkpoint %d, but the one before it is at entry %d (checkpoint deleted)", c.Seq, c.PrevSeq, cps[i-1].Seq)
		}
	}
	if len(cps) > 0 {
		last := cps[len(cps)-1]
		r.LastCheckpoint, r.LastCheckpointAt = last.Seq, last.At
	}

	purges := map[int64]bool{}
	var prevSeq int64
	var prevHash string
	first := true
	err = l.Store.ScanAuditEvents(ctx, func(e *suanli.AuditEvent) error {
		r.Entries++
		if first {
			first = false
			r.FirstSeq = e.Seq
			switch {
			case e.Seq == 1:
				prevHash = Genesis
			case cpAt[e.Seq-1] != nil:
				prevHash = cpAt[e.Seq-1].Hash
				r.PurgedThrough = e.Seq - 1
			default:
				problem("entries 1 to %d are missing and no checkpoint anchors a purge there (deleted)", e.Seq-1)
				prevHash = e.PrevHash
			}
		} else if e.Seq != prevSeq+1 {
			if e.Seq <= prevSeq {
				problem("entry %d comes after entry %d (reordered)", e.Seq, prevSeq)
			} else {
				problem("entries %d to %d are missing (deleted)", prevSeq+1, e.Seq-1)
			}
		}
		if e.PrevHash != prevHash {
			problem("entry %d does not link to the entry before it (an entry was deleted, inserted or reordered before it)", e.Seq)
		}
		if h := Hash(e); h != e.Hash {
			problem("entry %d: its contents do not match its hash (edited)", e.Seq)
		}
		if c := cpAt[e.Seq]; c != nil && c.Hash != e.Hash {
			problem("entry %d differs from what checkpoint %d signed (edited, or entries before it rewritten)", e.Seq, c.Seq)
		}
		if e.Action == "audit.purge" {
			if n, ok := parsePurge(e.Detail); ok {
				purges[n] = true
			}
		}
		prevSeq, prevHash = e.Seq, e.Hash
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.LastSeq = prevSeq
	if r.PurgedThrough > 0 && !purges[r.PurgedThrough] {
		problem("entries 1 to %d are gone, but no audit.purge entry records purging them (deleted)", r.PurgedThrough)
	}
	for _, c := range cps {
		if c.Seq > r.LastSeq {
			problem("checkpoint signed entry %d, but the log ends at entry %d (truncated)", c.Seq, r.LastSeq)
			break
		}
	}
	if r.LastCheckpoint > 0 {
		r.Unanchored = int(r.LastSeq - r.LastCheckpoint)
	} else {
		r.Unanchored = r.Entries
	}
	if l.HeadFile != "" {
		head, err := readHead(l.HeadFile)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if len(cps) > 0 {
				problem("head file %s is missing although checkpoints exist (deleted)", l.HeadFile)
			}
		case err != nil:
			problem("head file: %v", err)
		case !VerifyCheckpoint(pub, head):
			problem("head file %s: signature does not verify (edited or forged)", l.HeadFile)
		case head.Seq > r.LastSeq:
			problem("head file says entry %d was checkpointed, but the log ends at entry %d (truncated)", head.Seq, r.LastSeq)
		case head.Seq > r.LastCheckpoint:
			problem("head file says entry %d was checkpointed, but the newest checkpoint is at entry %d (checkpoints deleted)", head.Seq, r.LastCheckpoint)
		case cpAt[head.Seq] != nil && cpAt[head.Seq].Hash != head.Hash:
			problem("head file and checkpoint %d disagree (edited)", head.Seq)
		}
	}
	r.OK = len(r.Problems) == 0
	return r, nil
}
