package control_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
	"github.com/suanli/suanli/internal/pgtest"
	"github.com/suanli/suanli/sqlstore"
)

// market is a control plane on a real SQLite store with a fake clock, a
// renter, a host account and machines whose agents the test drives.
type market struct {
	t      testing.TB
	svc    *control.Service
	db     *sqlstore.DB
	now    time.Time
	renter context.Context
	host   context.Context
	hostID int64
	agents map[int64]*fakeAgent
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newMarket(tb testing.TB) *market {
	tb.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, pgtest.StoreDSN(tb, filepath.Join(tb.TempDir(), "m.db")))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	mk := &market{t: tb, db: db, now: t0, agents: map[int64]*fakeAgent{}}
	svc, err := control.New(ctx, db, control.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	svc.Now = func() time.Time { return mk.now }
	mk.svc = svc
	r, _, err := svc.CreateAccountWithKey(ctx, "renter", suanli.RoleUser, suanli.Dollars(10_000))
	if err != nil {
		tb.Fatal(err)
	}
	h, _, err := svc.CreateAccountWithKey(ctx, "host", suanli.RoleUser, 0)
	if err != nil {
		tb.Fatal(err)
	}
	mk.renter = suanli.NewContextWithPrincipal(ctx, &suanli.Principal{AccountID: r.ID, Role: r.Role, Scopes: []string{suanli.ScopeAll}})
	op := suanli.NewContextWithPrincipal(ctx, &suanli.Principal{AccountID: 999, Role: suanli.RoleOperator, Scopes: []string{suanli.ScopeAll}})
	if err := svc.SetQuota(op, r.ID, suanli.Quota{GPUs: 1000, Instances: 1000}); err != nil {
		tb.Fatal(err)
	}
	mk.host = suanli.NewContextWithPrincipal(ctx, &suanli.Principal{AccountID: h.ID, Role: h.Role, Scopes: []string{suanli.ScopeAll}})
	mk.hostID = h.ID
	return mk
}

// machine joins a machine with n RTX 4090s, lists it at price per GPU-hour
// with min bid per GPU-hour and a grace, and returns its id.
func (mk *market) machine(n int, price, minBid suanli.Money, graceS int) int64 {
	mk.t.Helper()
	tok, err := mk.svc.CreateJoinToken(mk.host, time.Hour)
	if err != nil {
		mk.t.Fatal(err)
	}
	hw := suanli.Hardware{Hostname: "rig", CPUArch: "amd64", CPUCores: 8 * n, RAMMB: int64(n) * 32 << 10, DiskFreeGB: 1000}
	for i := 0; i < n; i++ {
		hw.GPUs = append(hw.GPUs, suanli.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Name: "RTX 4090", MemoryMB: 24 << 10})
	}
	j, err := mk.svc.Join(context.Background(), suanli.JoinRequest{Token: tok.Token, Hardware: hw, Runtime: "process"})
	if err != nil {
		mk.t.Fatal(err)
	}
	disk := suanli.Money(100_000)
	if _, err := mk.svc.ListMachine(mk.host, j.MachineID, suanli.ListingUpdate{PriceGPU: &price, MinBid: &minBid, PriceDisk: &disk, PreemptGraceS: &graceS}); err != nil {
		mk.t.Fatal(err)
	}
	a := &fakeAgent{mk: mk, id: j.MachineID, procs: map[int64]*proc{},
		ctx: suanli.NewContextWithPrincipal(context.Background(), &suanli.Principal{AccountID: mk.hostID, Scopes: []string{suanli.ScopeAgent}, MachineID: j.MachineID})}
	mk.agents[j.MachineID] = a
	return j.MachineID
}

// advance moves the clock a second at a time; at each second every agent
// syncs a few times (to act on the desired state, and to report what it
// did), and the GPU invariants are checked.
func (mk *market) advance(d time.Duration) {
	mk.t.Helper()
	ids := sortedIDs(mk.agents)
	for end := mk.now.Add(d); mk.now.Before(end); {
		mk.now = mk.now.Add(time.Second)
		if mk.now.After(end) {
			mk.now = end
		}
		for round := 0; round < 2; round++ {
			for _, id := range ids {
				mk.agents[id].sync()
			}
			mk.checkGPUs()
		}
	}
}

func (mk *market) create(offer int64, gpus int, bid suanli.Money) (*suanli.Instance, error) {
	c := suanli.InstanceCreate{OfferID: offer, Image: "img", Cmd: []string{"train"}, GPUCount: gpus}
	if bid > 0 {
		c.Bid = &bid
	}
	return mk.svc.CreateInstance(mk.renter, c)
}

func (mk *market) mustCreate(offer int64, gpus int, bid suanli.Money) *suanli.Instance {
	mk.t.Helper()
	in, err := mk.create(offer, gpus, bid)
	if err != nil {
		mk.t.Fatalf("create on offer %d (%d GPUs, bid %s): %v", offer, gpus, bid, err)
	}
	return in
}

func (mk *market) get(id int64) *suanli.Instance {
	mk.t.Helper()
	in, err := mk.svc.FindInstanceByID(mk.renter, id)
	if err != nil {
		mk.t.Fatal(err)
	}
	return in
}

func (mk *market) wantStatus(id int64, status string) *suanli.Instance {
	mk.t.Helper()
	in := mk.get(id)
	if in.Status != status {
		mk.t.Fatalf("instance %d is %s (%s), want %s", id, in.Status, in.StatusMessage, status)
	}
	return in
}

// fakeAgent plays a host agent against the service: it runs "processes"
// for the specs it is sent, SIGTERMs a running one asked to stop and lets it
// stop within the grace, and, like the real agent, starts a process only
// when no process still stopping uses its GPUs. It records what happened.
type fakeAgent struct {
	mk      *market
	id      int64
	ctx     context.Context
	procs   map[int64]*proc
	version int64
	events  []agentEvent
}

type proc struct {
	gpus      []int
	running   bool
	sigtermAt time.Time // zero: none pending
	stopAt    time.Time
	remove    bool
}

type agentEvent struct {
	at   time.Time
	id   int64
	what string // start, sigterm, stop
}

func (a *fakeAgent) record(id int64, what string) {
	a.events = append(a.events, agentEvent{at: a.mk.now, id: id, what: what})
}

func (a *fakeAgent) reports() []suanli.InstanceReport {
	var out []suanli.InstanceReport
	ids := make([]int64, 0, len(a.procs))
	for id := range a.procs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := a.procs[id]
		st := suanli.StatusStopped
		if p.running {
			st = suanli.StatusRunning
		}
		out = append(out, suanli.InstanceReport{ID: id, Status: st})
	}
	return out
}

// step finishes stops whose time has come.
func (a *fakeAgent) step() {
	for _, id := range sortedIDs(a.procs) {
		p := a.procs[id]
		if p.running && !p.sigtermAt.IsZero() && !a.mk.now.Before(p.stopAt) {
			p.running, p.sigtermAt = false, time.Time{}
			a.record(id, "stop")
		}
		if p.remove && !p.running {
			delete(a.procs, id)
		}
	}
}

func sortedIDs[V any](m map[int64]V) []int64 {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (a *fakeAgent) stopping(gpus []int, except int64) bool {
	for id, p := range a.procs {
		if id != except && p.running && !p.sigtermAt.IsZero() {
			for _, g := range p.gpus {
				if slices.Contains(gpus, g) {
					return true
				}
			}
		}
	}
	return false
}

func (a *fakeAgent) sync() {
	a.mk.t.Helper()
	a.step()
	resp, err := a.mk.svc.Sync(a.ctx, &suanli.SyncRequest{MachineID: a.id, AgentVersion: "fake", Runtime: "process",
		KnownVersion: a.version, Instances: a.reports()})
	if err != nil {
		a.mk.t.Fatalf("sync machine %d: %v", a.id, err)
	}
	a.version = resp.Version
	// Like the real agent's reconcile, every stop and removal is under way
	// before any start looks at the GPUs.
	listed := map[int64]bool{}
	for _, spec := range resp.Instances {
		listed[spec.ID] = true
		if p := a.procs[spec.ID]; p != nil && spec.Desired != suanli.DesiredRunning && p.running && p.sigtermAt.IsZero() {
			a.sigterm(spec.ID, p, spec.StopGrace)
		}
	}
	for _, id := range sortedIDs(a.procs) {
		if p := a.procs[id]; !listed[id] && !p.remove {
			p.remove = true
			if p.running && p.sigtermAt.IsZero() {
				a.sigterm(id, p, time.Duration(id%3)*time.Second)
			}
		}
	}
	for _, spec := range resp.Instances {
		p := a.procs[spec.ID]
		if p == nil {
			p = &proc{}
			a.procs[spec.ID] = p
		}
		if spec.Desired == suanli.DesiredRunning && !p.running {
			p.gpus = slices.Clone(spec.GPUIndexes)
			if !a.stopping(p.gpus, spec.ID) {
				p.running = true
				a.record(spec.ID, "start")
			}
		}
	}
	a.step()
}

// sigterm notes the signal; the workload stops within the grace (some at
// once, some at its end: the agent kills those).
func (a *fakeAgent) sigterm(id int64, p *proc, grace time.Duration) {
	p.sigtermAt = a.mk.now
	p.stopAt = a.mk.now.Add(time.Duration(id%3) * grace / 2)
	a.record(id, "sigterm")
}

// checkGPUs fails when two running processes share a GPU on one machine,
// or two instances own one GPU in the store.
func (mk *market) checkGPUs() {
	mk.t.Helper()
	for _, a := range mk.agents {
		held := map[int]int64{}
		for _, id := range sortedIDs(a.procs) {
			p := a.procs[id]
			if !p.running {
				continue
			}
			for _, g := range p.gpus {
				if other, ok := held[g]; ok {
					mk.t.Fatalf("%s: machine %d GPU %d runs instances %d and %d at once", mk.now.Format(time.TimeOnly), a.id, g, other, id)
				}
				held[g] = id
			}
		}
		_, ins, err := mk.db.Snapshot(context.Background(), []int64{a.id})
		if err != nil {
			mk.t.Fatal(err)
		}
		owned := map[int]int64{}
		for _, in := range ins {
			if !in.OwnsGPUs() {
				continue
			}
			for _, g := range in.GPUIndexes {
				if other, ok := owned[g]; ok {
					mk.t.Fatalf("machine %d GPU %d owned by instances %d and %d", a.id, g, other, in.ID)
				}
				owned[g] = in.ID
			}
		}
	}
}

// checkPreemptions: every preemption the store recorded was followed by a
// SIGTERM to that workload (when it ran) before its stop, and the stop came
// within the grace (plus one sync).
func (mk *market) checkPreemptions(graceOf func(machine int64) time.Duration) {
	mk.t.Helper()
	for _, a := range mk.agents {
		live := true
		ins, _, err := mk.db.FindInstances(context.Background(), suanli.InstanceFilter{MachineID: &a.id, Live: &live, Limit: 10000}, mk.now)
		if err != nil {
			mk.t.Fatal(err)
		}
		all := false
		dead, _, err := mk.db.FindInstances(context.Background(), suanli.InstanceFilter{MachineID: &a.id, Live: &all, Limit: 10000}, mk.now)
		if err != nil {
			mk.t.Fatal(err)
		}
		for _, in := range append(ins, dead...) {
			evs, err := mk.db.InstanceEvents(context.Background(), in.ID)
			if err != nil {
				mk.t.Fatal(err)
			}
			for _, e := range evs {
				if e.Status != suanli.StatusPreempting {
					continue
				}
				// The workload's agent events after the preemption.
				var sig, stop time.Time
				for _, ae := range a.events {
					if ae.id != in.ID || ae.at.Before(e.At) {
						continue
					}
					if ae.what == "sigterm" && sig.IsZero() {
						sig = ae.at
					}
					if ae.what == "stop" && stop.IsZero() {
						stop = ae.at
					}
					if ae.what == "start" && sig.IsZero() {
						break // it never ran when preempted
					}
				}
				if !stop.IsZero() && (sig.IsZero() || sig.After(stop)) {
					mk.t.Fatalf("instance %d: stopped at %s without SIGTERM first (preempted at %s)", in.ID, stop, e.At)
				}
				if !stop.IsZero() && stop.Sub(e.At) > graceOf(a.id)+5*time.Second {
					mk.t.Fatalf("instance %d ran %s past its preemption, grace %s", in.ID, stop.Sub(e.At), graceOf(a.id))
				}
			}
		}
	}
}

// computeOnlyWhileRunning fails when a compute charge of an instance covers
// time it spent in neither running nor preempting.
func (mk *market) computeOnlyWhileRunning(id int64) {
	mk.t.Helper()
	ctx := context.Background()
	evs, err := mk.db.InstanceEvents(ctx, id)
	if err != nil {
		mk.t.Fatal(err)
	}
	sum, err := mk.db.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &id, Limit: 100000})
	if err != nil {
		mk.t.Fatal(err)
	}
	billed := func(at time.Time) bool {
		i := sort.Search(len(evs), func(i int) bool { return evs[i].At.After(at) }) - 1
		return i >= 0 && (evs[i].Status == suanli.StatusRunning || evs[i].Status == suanli.StatusPreempting)
	}
	for _, c := range sum.Charges {
		if c.Kind != suanli.MeterCompute || c.Amount == 0 {
			continue
		}
		for at := c.From; at.Before(c.To); at = at.Add(time.Second) {
			if !billed(at) {
				mk.t.Fatalf("instance %d: compute charged %s for %s–%s, but at %s it was not running (events %+v)", id, c.Amount, c.From, c.To, at, evs)
			}
		}
	}
}
