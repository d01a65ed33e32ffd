package control_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
	"github.com/suanli/suanli/internal/pgtest"
	"github.com/suanli/suanli/sqlstore"
)

// replica is one control plane of a cluster sharing one database.
type replica struct {
	name   string
	db     *sqlstore.DB
	svc    *control.Service
	cancel context.CancelFunc
	done   chan struct{}
}

// cluster is n replicas, each with its own store handle, on one SQLite file.
type cluster struct {
	t        *testing.T
	replicas []*replica
	op       context.Context
}

const replicaTTL = 2 * time.Second // generous: the tests share two cores with the whole suite

func newCluster(t *testing.T, dsn string, n int, settle time.Duration) *cluster {
	t.Helper()
	key := make([]byte, 32) // replicas share the server's secret key
	c := &cluster{t: t, op: suanli.NewContextWithPrincipal(context.Background(),
		&suanli.Principal{AccountID: 999, Role: suanli.RoleOperator, Scopes: []string{suanli.ScopeAll}})}
	for i := 0; i < n; i++ {
		db, err := sqlstore.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		svc, err := control.New(context.Background(), db, control.Config{SecretKey: key, LeaseTTL: replicaTTL, SettleInterval: settle},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		c.replicas = append(c.replicas, &replica{name: fmt.Sprintf("r%d", i), db: db, svc: svc})
	}
	for _, r := range c.replicas {
		c.start(r)
	}
	t.Cleanup(func() {
		for _, r := range c.replicas {
			r.cancel()
			<-r.done
		}
	})
	return c
}

func (c *cluster) start(r *replica) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		r.svc.Run(ctx)
	}()
}

// leaders returns the replicas that say they run the singleton loops.
func (c *cluster) leaders() []*replica {
	var out []*replica
	for _, r := range c.replicas {
		if r.svc.ClusterState().Leader {
			out = append(out, r)
		}
	}
	return out
}

// waitLeader waits up to d for exactly one leader among live (not
// excluded) replicas and returns it with how long it took.
func (c *cluster) waitLeader(d time.Duration, excluded *replica) (*replica, time.Duration) {
	c.t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		ls := c.leaders()
		if len(ls) == 1 && ls[0] != excluded {
			return ls[0], time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("no single leader within %s: %d say they lead", d, len(c.leaders()))
	return nil, 0
}

// TestReplicasShareOneDatabase runs three control planes on one database
// (a SQLite file; a PostgreSQL schema when SUANLI_TEST_POSTGRES_DSN is set):
// only one runs the singleton loops; when it shuts down, and when it goes
// silent (its store fails), another takes them over within the lease TTL;
// closes stay contiguous and never settle a period twice; a listing made
// on one replica is in every other replica's search within a second; and
// an agent waiting on one replica is woken by a rental made on another.
func TestReplicasShareOneDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for several lease TTLs")
	}
	t.Run("sqlite", func(t *testing.T) { testReplicas(t, filepath.Join(t.TempDir(), "cluster.db")) })
	t.Run("postgres", func(t *testing.T) { testReplicas(t, pgtest.DSN(t)) })
}

func testReplicas(t *testing.T, dsn string) {
	c := newCluster(t, dsn, 3, 200*time.Millisecond)
	r0 := c.replicas[0]
	ctx := context.Background()

	// Watch for two leaders at once for the whole test.
	watch, stopWatch := context.WithCancel(ctx)
	var dual []string
	var watchWG sync.WaitGroup
	watchWG.Add(1)
	go func() {
		defer watchWG.Done()
		for watch.Err() == nil {
			if ls := c.leaders(); len(ls) > 1 {
				dual = append(dual, fmt.Sprintf("%s+%s", ls[0].name, ls[1].name))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	first, took := c.waitLeader(replicaTTL, nil)
	t.Logf("first leader %s after %s", first.name, took)

	// A host lists a machine on r0; a renter rents on it there.
	host, _, err := r0.svc.CreateAccountWithKey(ctx, "host", suanli.RoleUser, 0)
	if err != nil {
		t.Fatal(err)
	}
	renter, _, err := r0.svc.CreateAccountWithKey(ctx, "renter", suanli.RoleUser, suanli.Dollars(1000))
	if err != nil {
		t.Fatal(err)
	}
	hostCtx := suanli.NewContextWithPrincipal(ctx, &suanli.Principal{AccountID: host.ID, Role: host.Role, Scopes: []string{suanli.ScopeAll}})
	renterCtx := suanli.NewContextWithPrincipal(ctx, &suanli.Principal{AccountID: renter.ID, Role: renter.Role, Scopes: []string{suanli.ScopeAll}})
	join := func(r *replica, name string) (int64, context.Context) {
		t.Helper()
		tok, err := r.svc.CreateJoinToken(hostCtx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		hw := suanli.Hardware{Hostname: name, CPUArch: "amd64", CPUCores: 16, RAMMB: 64 << 10, DiskFreeGB: 1000,
			GPUs: []suanli.GPU{{Index: 0, UUID: name + "-0", Name: "RTX 4090", MemoryMB: 24 << 10}, {Index: 1, UUID: name + "-1", Name: "RTX 4090", MemoryMB: 24 << 10}}}
		j, err := r.svc.Join(ctx, suanli.JoinRequest{Token: tok.Token, Hardware: hw, Runtime: "process"})
		if err != nil {
			t.Fatal(err)
		}
		return j.MachineID, suanli.NewContextWithPrincipal(ctx, &suanli.Principal{AccountID: host.ID, Scopes: []string{suanli.ScopeAgent}, MachineID: j.MachineID})
	}
	price, disk := suanli.Money(3_600_000), suanli.Money(100_000) // $3.60/h: a micro-dollar a millisecond
	list := func(r *replica, id int64) time.Time {
		t.Helper()
		if _, err := r.svc.ListMachine(hostCtx, id, suanli.ListingUpdate{PriceGPU: &price, PriceDisk: &disk}); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	// seen waits until every replica but the lister finds machine id in a search.
	seen := func(lister *replica, id int64, listed time.Time) {
		t.Helper()
		for _, r := range c.replicas {
			if r == lister {
				continue
			}
			for {
				res, err := r.svc.SearchOffers(renterCtx, suanli.OfferQuery{Query: fmt.Sprintf("machine_id=%d", id)})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Offers) == 1 {
					break
				}
				if time.Since(listed) > time.Second {
					t.Fatalf("machine %d listed on %s is not in %s's search after 1s", id, lister.name, r.name)
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("listing on %s seen by %s after %s", lister.name, r.name, time.Since(listed).Round(time.Millisecond))
		}
	}
	m1, agent1 := join(r0, "rig1")
	seen(r0, m1, list(r0, m1))

	// The agent long-polls r2; a rental made on r1 wakes it at once.
	r1, r2 := c.replicas[1], c.replicas[2]
	v0, err := r2.svc.Sync(agent1, &suanli.SyncRequest{MachineID: m1, Runtime: "process"})
	if err != nil {
		t.Fatal(err)
	}
	woke := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		resp, err := r2.svc.Sync(agent1, &suanli.SyncRequest{MachineID: m1, Runtime: "process", Wait: true, KnownVersion: v0.Version})
		if err != nil || len(resp.Instances) != 1 {
			t.Errorf("long poll on r2: %v, %+v", err, resp)
		}
		woke <- time.Since(start)
	}()
	time.Sleep(100 * time.Millisecond) // let it wait
	in, err := r1.svc.CreateInstance(renterCtx, suanli.InstanceCreate{OfferID: m1, Image: "img", Cmd: []string{"train"}, GPUCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-woke:
		t.Logf("agent waiting on r2 woken %s after the rental on r1", d-100*time.Millisecond)
	case <-time.After(2 * time.Second):
		t.Fatal("agent waiting on r2 not woken within 2s of a rental on r1 (heartbeat interval is 10s)")
	}
	// The agent runs it and keeps heartbeating, round robin over the replicas.
	beat, stopBeat := context.WithCancel(ctx)
	var beatWG sync.WaitGroup
	beatWG.Add(1)
	go func() {
		defer beatWG.Done()
		for i := 0; beat.Err() == nil; i++ {
			r := c.replicas[i%len(c.replicas)]
			if _, err := r.svc.Sync(agent1, &suanli.SyncRequest{MachineID: m1, Runtime: "process",
				Instances: []suanli.InstanceReport{{ID: in.ID, Status: suanli.StatusRunning}}}); err != nil && beat.Err() == nil {
				t.Logf("sync via %s: %v", r.name, err) // the silent replica's store is closed
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	running := time.Now()
	time.Sleep(600 * time.Millisecond) // a few closes under the first leader

	// The leader shuts down cleanly: it releases the lease, and another takes
	// over at once.
	first.cancel()
	<-first.done
	second, took := c.waitLeader(replicaTTL, first)
	t.Logf("after %s shut down, %s leads after %s", first.name, second.name, took)
	if took > replicaTTL {
		t.Errorf("takeover after a clean shutdown took %s, want within the TTL %s", took, replicaTTL)
	}
	// A listing made on the new leader reaches the survivor.
	m2, _ := join(second, "rig2")
	survivors := []*replica{}
	for _, r := range c.replicas {
		if r != first {
			survivors = append(survivors, r)
		}
	}
	listed := list(second, m2)
	for _, r := range survivors {
		if r == second {
			continue
		}
		for {
			res, err := r.svc.SearchOffers(renterCtx, suanli.OfferQuery{Query: fmt.Sprintf("machine_id=%d", m2)})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Offers) == 1 {
				break
			}
			if time.Since(listed) > time.Second {
				t.Fatalf("machine %d listed on %s not in %s's search after 1s", m2, second.name, r.name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	time.Sleep(600 * time.Millisecond)

	// The new leader goes silent: its store fails under it, so it can neither
	// renew nor close. The last replica takes over within the TTL.
	silent := time.Now()
	second.db.Close()
	var third *replica
	for third == nil {
		for _, r := range survivors {
			if r != second && r.svc.ClusterState().Leader {
				third = r
			}
		}
		if time.Since(silent) > 2*replicaTTL {
			t.Fatalf("nobody took over within %s of %s going silent", 2*replicaTTL, second.name)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took = time.Since(silent)
	t.Logf("after %s went silent, %s leads after %s", second.name, third.name, took)
	if took > replicaTTL {
		t.Errorf("takeover after the leader went silent took %s, want within the TTL %s", took, replicaTTL)
	}
	if second.svc.ClusterState().Leader {
		t.Errorf("%s still says it leads after %s leads", second.name, third.name)
	}
	time.Sleep(600 * time.Millisecond)
	stopBeat()
	beatWG.Wait()
	stopWatch()
	watchWG.Wait()
	if len(dual) > 0 {
		t.Errorf("two replicas led at once %d times: %v", len(dual), dual[:min(len(dual), 5)])
	}

	// Every close settled a later period than the one before, under a term
	// that never went back; the ledger balances; what was charged is no more
	// than the instance ran.
	closes, err := third.db.FindCloses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	terms := map[int64]int{}
	for i, cl := range closes {
		terms[cl.Term]++
		if cl.ID != int64(i+1) {
			t.Fatalf("close %d at position %d: ids must be contiguous", cl.ID, i)
		}
		if i > 0 && (!cl.Through.After(closes[i-1].Through) || cl.Term < closes[i-1].Term) {
			t.Fatalf("close %d (through %s, term %d) follows close %d (through %s, term %d)", cl.ID, cl.Through, cl.Term,
				closes[i-1].ID, closes[i-1].Through, closes[i-1].Term)
		}
	}
	if len(terms) < 3 {
		t.Errorf("closes were made under terms %v, want three leaders' terms", terms)
	}
	t.Logf("%d closes under terms %v", len(closes), terms)
	chk, err := third.db.CheckLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if chk.PostingSum != 0 || chk.BalanceSum != 0 || len(chk.Mismatched)+len(chk.UnbalancedTxn)+len(chk.SubLedger) > 0 {
		t.Fatalf("ledger check: %+v", chk)
	}
	settled, err := third.db.InstanceSettled(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	ran := time.Since(running) + time.Second // it started running before `running`, at its first report
	if most := suanli.MulDiv(price, ran.Microseconds(), time.Hour.Microseconds()) + suanli.Money(1000); settled > most || settled <= 0 {
		t.Errorf("instance %d settled %s for at most %s running: want (0, %s]", in.ID, settled, ran, most)
	}
}

// TestAgentTaskAcrossReplicas: an exec taken by one replica reaches the
// agent syncing with another, and its result comes back, through the store.
func TestAgentTaskAcrossReplicas(t *testing.T) {
	c := newCluster(t, filepath.Join(t.TempDir(), "cluster.db"), 2, time.Hour)
	r0, r1 := c.replicas[0], c.replicas[1]
	ctx := context.Background()
	host, _, err := r0.svc.CreateAccountWithKey(ctx, "host", suanli.RoleUser, suanli.Dollars(100))
	if err != nil {
		t.Fatal(err)
	}
	hostCtx := suanli.NewContextWithPrincipal(ctx, &suanli.Principal{AccountID: host.ID, Role: host.Role, Scopes: []string{suanli.ScopeAll}})
	tok, err := r0.svc.CreateJoinToken(hostCtx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hw := suanli.Hardware{Hostname: "rig", CPUArch: "amd64", CPUCores: 16, RAMMB: 64 << 10, DiskFreeGB: 1000,
		GPUs: []suanli.GPU{{Index: 0, UUID: "g0", Name: "RTX 4090", MemoryMB: 24 << 10}}}
	j, err := r0.svc.Join(ctx, suanli.JoinRequest{Token: tok.Token, Hardware: hw, Runtime: "process"})
	if err != nil {
		t.Fatal(err)
	}
	price := suanli.Money(1_000_000)
	if _, err := r0.svc.ListMachine(hostCtx, j.MachineID, suanli.ListingUpdate{PriceGPU: &price}); err != nil {
		t.Fatal(err)
	}
	in, err := r0.svc.CreateInstance(hostCtx, suanli.InstanceCreate{OfferID: j.MachineID, Image: "img", Cmd: []string{"train"}, GPUCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The agent long-polls r1 only, runs every task it is given, and reports
	// the result on its next sync.
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	agent := suanli.NewContextWithPrincipal(stop, &suanli.Principal{AccountID: host.ID, Scopes: []string{suanli.ScopeAgent}, MachineID: j.MachineID})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var version int64
		var results []suanli.TaskResult
		done := map[string]bool{}
		for stop.Err() == nil {
			resp, err := r1.svc.Sync(agent, &suanli.SyncRequest{MachineID: j.MachineID, Runtime: "process", Wait: len(results) == 0,
				KnownVersion: version, Instances: []suanli.InstanceReport{{ID: in.ID, Status: suanli.StatusRunning}}, TaskResults: results})
			if err != nil {
				if stop.Err() == nil {
					t.Errorf("sync: %v", err)
				}
				return
			}
			version, results = resp.Version, nil
			for _, task := range resp.Tasks {
				if !done[task.ID] {
					done[task.ID] = true
					results = append(results, suanli.TaskResult{ID: task.ID, Output: []byte("ran " + task.Cmd[0] + " on the agent")})
				}
			}
		}
	}()
	waitRunning := time.Now()
	for {
		got, err := r0.svc.FindInstanceByID(hostCtx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == suanli.StatusRunning {
			break
		}
		if time.Since(waitRunning) > 5*time.Second {
			t.Fatalf("instance %d is %s, not running", in.ID, got.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	res, err := r0.svc.Exec(hostCtx, in.ID, []string{"nvidia-smi"}, 10*time.Second)
	if err != nil {
		t.Fatalf("exec on r0, agent on r1: %v", err)
	}
	if string(res.Output) != "ran nvidia-smi on the agent" {
		t.Fatalf("exec output = %q", res.Output)
	}
	t.Logf("exec taken by r0 answered by the agent on r1 in %s", time.Since(start).Round(time.Millisecond))
	cancel()
	wg.Wait()
}

// TestRevokedKeyAcrossReplicas: a key revoked through one replica stops
// working on another as soon as the change feed says so, not when that
// replica's cache of verified keys runs out.
func TestRevokedKeyAcrossReplicas(t *testing.T) {
	c := newCluster(t, filepath.Join(t.TempDir(), "cluster.db"), 2, time.Hour)
	r0, r1 := c.replicas[0], c.replicas[1]
	ctx := context.Background()
	a, secret, err := r0.svc.CreateAccountWithKey(ctx, "renter", suanli.RoleUser, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r1.svc.Authenticate(ctx, secret, "127.0.0.1") // now cached on r1
	if err != nil {
		t.Fatal(err)
	}
	own := suanli.NewContextWithPrincipal(ctx, &suanli.Principal{AccountID: a.ID, Role: a.Role, Scopes: []string{suanli.ScopeAll}})
	if _, err := r0.svc.RevokeAPIKey(own, p.KeyID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	for {
		_, err := r1.svc.Authenticate(ctx, secret, "127.0.0.1")
		if suanli.ErrorCode(err) == suanli.EUNAUTHORIZED {
			break
		}
		if time.Since(revoked) > time.Second {
			t.Fatalf("a key revoked on r0 still works on r1 after 1s: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("a key revoked on r0 stopped working on r1 after %s", time.Since(revoked).Round(time.Millisecond))
}
