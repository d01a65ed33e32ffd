package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/suanli/suanli/sched"
	_ "modernc.org/sqlite" // the baseline's store
)

// The durable side of the placement benchmark: the group-committed
// decision log, its replay, and the SQLite baseline.

// decisionLog is an append-only file of decisions, group-committed: the
// placer hands records over in small chunks and never waits; a writer
// goroutine takes everything handed over since its last fsync, writes it
// and fsyncs it as one batch. A decision is durable (its requester would be
// answered) when its batch's fsync returns.
type decisionLog struct {
	f       *os.File
	handoff int // records per hand-over from the placer
	local   []byte
	localN  int
	localAt time.Time

	mu        sync.Mutex
	cond      *sync.Cond
	pending   []byte
	pendingN  int
	pendingAt time.Time
	spare     []byte
	appended  int
	durable   int
	closed    bool
	err       error
	done      chan struct{}

	records, batches int
	syncTime         time.Duration
	acks             []time.Duration
}

func openDecisionLog(path string, handoff int) (*decisionLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	l := &decisionLog{f: f, handoff: handoff, done: make(chan struct{})}
	l.cond = sync.NewCond(&l.mu)
	go l.writer()
	return l, nil
}

func (l *decisionLog) writer() {
	defer close(l.done)
	for {
		l.mu.Lock()
		for l.pendingN == 0 && !l.closed {
			l.cond.Wait()
		}
		if l.pendingN == 0 {
			l.mu.Unlock()
			return
		}
		buf, n, at := l.pending, l.pendingN, l.pendingAt
		l.pending, l.pendingN = l.spare[:0], 0
		l.mu.Unlock()
		t := time.Now()
		_, err := l.f.Write(buf)
		if err == nil {
			err = l.f.Sync()
		}
		now := time.Now()
		l.mu.Lock()
		l.spare = buf[:0]
		l.durable += n
		l.batches++
		l.syncTime += now.Sub(t)
		l.acks = append(l.acks, now.Sub(at))
		if err != nil && l.err == nil {
			l.err = err
		}
		l.cond.Broadcast()
		l.mu.Unlock()
	}
}

func (l *decisionLog) add() {
	if l.localN == 0 {
		l.localAt = time.Now()
	}
	l.localN++
	l.records++
	if l.localN >= l.handoff {
		l.flush()
	}
}

// flush hands the placer's chunk to the writer.
func (l *decisionLog) flush() {
	if l.localN == 0 {
		return
	}
	l.mu.Lock()
	if l.pendingN == 0 {
		l.pendingAt = l.localAt
	}
	l.pending = append(l.pending, l.local...)
	l.pendingN += l.localN
	l.appended += l.localN
	l.cond.Broadcast()
	l.mu.Unlock()
	l.local, l.localN = l.local[:0], 0
}

func (l *decisionLog) place(d decision) error {
	b := append(l.local, 'P')
	b = binary.LittleEndian.AppendUint64(b, uint64(d.id))
	b = binary.LittleEndian.AppendUint64(b, uint64(d.host))
	b = binary.LittleEndian.AppendUint64(b, uint64(d.gpus))
	b = append(b, byte(d.class))
	b = binary.LittleEndian.AppendUint64(b, uint64(d.bid))
	b = append(b, byte(len(d.victims)))
	for _, v := range d.victims {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	l.local = b
	l.add()
	return nil
}

func (l *decisionLog) release(id, host int64, gpus sched.GPUSet) error {
	b := append(l.local, 'R')
	l.local = binary.LittleEndian.AppendUint64(b, uint64(id))
	l.add()
	return nil
}

// sync hands over what the placer holds and waits until every decision so
// far is on disk.
func (l *decisionLog) sync() error {
	l.flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.durable < l.appended && l.err == nil {
		l.cond.Wait()
	}
	return l.err
}

func (l *decisionLog) close() error {
	if err := l.sync(); err != nil {
		return err
	}
	l.mu.Lock()
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
	<-l.done
	return l.f.Close()
}

func (l *decisionLog) meanSync() time.Duration {
	if l.batches == 0 {
		return 0
	}
	return l.syncTime / time.Duration(l.batches)
}

func (l *decisionLog) latency(p int) time.Duration {
	if len(l.acks) == 0 {
		return 0
	}
	s := slices.Clone(l.acks)
	slices.Sort(s)
	return s[min(len(s)-1, (p*len(s)+99)/100-1)]
}

// replay reads the decision log from disk into an independent model (GPU
// masks per host) and counts over-allocations: a placement onto a GPU some
// other live claim holds, or beyond its host's GPUs. It checks the final
// state equals the engine's.
func replay(path string, w *world, c *sched.Cluster) (records, over int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	rd := bufio.NewReaderSize(f, 1<<20)
	type held struct {
		host int64
		gpus sched.GPUSet
	}
	claims := map[int64]held{}
	used := map[int64]sched.GPUSet{}
	u64 := func() (uint64, error) {
		var b [8]byte
		_, err := io.ReadFull(rd, b[:])
		return binary.LittleEndian.Uint64(b[:]), err
	}
	for {
		kind, err := rd.ReadByte()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return records, over, err
		}
		records++
		switch kind {
		case 'P':
			id, _ := u64()
			host, _ := u64()
			gpus, _ := u64()
			if _, err := rd.ReadByte(); err != nil { // class
				return records, over, err
			}
			if _, err := u64(); err != nil { // bid
				return records, over, err
			}
			nv, err := rd.ReadByte()
			if err != nil {
				return records, over, err
			}
			for i := 0; i < int(nv); i++ {
				v, err := u64()
				if err != nil {
					return records, over, err
				}
				hv, ok := claims[int64(v)]
				if !ok || hv.host != int64(host) {
					return records, over, fmt.Errorf("record %d: victim %d is not on host %d", records, v, host)
				}
				used[hv.host] &^= hv.gpus
				delete(claims, int64(v))
			}
			g := sched.GPUSet(gpus)
			if host < 1 || int(host) > len(w.gpus) || used[int64(host)]&g != 0 || g&^sched.All(w.gpus[host-1]) != 0 || g == 0 {
				over++
			}
			used[int64(host)] |= g
			claims[int64(id)] = held{host: int64(host), gpus: g}
		case 'R':
			id, err := u64()
			if err != nil {
				return records, over, err
			}
			hv, ok := claims[int64(id)]
			if !ok {
				return records, over, fmt.Errorf("record %d: release of unknown claim %d", records, id)
			}
			used[hv.host] &^= hv.gpus
			delete(claims, int64(id))
		default:
			return records, over, fmt.Errorf("record %d: unknown kind %q", records, kind)
		}
	}
	if len(claims) != c.Claims() {
		return records, over, fmt.Errorf("replay holds %d claims, the engine %d", len(claims), c.Claims())
	}
	for id, hv := range claims {
		h, ok := c.HostOf(id)
		if !ok || h.ID != hv.host {
			return records, over, fmt.Errorf("claim %d: replay says host %d, the engine disagrees", id, hv.host)
		}
	}
	return records, over, nil
}

// sqlSink writes each decision in its own SQLite transaction (WAL,
// synchronous=FULL), re-checking the host's GPUs inside it as the store's
// ApplyPlan does.
type sqlSink struct {
	db *sql.DB
}

func openSQLSink(path string) (*sqlSink, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	for _, s := range []string{
		`CREATE TABLE hosts (id INTEGER PRIMARY KEY, used INTEGER NOT NULL)`,
		`CREATE TABLE claims (id INTEGER PRIMARY KEY, host INTEGER NOT NULL, gpus INTEGER NOT NULL, class INTEGER NOT NULL, bid INTEGER NOT NULL)`,
	} {
		if _, err := db.Exec(s); err != nil {
			return nil, err
		}
	}
	return &sqlSink{db: db}, nil
}

// load writes the engine's state in one transaction (not timed).
func (s *sqlSink) load(c *sched.Cluster, w *world) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, h := range w.hosts {
		ch, _ := c.Host(h.ID)
		var used sched.GPUSet
		for _, cl := range ch.Claims {
			used |= cl.GPUs
			if _, err := tx.Exec(`INSERT INTO claims (id, host, gpus, class, bid) VALUES (?, ?, ?, ?, ?)`, cl.ID, h.ID, int64(cl.GPUs), int(cl.Class), int64(cl.Bid)); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(`INSERT INTO hosts (id, used) VALUES (?, ?)`, h.ID, int64(used)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (s *sqlSink) place(d decision) error {
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var used int64
	if err := tx.QueryRow(`SELECT used FROM hosts WHERE id = ?`, d.host).Scan(&used); err != nil {
		return err
	}
	var freed sched.GPUSet
	for _, v := range d.victims {
		var host, gpus int64
		if err := tx.QueryRow(`SELECT host, gpus FROM claims WHERE id = ?`, v).Scan(&host, &gpus); err != nil {
			return fmt.Errorf("victim %d: %w", v, err)
		}
		if host != d.host {
			return fmt.Errorf("victim %d is on host %d, not %d", v, host, d.host)
		}
		freed |= sched.GPUSet(gpus)
		if _, err := tx.Exec(`DELETE FROM claims WHERE id = ?`, v); err != nil {
			return err
		}
	}
	held := sched.GPUSet(used) &^ freed
	if held&d.gpus != 0 {
		return fmt.Errorf("over-allocation: host %d GPUs %b are held", d.host, held&d.gpus)
	}
	if _, err := tx.Exec(`INSERT INTO claims (id, host, gpus, class, bid) VALUES (?, ?, ?, ?, ?)`, d.id, d.host, int64(d.gpus), int(d.class), int64(d.bid)); err != nil {
		return err
	}
	if _, err := tx.Exec(`UPDATE hosts SET used = ? WHERE id = ?`, int64(held|d.gpus), d.host); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *sqlSink) release(id, host int64, gpus sched.GPUSet) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var used int64
	if err := tx.QueryRow(`SELECT used FROM hosts WHERE id = ?`, host).Scan(&used); err != nil {
		return err
	}
	if _, err := tx.Exec(`DELETE FROM claims WHERE id = ?`, id); err != nil {
		return err
	}
	if _, err := tx.Exec(`UPDATE hosts SET used = ? WHERE id = ?`, int64(sched.GPUSet(used)&^gpus), host); err != nil {
		return err
	}
	return tx.Commit()
}

// nullSink discards decisions: the baseline's fill (loaded in bulk after).
type nullSink struct{}

func (nullSink) place(decision) error                     { return nil }
func (nullSink) release(int64, int64, sched.GPUSet) error { return nil }

type baselineResult struct {
	placements, releases int
	elapsed              time.Duration
	rate                 float64
}

// runBaseline replays the same seeded fill and mixed stream on a fresh
// engine, making each decision durable in its own SQLite transaction, for
// f.baseline; then checks its decisions equal the main run's.
func runBaseline(f placeFlags, want []decision) (baselineResult, error) {
	s, err := openSQLSink(filepath.Join(f.dir, "baseline.db"))
	if err != nil {
		return baselineResult{}, err
	}
	defer s.db.Close()
	r := newPlaceRun(f, nullSink{})
	r.keep = len(want)
	if err := r.fill(); err != nil {
		return baselineResult{}, err
	}
	if err := s.load(r.c, r.world); err != nil {
		return baselineResult{}, err
	}
	r.out = s
	deadline := time.Now().Add(f.baseline)
	r.placements, r.releases = 0, 0
	r.recording = true
	start := time.Now()
	for time.Now().Before(deadline) && r.placements < len(want) {
		if err := r.mixedStep(); err != nil {
			return baselineResult{}, err
		}
	}
	elapsed := time.Since(start)
	for i, d := range r.decisions {
		if !d.equal(want[i]) {
			return baselineResult{}, fmt.Errorf("baseline decision %d = %+v, main run %+v: the runs disagree", i, d, want[i])
		}
	}
	return baselineResult{placements: r.placements, releases: r.releases, elapsed: elapsed, rate: float64(r.placements) / elapsed.Seconds()}, nil
}
