package heartbeat

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/suanli/suanli"
)

const shards = 64

// Table is the control plane's in-memory heartbeat table: per machine, the
// last beat heard (over the light channel or a sync that changed nothing),
// the last one known to be in the store, the desired-state version the
// agent should have, and where its beats come from. Beats land here; Flush
// writes every beat since the last flush to the store in one batch, so the
// database sees one write per flush interval, not one per beat.
//
// A Table is safe for concurrent use. Its zero value is not usable
// (NewTable).
type Table struct {
	// Now is the clock beats are dated by; time.Now by default. Set it
	// before use.
	Now func() time.Time
	// MaxSkew bounds how far a beat's time may be from Now: older or newer
	// beats are rejected as replays (DefaultMaxSkew when 0).
	MaxSkew time.Duration

	keys     *Keys
	shards   [shards]shard
	inflight atomic.Int64                   // machines a flush is writing
	poke     atomic.Pointer[func(id int64)] // set by a Server: tell the agent at once

	stats Stats
}

// DefaultMaxSkew is Table.MaxSkew's default.
const DefaultMaxSkew = 30 * time.Second

type shard struct {
	mu    sync.Mutex
	m     map[int64]*entry
	dirty []*entry // entries whose beat is newer than the store's
	_     [40]byte // keep shards' locks on separate cache lines
}

// entry is one machine's state. Fields are guarded by its shard's lock.
type entry struct {
	id        int64
	beat      int64 // µs: the last beat heard; 0 none since this process started
	persisted int64 // µs: the last beat known to be in the store
	dirty     bool  // listed in shard.dirty
	seq       int64 // the last accepted datagram's seq (replays are ≤)
	version   int64 // the desired state's current version, as last known
	needSync  bool  // the agent must do a full sync (desired state changed, status not online)
	wakes     uint64
	addr      netip.AddrPort // where its last beat came from
	epoch     uint32         // key caches the key of this epoch
	hasKey    bool
	key       [32]byte
}

// Stats counts what a Table and its Servers did; every field only grows.
type Stats struct {
	Beats     atomic.Int64 // beats accepted over the light channel
	Acks      atomic.Int64 // answered with KindAck
	Syncs     atomic.Int64 // answered with KindSync
	Pokes     atomic.Int64 // pokes sent
	Flushes   atomic.Int64 // batches written
	Flushed   atomic.Int64 // machines' beats written
	FlushErrs atomic.Int64
	FlushTime atomic.Int64             // ns spent in flushes' writes
	FlushMax  atomic.Int64             // ns: the longest write
	Rejected  [numReasons]atomic.Int64 // by Reason
}

// Reason is why a datagram was dropped.
type Reason int

// Reasons a datagram is dropped, counted in Stats.Rejected.
const (
	RejectTruncated Reason = iota // shorter than Size
	RejectMalformed               // wrong length, magic, version, kind or machine id
	RejectBadMAC                  // not signed with the machine's key (a wrong machine, a forgery)
	RejectOldKey                  // signed with a key past its epochs
	RejectReplay                  // seq not above the last accepted one
	RejectSkew                    // time too far from the server's clock (an old datagram replayed)
	RejectUnknown                 // machine unknown to this table (answered with KindSync)
	numReasons
)

var reasonNames = [numReasons]string{"truncated", "malformed", "bad_mac", "old_key", "replay", "skew", "unknown_machine"}

func (r Reason) String() string { return reasonNames[r] }

// NewTable returns an empty table whose beats are signed with keys.
func NewTable(keys *Keys) *Table {
	t := &Table{Now: time.Now, keys: keys}
	for i := range t.shards {
		t.shards[i].m = map[int64]*entry{}
	}
	return t
}

// Keys returns the key deriver the table checks beats with.
func (t *Table) Keys() *Keys { return t.keys }

// Stats returns the table's counters.
func (t *Table) Stats() *Stats { return &t.stats }

func (t *Table) shard(id int64) *shard {
	return &t.shards[uint64(id)%shards]
}

// getLocked returns id's entry, creating it when create is set.
func (s *shard) getLocked(id int64, create bool) *entry {
	e := s.m[id]
	if e == nil && create {
		e = &entry{id: id, version: -1}
		s.m[id] = e
	}
	return e
}

// beatLocked records a beat at us.
func (s *shard) beatLocked(e *entry, us int64) {
	if us <= e.beat {
		return
	}
	e.beat = us
	if e.beat > e.persisted && !e.dirty {
		e.dirty = true
		s.dirty = append(s.dirty, e)
	}
}

// Seen records a beat of machine id at at that arrived some other way
// (a sync that changed nothing): it is flushed with the others.
func (t *Table) Seen(id int64, at time.Time) {
	s := t.shard(id)
	s.mu.Lock()
	s.beatLocked(s.getLocked(id, true), at.UnixMicro())
	s.mu.Unlock()
}

// Persisted records that the store holds a beat of id at at (a sync that
// wrote it itself), so that it is not written again.
func (t *Table) Persisted(id int64, at time.Time) {
	s := t.shard(id)
	s.mu.Lock()
	e := s.getLocked(id, true)
	us := at.UnixMicro()
	e.persisted = max(e.persisted, us)
	e.beat = max(e.beat, us)
	s.mu.Unlock()
}

// Wakes returns a counter of id's wakes, to pass to Synced.
func (t *Table) Wakes(id int64) uint64 {
	s := t.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.m[id]; e != nil {
		return e.wakes
	}
	return 0
}

// Synced records that a full sync told machine id's agent the desired
// state of version. wakes is Wakes(id) from before the sync read the
// desired state: a wake since then keeps the agent asked to sync again.
func (t *Table) Synced(id int64, version int64, wakes uint64) {
	s := t.shard(id)
	s.mu.Lock()
	e := s.getLocked(id, true)
	e.version = max(e.version, version)
	if e.wakes == wakes {
		e.needSync = false
	}
	s.mu.Unlock()
}

// Wake marks machine id's desired state changed: its next beat is answered
// with KindSync, and when a Server is attached the agent is poked at once.
func (t *Table) Wake(id int64) {
	s := t.shard(id)
	s.mu.Lock()
	e := s.getLocked(id, false)
	if e != nil {
		e.needSync = true
		e.wakes++
	}
	s.mu.Unlock()
	if e == nil {
		return
	}
	if p := t.poke.Load(); p != nil {
		(*p)(id)
	}
}

// LastBeat returns the last beat heard from machine id, when this table has
// one.
func (t *Table) LastBeat(id int64) (time.Time, bool) {
	s := t.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.m[id]; e != nil && e.beat > 0 {
		return time.UnixMicro(e.beat).UTC(), true
	}
	return time.Time{}, false
}

// Len returns how many machines the table knows.
func (t *Table) Len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// Pending returns how many machines have beats not yet in the store
// (including those a flush is writing now).
func (t *Table) Pending() int {
	n := int(t.inflight.Load())
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.dirty)
		s.mu.Unlock()
	}
	return n
}

// Flush writes every beat newer than the store's, one per machine, with
// one call of write (one transaction), and returns how many it wrote. A
// failed write leaves them pending for the next flush. Flushes are not
// meant to run concurrently with each other (one flusher per process);
// beats keep landing while one runs.
func (t *Table) Flush(ctx context.Context, write func(context.Context, []suanli.MachineBeat) error) (int, error) {
	var batch []suanli.MachineBeat
	var taken []*entry
	defer func() { t.inflight.Add(-int64(len(taken))) }()
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for _, e := range s.dirty {
			e.dirty = false
			if e.beat > e.persisted {
				batch = append(batch, suanli.MachineBeat{MachineID: e.id, At: time.UnixMicro(e.beat).UTC()})
				taken = append(taken, e)
				t.inflight.Add(1)
			}
		}
		s.dirty = s.dirty[:0]
		s.mu.Unlock()
	}
	if len(batch) == 0 {
		return 0, nil
	}
	// In machine order: the store's index pages are then written in order,
	// each once, which costs it far less than the shards' random order.
	idx := make([]int, len(batch))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(batch[a].MachineID, batch[b].MachineID) })
	sorted, sortedTaken := make([]suanli.MachineBeat, len(batch)), make([]*entry, len(batch))
	for i, j := range idx {
		sorted[i], sortedTaken[i] = batch[j], taken[j]
	}
	batch, taken = sorted, sortedTaken
	start := time.Now()
	err := write(ctx, batch)
	took := int64(time.Since(start))
	t.stats.FlushTime.Add(took)
	for {
		m := t.stats.FlushMax.Load()
		if took <= m || t.stats.FlushMax.CompareAndSwap(m, took) {
			break
		}
	}
	for i, e := range taken {
		s := t.shard(e.id)
		s.mu.Lock()
		if err == nil {
			e.persisted = max(e.persisted, batch[i].At.UnixMicro())
		}
		if e.beat > e.persisted && !e.dirty {
			e.dirty = true
			s.dirty = append(s.dirty, e)
		}
		s.mu.Unlock()
	}
	if err != nil {
		t.stats.FlushErrs.Add(1)
		return 0, err
	}
	t.stats.Flushes.Add(1)
	t.stats.Flushed.Add(int64(len(batch)))
	return len(batch), nil
}

// Refresh folds what the store says of every machine into the table: a
// machine it did not know is added (so that its beats are taken without a
// sync after a restart), a newer desired-state version is taken (a change
// made through another replica: the agent's next beat is answered with
// KindSync), and a machine that is not online (the lease checker, perhaps
// on another replica, marked it suspect) must do a full sync, which brings
// it back online.
func (t *Table) Refresh(leases []suanli.MachineLease) {
	for _, l := range leases {
		s := t.shard(l.ID)
		s.mu.Lock()
		e := s.getLocked(l.ID, true)
		us := l.LastHeartbeat.UnixMicro()
		e.persisted = max(e.persisted, us)
		e.beat = max(e.beat, us)
		e.version = max(e.version, l.DesiredVersion)
		if l.Status != suanli.MachineOnline {
			e.needSync = true
		}
		s.mu.Unlock()
	}
}
