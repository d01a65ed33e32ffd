package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/suanli/suanli"
	shttp "github.com/suanli/suanli/http"
	"github.com/suanli/suanli/sqlstore"
)

// server is a `suanli server` process.
type server struct {
	cmd *exec.Cmd
	url string
}

func startServer(t *testing.T, home string) *server {
	t.Helper()
	s, err := launchServer(home, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// launchServer starts `suanli server` on home listening on addr and waits
// until it says where.
func launchServer(home, addr string) (*server, error) {
	cmd := exec.Command(binary, "server", "--home", home, "--addr", addr, "--settle-every", "100ms", "--heartbeat", "1s")
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`control plane at (http://\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case u := <-found:
		return &server{cmd: cmd, url: u}, nil
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("suanli server --addr %s did not start in 20s", addr)
	}
}

func (s *server) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
}

// crashAgent is the test's agent: it holds what the control plane's sync
// answers list, as the real agent does (a listed instance runs or stops as
// desired; anything unlisted goes), and reports it with cumulative egress
// counters that only grow.
type crashAgent struct {
	held map[int64]string // instance → running or stopped, on the "host"
	tx   map[int64]int64  // instance → bytes it sent, over its whole life
	seen map[int64]bool   // every instance a sync answer ever listed
	seq  int64
	last []suanli.InstanceSpec // the last answer's list
}

// sync reports and, when answered, applies the desired state. A sync cut
// by a kill changes nothing on the host.
func (a *crashAgent) sync(ctx context.Context, c *shttp.Client, rng *rand.Rand) error {
	var reps []suanli.InstanceReport
	var usage []suanli.UsageReport
	for id, st := range a.held {
		reps = append(reps, suanli.InstanceReport{ID: id, Status: st})
		if st == suanli.StatusRunning {
			a.tx[id] += rng.Int64N(500_000_000)
			a.seq++
			usage = append(usage, suanli.UsageReport{InstanceID: id, Seq: a.seq, TxBytes: a.tx[id]})
		}
	}
	resp, err := c.Sync(ctx, &suanli.SyncRequest{Instances: reps, Usage: usage})
	if err != nil {
		return err
	}
	listed := map[int64]bool{}
	for _, sp := range resp.Instances {
		listed[sp.ID], a.seen[sp.ID] = true, true
		a.held[sp.ID] = sp.Desired // running or stopped
	}
	for id := range a.held {
		if !listed[id] {
			delete(a.held, id)
		}
	}
	a.last = resp.Instances
	return nil
}

// crashRental is the renter's view of one instance: the state its last
// acknowledged request asked for, a request whose reply was lost (retried
// until answered, as a client with a lost reply does), and how many
// distinct requests of each kind were made.
type crashRental struct {
	id    int64
	want  string // running, stopped or destroyed
	retry string // "", or the action whose reply was lost: stop, start, destroy
	asked map[string]int
}

// TestCrashSafety kills the server with SIGKILL at random points while
// instances are created (with idempotency keys), stopped, started and
// destroyed, report traffic and are settled; restarts it, and repeats. A
// request whose reply was lost is retried, as a client would (creates are
// killed mid-request like the rest). At the end:
// every create exists exactly once; every acknowledged stop, start and
// destroy took effect, none twice; nothing is orphaned (every live instance
// is on its agent's list, nothing destroyed or unknown is, and what the
// agent holds is what the control plane wants); no GPU is given twice;
// traffic is billed exactly once for the counters the agent reported,
// compute at most for the seconds it ran; and the ledger balances.
func TestCrashSafety(t *testing.T) {
	home := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 7))
	srv := startServer(t, home)
	defer func() { srv.kill() }()
	cfg, err := readConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op := shttp.NewClient(srv.url, cfg.APIKey)
	tok, err := op.CreateJoinToken(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	const gpus = 64
	hw := suanli.Hardware{Hostname: "crash", CPUArch: "amd64", CPUCores: 64, RAMMB: 256 << 10, DiskFreeGB: 5000}
	for i := 0; i < gpus; i++ {
		hw.GPUs = append(hw.GPUs, suanli.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Name: "RTX 4090", MemoryMB: 24564, Simulated: true})
	}
	j, err := shttp.NewClient(srv.url, "").Join(ctx, suanli.JoinRequest{Token: tok.Token, Hardware: hw, Runtime: "process"})
	if err != nil {
		t.Fatal(err)
	}
	price, inet := suanli.Money(1_000_000), suanli.Money(10_000)
	if _, err := op.ListMachine(ctx, j.MachineID, suanli.ListingUpdate{PriceGPU: &price, PriceInetUp: &inet}); err != nil {
		t.Fatal(err)
	}

	acked := map[string]int64{}         // idempotency key → instance id, for creates the server answered
	var pending []string                // keys of creates whose answer was lost
	rentals := map[int64]*crashRental{} // by id
	ag := &crashAgent{held: map[int64]string{}, tx: map[int64]int64{}, seen: map[int64]bool{}}
	// The clients keep one URL: the server comes back on the same address.
	renter, agent := shttp.NewClient(srv.url, cfg.APIKey), shttp.NewClient(srv.url, j.APIKey)
	renter.HTTP.Timeout, agent.HTTP.Timeout = 2*time.Second, 2*time.Second
	agent.Long = agent.HTTP
	retries := 0 // requests sent again after a lost reply
	refused := 0 // requests the server answered with an error
	// act sends r's request of kind (stop, start, destroy); a lost reply
	// leaves it to retry.
	act := func(r *crashRental, kind string) error {
		if r.retry != kind {
			r.asked[kind]++
		} else {
			retries++
		}
		var err error
		switch kind {
		case "stop":
			_, err = renter.StopInstance(ctx, r.id)
		case "start":
			_, err = renter.StartInstance(ctx, r.id)
		case "destroy":
			_, err = renter.DestroyInstance(ctx, r.id)
		}
		if suanli.ErrorCode(err) == suanli.EUNAVAILABLE { // no reply: the client cannot tell what happened
			r.retry = kind
			return err
		}
		r.retry = ""
		if err != nil { // an answered refusal: nothing changed
			refused++
			return nil
		}
		r.want = map[string]string{"stop": suanli.DesiredStopped, "start": suanli.DesiredRunning, "destroy": suanli.DesiredDestroyed}[kind]
		return nil
	}
	// create rents with key k; an error is a lost reply (an answered
	// refusal, such as a host suspect after missed heartbeats, is not).
	//
	// A kill may land between the create's commit and its recorded reply:
	// the restarted server takes over its dead predecessor's claim at once
	// and the retry finds the instance the key created (request_key), so
	// each acknowledged key is exactly one instance.
	create := func(k string) error {
		in, err := renter.CreateInstance(shttp.WithIdempotencyKey(ctx, k),
			suanli.InstanceCreate{OfferID: j.MachineID, Image: "x", GPUCount: 1, Guards: suanli.Guards{IdleStopMinutes: -1}})
		if suanli.ErrorCode(err) == suanli.EUNAVAILABLE {
			return err
		} else if err != nil {
			refused++
			return nil
		}
		if old, ok := acked[k]; ok && old != in.ID {
			t.Errorf("create %s answered instance %d, then %d", k, old, in.ID)
		}
		acked[k] = in.ID
		if rentals[in.ID] == nil {
			rentals[in.ID] = &crashRental{id: in.ID, want: suanli.DesiredRunning, asked: map[string]int{}}
		}
		return nil
	}
	ids := func() []int64 { // in a fixed order, so that the seed decides
		out := make([]int64, 0, len(rentals))
		for id := range rentals {
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}

	// The killer: SIGKILL at random moments, from its own goroutine so
	// that it lands in the middle of whatever request (or transaction) is
	// under way, and a restart on the same address, rounds times. The
	// requests go on meanwhile; the client's own retries may reach the new
	// server.
	const rounds = 20
	var delays []time.Duration
	for range rounds {
		delays = append(delays, time.Duration(50+rng.IntN(400))*time.Millisecond)
	}
	addr := strings.TrimPrefix(srv.url, "http://")
	stop, killed := make(chan struct{}), make(chan struct{}) // killed: the killer is done, srv the main goroutine's again
	var killErr error
	go func() {
		defer close(killed)
		for _, d := range delays {
			select {
			case <-stop:
				return
			case <-time.After(d):
			}
			srv.kill()
			srv, killErr = launchServer(home, addr)
			if killErr != nil {
				return
			}
		}
	}()
	stopKiller := sync.OnceFunc(func() { close(stop); <-killed })
	defer stopKiller()
	done := func() bool {
		select {
		case <-killed:
			return true
		default:
			return false
		}
	}

	for round := 0; !done(); round++ {
		if ag.sync(ctx, agent, rng) != nil { // cut by a kill: retried next time
			time.Sleep(20 * time.Millisecond) // the server is restarting
		}
		// One create at a time (the client retries one that cannot reach
		// the server for 1.5 s): a lost reply's again, with the same key,
		// else a new one.
		switch {
		case len(pending) > 0:
			retries++
			if create(pending[0]) == nil {
				pending = pending[1:]
			}
		case len(acked) < 40:
			if k := fmt.Sprintf("create-%d-%d", round, rng.Int()); create(k) != nil {
				pending = append(pending, k)
			}
		}
		for _, id := range ids() {
			if r := rentals[id]; r.retry != "" {
				act(r, r.retry)
			}
		}
		// About three new requests on instances whose last one was
		// answered.
		for _, id := range ids() {
			r := rentals[id]
			if r.retry != "" || r.want == suanli.DesiredDestroyed || rng.IntN(len(rentals)) >= 3 {
				continue
			}
			switch {
			case rng.IntN(12) == 0:
				act(r, "destroy")
			case r.want == suanli.DesiredRunning:
				act(r, "stop")
			default:
				act(r, "start")
			}
		}
	}
	stopKiller()
	if killErr != nil {
		t.Fatal(killErr)
	}
	if retries == 0 {
		t.Error("no request lost its reply to a kill: the test did not test crashes")
	}

	// After the last crash: the lost replies are retried until answered,
	// and the agent syncs until the control plane sees what it wants.
	for try := 0; len(pending) > 0 || slices.ContainsFunc(ids(), func(id int64) bool { return rentals[id].retry != "" }); try++ {
		errs := []error{ag.sync(ctx, agent, rng)} // a create needs a host that heartbeats
		keys := pending
		pending = nil
		for _, k := range keys {
			if err := create(k); err != nil {
				pending, errs = append(pending, k), append(errs, err)
			}
		}
		for _, id := range ids() {
			if r := rentals[id]; r.retry != "" {
				errs = append(errs, act(r, r.retry))
			}
		}
		if try == 20 {
			t.Fatalf("requests still failing after the last restart: %v", errors.Join(errs...))
		}
		time.Sleep(50 * time.Millisecond)
	}
	converged := func() (bool, string) {
		for _, id := range ids() {
			r := rentals[id]
			in, err := renter.FindInstanceByID(ctx, id)
			if err != nil {
				return false, err.Error()
			}
			if in.Desired != r.want || in.Status != r.want {
				return false, fmt.Sprintf("instance %d is %s (desired %s), the last answered request asked %s", id, in.Status, in.Desired, r.want)
			}
		}
		return true, ""
	}
	for try := 0; ; try++ {
		if err := ag.sync(ctx, agent, rng); err != nil {
			t.Fatal(err)
		}
		ok, why := converged()
		if ok {
			break
		}
		if try == 50 {
			t.Fatalf("after the last restart and %d syncs: %s", try, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// One final report with the final counters, of every instance.
	var usage []suanli.UsageReport
	for id, b := range ag.tx {
		ag.seq++
		usage = append(usage, suanli.UsageReport{InstanceID: id, Seq: ag.seq, TxBytes: b})
	}
	if _, err := agent.Sync(ctx, &suanli.SyncRequest{Usage: usage}); err != nil {
		t.Fatal(err)
	}
	srv.cmd.Process.Signal(os.Interrupt)
	srv.cmd.Wait()

	db, err := sqlstore.Open(ctx, filepath.Join(home, "suanli.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ins, total, err := db.FindInstances(ctx, suanli.InstanceFilter{Limit: 1000}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Creates: each answered key is one instance, and there are no others.
	if total != len(acked) || len(rentals) != len(acked) {
		t.Errorf("%d instances in the store, %d distinct; %d creates acknowledged", total, len(rentals), len(acked))
	}
	// Stops, starts, destroys: the last answered one holds (checked by
	// converged), and none took effect twice: no more stops than stop
	// requests, runs than creates and starts, one destroy at most.
	listed := map[int64]bool{}
	for _, sp := range ag.last {
		listed[sp.ID] = true
	}
	gpuOf := map[int]int64{}
	counts := map[string]int{}
	for _, in := range ins {
		r := rentals[in.ID]
		if r == nil {
			t.Errorf("instance %d (%s) was never answered to a create", in.ID, in.Status)
			continue
		}
		counts[r.want]++
		for k, n := range r.asked {
			counts["asked "+k] += n
		}
		evs, err := db.InstanceEvents(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		var ranFor time.Duration
		var since time.Time
		for _, e := range evs {
			n[e.Status]++
			if e.Status == suanli.StatusRunning && since.IsZero() {
				since = e.At
			} else if e.Status != suanli.StatusRunning && !since.IsZero() {
				ranFor += e.At.Sub(since)
				since = time.Time{}
			}
		}
		if !since.IsZero() {
			ranFor += time.Since(since)
		}
		if n[suanli.StatusStopping] > r.asked["stop"] || n[suanli.StatusRunning] > 1+r.asked["start"] ||
			n[suanli.StatusDestroyed] > 1 || (n[suanli.StatusDestroyed] == 1) != (r.want == suanli.DesiredDestroyed) {
			t.Errorf("instance %d: events %v for requests %v (last %s): a request took effect twice, or a destroy did not", in.ID, n, r.asked, r.want)
		}
		// Orphans: a live instance the agent is not told to hold, or a
		// destroyed one it is; what it holds is what is wanted.
		if live := in.Status != suanli.StatusDestroyed; live != listed[in.ID] {
			t.Errorf("instance %d is %s; on the agent's list: %v", in.ID, in.Status, listed[in.ID])
		}
		if in.Status != suanli.StatusDestroyed && ag.held[in.ID] != in.Desired {
			t.Errorf("instance %d: the agent holds it %q, the control plane wants %s", in.ID, ag.held[in.ID], in.Desired)
		}
		if in.Status == suanli.StatusRunning {
			for _, g := range in.GPUIndexes {
				if other, ok := gpuOf[g]; ok {
					t.Errorf("GPU %d is given to instances %d and %d", g, other, in.ID)
				}
				gpuOf[g] = in.ID
			}
		}
		// Billing: egress once for what was counted; compute for no more
		// than the seconds it ran (1 GPU at price an hour).
		sum, err := db.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &in.ID})
		if err != nil {
			t.Fatal(err)
		}
		want := new(big.Int).Mul(big.NewInt(int64(inet)), big.NewInt(ag.tx[in.ID]))
		want.Quo(want, big.NewInt(1_000_000_000))
		if got := sum.ByKind[suanli.MeterInetUp]; int64(got) != want.Int64() {
			t.Errorf("instance %d: egress billed %d, want %s for %d bytes", in.ID, got, want, ag.tx[in.ID])
		}
		if got, max := sum.ByKind[suanli.MeterCompute], suanli.Money(int64(price)*ranFor.Microseconds()/int64(time.Hour/time.Microsecond))+1; got > max {
			t.Errorf("instance %d: compute billed %d for %v running (events %v), want at most %d", in.ID, got, ranFor, evs, max)
		}
	}
	for id := range ag.seen {
		if rentals[id] == nil {
			t.Errorf("the agent was told to hold instance %d, which no create answered", id)
		}
	}
	for id := range ag.held {
		if !listed[id] {
			t.Errorf("the agent holds instance %d, which the control plane does not list", id)
		}
	}
	chk, err := db.CheckLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if chk.PostingSum != 0 || chk.BalanceSum != 0 || len(chk.Mismatched) > 0 || len(chk.UnbalancedTxn) > 0 || chk.Postings == 0 {
		t.Errorf("ledger after crashes: %+v", chk)
	}
	t.Logf("%d instances (%d running, %d stopped, %d destroyed) after %d stops, %d starts, %d destroys asked, %d requests retried, %d refused; %d postings, %d crashes survived",
		total, counts[suanli.DesiredRunning], counts[suanli.DesiredStopped], counts[suanli.DesiredDestroyed],
		counts["asked stop"], counts["asked start"], counts["asked destroy"], retries, refused, chk.Postings, rounds)
}

type clientCfg struct {
	Server string `json:"server"`
	APIKey string `json:"api_key"`
}

func readConfig(home string) (clientCfg, error) {
	var c clientCfg
	b, err := os.ReadFile(filepath.Join(home, "config.json"))
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(b, &c)
}
