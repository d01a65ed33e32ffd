package agent

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/heartbeat"
)

// Limits on the log bytes one sync carries: at most MaxLogChunk per
// instance and MaxLogPerSync in all. What is left goes in the next sync,
// which is sent at once.
const (
	MaxLogChunk   = 256 << 10 // bytes of one instance's log in one sync
	MaxLogPerSync = 1 << 20   // log bytes of all instances in one sync
)

// Defaults for the zero values in Config.
const (
	DefaultPollInterval      = 500 * time.Millisecond // Config.PollInterval
	DefaultLogFlush          = time.Second            // Config.LogFlush
	DefaultHeartbeatInterval = 10 * time.Second       // Config.HeartbeatInterval (DESIGN §4)
	DefaultMaxBackoff        = 30 * time.Second       // Config.MaxBackoff
	DefaultFullSyncEvery     = time.Minute            // Config.FullSyncEvery
)

// beatRetry is how long the agent long-polls before it tries the light
// channel again, once beats went unanswered twice in a row (UDP blocked).
const beatRetry = 5 * time.Minute

// gpuSampleEvery is the shortest interval between two GPU samples.
const gpuSampleEvery = 5 * time.Second

// syncMargin is the most one sync may take beyond the heartbeat interval
// before the agent gives up on it (see Agent.syncTimeout).
const syncMargin = 30 * time.Second

// runtimeStopGrace is the stop grace the runtimes use for a spec that names
// none (process.DefaultStopGrace, docker.DefaultStopGrace).
const runtimeStopGrace = 10 * time.Second

// fenceMargin is the least time the agent keeps between a fence and the
// control plane's lost_after, for the workloads to stop (see fenceAfter).
const fenceMargin = time.Second

// Server is the control plane as the agent sees it: one long-polling sync
// call (DESIGN §2). The HTTP client (package http) and the control plane
// itself (suanli.AgentService) implement it. Sync must return when ctx ends.
type Server interface {
	Sync(ctx context.Context, r *suanli.SyncRequest) (*suanli.SyncResponse, error)
}

// Config is what an Agent needs. Server, Runtime and MachineID are
// required; every other zero value means the documented default.
type Config struct {
	// Server is the control plane (the HTTP client in production).
	Server Server
	// Runtime runs the instances; the agent calls it from one goroutine
	// per instance, as the Runtime contract says.
	Runtime Runtime
	// MachineID is the id the control plane gave this machine at join.
	MachineID int64
	// Hardware is sent with the first sync (and every sync until one
	// succeeds), so the control plane knows what the machine has.
	Hardware suanli.Hardware
	// Version is the agent's build version, sent with every sync.
	Version string
	// Logger receives the agent's events; nil discards them.
	Logger *slog.Logger
	// Now returns the current time; time.Now by default. It dates the last
	// successful sync, which fencing measures from.
	Now func() time.Time

	// PollInterval is how often the agent reads the runtime's status while
	// a sync waits on the server, to report a change at once.
	// DefaultPollInterval when 0.
	PollInterval time.Duration
	// LogFlush is the least time between syncs sent only because an
	// instance wrote to its log (state changes go at once).
	// DefaultLogFlush when 0.
	LogFlush time.Duration
	// HeartbeatInterval is used until the server sends its own: against a
	// server that answers a waiting sync at once, the agent still syncs only
	// once per interval. DefaultHeartbeatInterval when 0.
	HeartbeatInterval time.Duration
	// MaxBackoff caps the jittered, doubling delay between failed syncs.
	// DefaultMaxBackoff when 0.
	MaxBackoff time.Duration
	// FenceAfter is how long the agent runs instances without a successful
	// sync: past it, it stops every running instance, so that a rental the
	// control plane has given up on (and may have started elsewhere) never
	// runs twice. It is measured from when the last answered sync was sent,
	// and it is capped by the lost_after the control plane announces, less
	// two heartbeats (and at half of lost_after at least), so that an agent
	// configured for a longer lease still fences in time; the stop grace of
	// a fence is cut to what is left before lost_after. Zero disables
	// fencing.
	FenceAfter time.Duration
	// LeaseFile, when set, is renewed with every successful sync (and
	// answered beat): the fence's state, for a Watchdog in another process
	// that stops the workloads when the agent process itself cannot (it was
	// stopped, or died). Empty: no lease file.
	LeaseFile string
	// GPUSampler, when set, reads GPU load (SampleGPUs on a machine with
	// real NVIDIA GPUs); running instances with real GPUs then report their
	// GPUs' mean utilisation and summed memory use.
	GPUSampler func(ctx context.Context) ([]GPUSample, error)
	// SSH, when set, is this machine's SSH endpoint (agent/sshd), reported
	// with the hardware so that `suanli ssh` can reach it.
	SSH *suanli.SSHEndpoint
	// SSHAuthorities, when set, receives the SSH CA keys of every successful
	// sync reply (none when the control plane has SSH off): the only keys the
	// SSH endpoint may trust.
	SSHAuthorities func(keys []string)
	// DialBeats, when set, opens the light heartbeat channel that a sync
	// response advertises (suanli.HeartbeatChannel.Addr, as given: the
	// caller resolves ":PORT" against the server's host). Between full
	// syncs the agent then sends one signed UDP datagram per heartbeat
	// interval instead of a long poll (see Run). Nil: the agent long-polls
	// only.
	DialBeats func(addr string) (Beater, error)
	// FullSyncEvery is the longest the agent goes on light heartbeats
	// without a full sync while it holds instances (their telemetry,
	// traffic counters and fresh instance tokens ride on syncs); ten times
	// that while it holds none. DefaultFullSyncEvery when 0.
	FullSyncEvery time.Duration
}

// Beater is the agent's end of the light heartbeat channel
// (heartbeat.Client implements it).
type Beater interface {
	// SetKeys replaces the keys beats are signed with.
	SetKeys(keys []suanli.HeartbeatKey)
	// Send sends one beat: seq strictly increasing, the desired-state
	// version the agent has, now on the control plane's clock, and whether
	// it asks for an answer when nothing changed.
	Send(seq, version int64, now time.Time, ack bool) error
	// Replies delivers the control plane's verified answers and pokes.
	Replies() <-chan heartbeat.Message
	Close() error
}

// Agent keeps one machine in sync with the control plane. Create it with
// New and call Run once; Run is its only goroutine-facing method, so there
// is nothing else to synchronise. The zero value is not usable.
type Agent struct {
	cfg  Config
	rt   Runtime
	log  *slog.Logger
	now  func() time.Time
	wake chan struct{} // an instance operation finished: look at the status now

	mu    sync.Mutex           // guards insts, tasks and every state in them
	insts map[int64]*instState // instances the agent has acted on
	tasks map[string]*taskState
	// finalLogs are the log tails of removed instances, sent with the next
	// syncs until one is acknowledged.
	finalLogs []suanli.LogChunk
	// releases say what was done to removed instances' and volumes' data,
	// sent with the next syncs until one is acknowledged.
	releases []suanli.Release
	wg       sync.WaitGroup // instance workers

	// The rest is owned by the Run goroutine.
	volsEnsured  map[int64]bool // volumes EnsureVolume succeeded for in this run
	seq          int64
	version      int64 // desired-state version of the last response
	synced       bool  // a sync has succeeded
	heartbeat    time.Duration
	lostAfter    time.Duration // as the server last announced it; 0 until then
	clockOffset  time.Duration // the server's clock minus ours, from the last answer
	offsetKnown  bool
	lastSuccess  time.Time // when the last answered sync was sent
	lastReqAt    time.Time
	fenced       bool
	lastReports  []suanli.InstanceReport
	ackedReports map[int64]reportKey // reports of the last acknowledged sync
	ackedLog     map[int64]int64     // log offsets the server holds
	gpuSamples   []GPUSample
	gpuAt        time.Time

	// The light heartbeat channel (beat.go).
	channel   *suanli.HeartbeatChannel // as the last sync advertised it
	beater    Beater                   // open on channel.Addr; nil when none
	beaterTo  string
	beatSeq   int64
	beatMiss  int       // beats in a row that went unanswered
	beatsDown time.Time // long-poll until then: beats went unanswered
	lastFull  time.Time // when the last answered sync was sent
	noWait    bool      // the next sync must not wait: the state is wanted now
}

// New checks cfg and returns an Agent. It does not contact anything.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.Server == nil:
		return nil, errors.New("agent: no server")
	case cfg.Runtime == nil:
		return nil, errors.New("agent: no runtime")
	case cfg.MachineID <= 0:
		return nil, errors.New("agent: no machine id")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.LogFlush <= 0 {
		cfg.LogFlush = DefaultLogFlush
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.FullSyncEvery <= 0 {
		cfg.FullSyncEvery = DefaultFullSyncEvery
	}
	return &Agent{
		cfg:          cfg,
		rt:           cfg.Runtime,
		log:          cfg.Logger,
		now:          cfg.Now,
		wake:         make(chan struct{}, 1),
		tasks:        map[string]*taskState{},
		insts:        map[int64]*instState{},
		heartbeat:    cfg.HeartbeatInterval,
		ackedReports: map[int64]reportKey{},
		ackedLog:     map[int64]int64{},
	}, nil
}

// Run syncs with the control plane until ctx ends, then waits for the
// runtime operations in flight (which see ctx end) and returns nil.
// Instances keep running when Run returns; the next Run (after an agent
// restart) finds them through the runtime.
//
// When it syncs: the first sync goes out at once, without waiting, and
// carries the hardware. After that every sync is a long poll (Wait) that the
// server answers when the desired state changes or after the heartbeat
// interval, unless the agent has news: an instance whose status, message or
// exit code changed since the last acknowledged sync, or new log bytes. News
// is sent without Wait; news that turns up while a long poll waits (the
// agent reads the runtime's status every PollInterval, and at once when an
// instance operation finishes) cancels the poll and sends a new sync, at
// most one per LogFlush for log bytes alone. A sync that has no answer after
// the heartbeat interval plus 30s is abandoned. A failed sync is retried
// after a jittered, doubling backoff; the instances are left as they are,
// until FenceAfter passes without a successful sync.
//
// When the control plane advertises a light heartbeat channel and
// Config.DialBeats is set, the agent does not long-poll while it has no
// news: it sends a signed UDP beat per heartbeat interval (package
// heartbeat) and does a full sync, without waiting, when the answer says
// the desired state changed (or the control plane pokes it), when it has
// news, when FullSyncEvery has passed, or when a beat goes unanswered (the
// sync is the heartbeat then). An answered beat counts as a successful
// sync for fencing. Two unanswered beats in a row (UDP blocked) put it back
// on the long poll for five minutes.
func (a *Agent) Run(ctx context.Context) error {
	defer a.wg.Wait()
	defer a.closeBeater()
	a.seed(ctx)
	a.lastSuccess = a.now()
	a.renewLease()
	a.log.Info("agent started", "machine_id", a.cfg.MachineID, "runtime", a.rt.Name())
	failures := 0
	for ctx.Err() == nil {
		req := a.buildRequest(ctx)
		start := a.now()
		resp, err, cut := a.sync(ctx, req)
		switch {
		case ctx.Err() != nil:
		case cut:
			// A local change cut the long poll short: send it now.
		case err != nil:
			failures++
			d := a.backoff(failures)
			a.log.Warn("sync failed", "err", err, "attempt", failures, "retry_in", d)
			a.pause(ctx, d, false)
		case a.stale(start):
			// The answer took so long (a frozen agent, a hung connection)
			// that the control plane may have given this machine up
			// meanwhile: its desired state is not to be trusted. Fence
			// as if it had not come, and ask again at once.
			a.log.Warn("sync answer too late to trust", "sent_ago", a.now().Sub(start), "fence_after", a.fenceAfter())
			a.checkFence(ctx)
		default:
			if failures > 0 {
				a.log.Info("sync restored", "failed_attempts", failures)
				failures = 0
			}
			a.handle(ctx, req, resp, start)
			if a.beatable(ctx) {
				a.beat(ctx)
				continue
			}
			// A server that answers a waiting sync at once with nothing new
			// (one that does not long-poll) is polled once per heartbeat.
			if req.Wait && resp.Version == req.KnownVersion {
				if rest := a.heartbeat - a.now().Sub(start); rest > 0 {
					a.pause(ctx, rest, true)
				}
			}
		}
	}
	a.log.Info("agent stopping", "machine_id", a.cfg.MachineID)
	return nil
}

// sync sends req. While a waiting sync is held by the server it watches for
// news; news cancels the call and sync reports cut.
func (a *Agent) sync(ctx context.Context, req *suanli.SyncRequest) (resp *suanli.SyncResponse, err error, cut bool) {
	// The server holds a waiting sync for up to a heartbeat; past that and
	// a margin, the connection is taken for dead (a black-holed network
	// sends no reset) and the sync fails, to be retried.
	callCtx, cancel := context.WithTimeout(ctx, a.syncTimeout())
	defer cancel()
	type result struct {
		resp *suanli.SyncResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := a.cfg.Server.Sync(callCtx, req)
		done <- result{resp, err}
	}()
	tick := time.NewTicker(a.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			if r.err == nil && r.resp == nil {
				r.err = errors.New("empty sync response")
			}
			return r.resp, r.err, false
		case <-tick.C:
			a.checkFence(ctx)
		case <-a.wake:
		}
		if req.Wait && a.news(ctx) {
			cancel()
			if r := <-done; r.err == nil && r.resp != nil {
				return r.resp, nil, false // answered before the cancel took
			}
			return nil, nil, true
		}
	}
}

// pause waits d (or until ctx ends), checking the fence. When cutByNews is
// set, news ends the wait early.
func (a *Agent) pause(ctx context.Context, d time.Duration, cutByNews bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(a.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-tick.C:
			a.checkFence(ctx)
		case <-a.wake:
		}
		if cutByNews && a.news(ctx) {
			return
		}
	}
}

// backoff returns the delay before retry number n (1-based): 500ms doubling
// up to MaxBackoff, and at most a quarter of the fence interval (so that an
// agent tries several times before it fences, and finds a control plane that
// came back before it has to), drawn uniformly from its upper half so that
// agents cut off together do not come back together.
func (a *Agent) backoff(n int) time.Duration {
	d := a.cfg.MaxBackoff
	if f := a.fenceAfter(); f > 0 {
		d = min(d, max(f/4, time.Second))
	}
	if n < 20 {
		d = min(d, 500*time.Millisecond<<(n-1))
	}
	return d/2 + rand.N(d/2+1)
}

// syncTimeout is how long one sync may take: the server holds a waiting sync
// for up to a heartbeat, and a connection that has not answered a margin
// after that is taken for dead (a black-holed network sends no reset; an
// address that changed under a connection never answers). The margin is two
// heartbeats or half the fence interval, at most syncMargin, so that a hung
// connection is retried before the fence falls.
func (a *Agent) syncTimeout() time.Duration {
	return a.heartbeat + min(syncMargin, max(2*a.heartbeat, a.fenceAfter()/2))
}

// fenceAfter is the fence interval in force: Config.FenceAfter, capped by
// the lost_after the control plane announced less two heartbeats (at least
// half of lost_after), so that the agent has stopped its workloads before the
// control plane declares them lost and may relaunch them elsewhere. Zero:
// no fencing.
func (a *Agent) fenceAfter() time.Duration {
	f := a.cfg.FenceAfter
	if f <= 0 || a.lostAfter <= 0 {
		return f
	}
	return min(f, max(a.lostAfter-2*a.heartbeat, a.lostAfter/2))
}

// stale reports whether a sync answer arrived so long after its request was
// sent that the fence would have fallen meanwhile.
func (a *Agent) stale(sent time.Time) bool {
	f := a.fenceAfter()
	return f > 0 && a.now().Sub(sent) >= f
}

// buildRequest reads the runtime and makes the next sync request.
func (a *Agent) buildRequest(ctx context.Context) *suanli.SyncRequest {
	a.seq++
	reports := a.reports(ctx)
	req := &suanli.SyncRequest{
		MachineID:    a.cfg.MachineID,
		AgentVersion: a.cfg.Version,
		Runtime:      a.rt.Name(),
		Seq:          a.seq,
		KnownVersion: a.version,
		Instances:    a.onServerClock(reports),
	}
	if !a.synced {
		hw := a.cfg.Hardware
		req.Hardware = &hw
		req.SSH = a.cfg.SSH
	}
	// Logs go once the server has said how much of each log it holds
	// (the first response), so that a restarted agent resends nothing.
	if a.synced {
		budget := MaxLogPerSync
		for _, rep := range reports {
			if budget <= 0 {
				break
			}
			off := a.ackedLog[rep.ID]
			b, err := a.rt.ReadLog(ctx, rep.ID, off, min(MaxLogChunk, budget))
			if err != nil {
				a.log.Warn("read instance log failed", "instance_id", rep.ID, "err", err)
				continue
			}
			if len(b) > 0 {
				req.Logs = append(req.Logs, suanli.LogChunk{InstanceID: rep.ID, Offset: off, Data: b, Next: off + int64(len(b))})
				budget -= len(b)
			}
		}
	}
	if uc, ok := a.rt.(UsageCounter); ok {
		usage, err := uc.Usage(ctx)
		if err != nil {
			a.log.Warn("read usage counters failed", "err", err)
		}
		for _, id := range sortedKeys(usage) {
			u := usage[id]
			u.InstanceID, u.Seq = id, a.seq
			req.Usage = append(req.Usage, u)
		}
	}
	req.TaskResults = a.taskResults()
	a.mu.Lock()
	req.Logs = append(req.Logs, a.finalLogs...)
	req.Releases = slices.Clone(a.releases)
	a.mu.Unlock()
	req.Wait = a.synced && len(req.Logs) == 0 && len(req.Releases) == 0 && !a.reportsChanged(reports) && !a.unsentResults() && !a.noWait
	a.noWait = false
	a.lastReqAt = a.now()
	return req
}

// onServerClock returns a copy of reports with each EndedAt moved to the
// control plane's clock, or dropped while the agent has no answer to reckon
// the offset from (the server then takes the report's arrival).
func (a *Agent) onServerClock(reports []suanli.InstanceReport) []suanli.InstanceReport {
	out := slices.Clone(reports)
	for i := range out {
		if out[i].EndedAt == nil {
			continue
		}
		if !a.offsetKnown {
			out[i].EndedAt = nil
			continue
		}
		t := out[i].EndedAt.Add(a.clockOffset)
		out[i].EndedAt = &t
	}
	return out
}

// handle takes in a successful sync, whose request was sent at sent: what
// the server acknowledged, then the desired state. The fence is measured from
// sent, not from the answer: the server took the heartbeat when the request
// arrived, and a long poll holds the answer for up to a heartbeat after that.
func (a *Agent) handle(ctx context.Context, req *suanli.SyncRequest, resp *suanli.SyncResponse, sent time.Time) {
	a.synced = true
	a.lastSuccess, a.lastFull = sent, sent
	a.channel = resp.Heartbeat
	if a.fenced {
		a.fenced = false
		a.log.Info("control plane reachable again, fence lifted")
	}
	a.version = resp.Version
	if a.cfg.SSHAuthorities != nil {
		a.cfg.SSHAuthorities(resp.SSHCAKeys)
	}
	if resp.HeartbeatInterval > 0 {
		a.heartbeat = resp.HeartbeatInterval
	}
	if !resp.ServerTime.IsZero() {
		// The answer left the server at ServerTime and arrived now: the
		// offset is off by its transit only (milliseconds), where the time a
		// request takes to reach the server (a reconnect: seconds) is not.
		a.clockOffset, a.offsetKnown = resp.ServerTime.Sub(a.now()), true
	}
	if resp.LostAfter > 0 && resp.LostAfter != a.lostAfter {
		a.lostAfter = resp.LostAfter
		if f := a.fenceAfter(); f != a.cfg.FenceAfter {
			a.log.Warn("fence interval capped by the control plane's lease", "fence_after", a.cfg.FenceAfter, "lost_after", a.lostAfter, "fencing_after", f)
		}
	}
	a.renewLease()
	clear(a.ackedReports)
	for _, rep := range req.Instances {
		a.ackedReports[rep.ID] = keyOf(rep)
	}
	for _, c := range req.Logs {
		a.ackedLog[c.InstanceID] = c.Next
	}
	for id, off := range resp.LogOffsets {
		a.ackedLog[id] = off
	}
	for id := range a.ackedLog {
		if _, reported := a.ackedReports[id]; !reported && !slices.ContainsFunc(resp.Instances, func(s suanli.InstanceSpec) bool { return s.ID == id }) {
			delete(a.ackedLog, id)
		}
	}
	a.markSent(req.TaskResults)
	a.mu.Lock()
	a.finalLogs = slices.DeleteFunc(a.finalLogs, func(c suanli.LogChunk) bool {
		return slices.ContainsFunc(req.Logs, func(d suanli.LogChunk) bool { return d.InstanceID == c.InstanceID && d.Offset == c.Offset })
	})
	a.releases = a.releases[len(req.Releases):] // later ones were appended after
	a.mu.Unlock()
	a.startTasks(ctx, resp.Tasks)
	a.reconcileVolumes(ctx, resp.Volumes)
	a.reconcile(ctx, resp.Instances, req.Instances)
}

// news reports whether there is something to tell the server that the last
// acknowledged sync did not carry: a changed instance report, or (at most
// once per LogFlush) new log bytes.
func (a *Agent) news(ctx context.Context) bool {
	reports := a.reports(ctx)
	if a.reportsChanged(reports) || a.unsentResults() || a.unsentReleases() {
		return true
	}
	if !a.synced || a.now().Sub(a.lastReqAt) < a.cfg.LogFlush {
		return false
	}
	for _, rep := range reports {
		if b, err := a.rt.ReadLog(ctx, rep.ID, a.ackedLog[rep.ID], 1); err == nil && len(b) > 0 {
			return true
		}
	}
	return false
}

// unsentReleases reports whether a release report waits to be sent.
func (a *Agent) unsentReleases() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.releases) > 0
}

// reportKey is the part of an instance report whose change is news;
// telemetry is not.
type reportKey struct {
	status, message string
	exitCode        int
	hasExit         bool
	startedAt       int64
}

func keyOf(r suanli.InstanceReport) reportKey {
	k := reportKey{status: r.Status, message: r.Message}
	if r.ExitCode != nil {
		k.exitCode, k.hasExit = *r.ExitCode, true
	}
	if r.StartedAt != nil {
		k.startedAt = r.StartedAt.UnixNano()
	}
	return k
}

// reportsChanged compares reports with those of the last acknowledged sync.
func (a *Agent) reportsChanged(reports []suanli.InstanceReport) bool {
	if len(reports) != len(a.ackedReports) {
		return true
	}
	for _, r := range reports {
		if k, ok := a.ackedReports[r.ID]; !ok || k != keyOf(r) {
			return true
		}
	}
	return false
}

// nudge asks the Run goroutine to look at the status now.
func (a *Agent) nudge() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func sortedKeys[V any](m map[int64]V) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
