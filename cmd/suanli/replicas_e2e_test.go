package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
	shttp "github.com/suanli/suanli/http"
	"github.com/suanli/suanli/internal/pgtest"
	"github.com/suanli/suanli/sqlstore"
)

// TestThreeReplicasOnePostgres runs three `suanli server` processes on one
// PostgreSQL schema, finds the one holding the singleton lease, SIGKILLs it,
// and checks that another takes over the singleton loops within the lease
// TTL, that no period was settled twice (closes contiguous, each later than
// the last, the instance's compute charges without a gap or an overlap
// across the takeover), and that a listing made on one surviving replica is
// in the search of every surviving replica within a second.
func TestThreeReplicasOnePostgres(t *testing.T) {
	dsn := pgtest.DSN(t) // skips (or fails in CI) without PostgreSQL
	const ttl = 3 * time.Second
	dir := t.TempDir()
	ctx := t.Context()
	serverReady := regexp.MustCompile(`control plane at (\S+)`)
	names := []string{"a", "b", "c"}
	procs := map[string]*proc{}
	urls := map[string]string{}
	defer func() {
		if t.Failed() {
			for _, f := range []string{"a.log", "b.log", "c.log", "agent1.log", "agent2.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				t.Logf("%s:\n%s", f, b)
			}
		}
	}()
	for i, n := range names {
		home := filepath.Join(dir, n)
		if i > 0 {
			// Replicas share the server's keys: instance tokens, sealed
			// secrets, audit checkpoints and SSH certificates verify on any.
			os.MkdirAll(home, 0o700)
			for _, f := range []string{"secret.key", "audit.key", "ssh_ca_ed25519"} {
				b, err := os.ReadFile(filepath.Join(dir, "a", f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(home, f), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		procs[n] = startProc(t, filepath.Join(dir, n+".log"), serverReady, "server", "--home", home, "--addr", "127.0.0.1:0",
			"--db", dsn, "--lease-ttl", ttl.String(), "--settle-every", "500ms", "--heartbeat", "1s", "--allow-simulated")
		urls[n] = logURL(t, filepath.Join(dir, n+".log"))
	}
	cfg, err := readConfig(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*shttp.Client{}
	for _, n := range names {
		clients[n] = shttp.NewClient(urls[n], cfg.APIKey) // one key works on every replica
	}
	// leaders asks every live replica whether it leads.
	leaders := func(live []string) (out []string, term int64) {
		for _, n := range live {
			st, err := clients[n].Cluster(ctx)
			if err != nil {
				t.Fatalf("cluster status of %s: %v", n, err)
			}
			if st.Leader {
				out, term = append(out, n), st.Lease.Term
			}
		}
		return out, term
	}
	var leader string
	var term int64
	waitFor(t, 2*ttl, "one leader among three replicas", func() bool {
		ls, tm := leaders(names)
		if len(ls) == 1 {
			leader, term = ls[0], tm
		}
		return len(ls) == 1
	})
	// The CLI says the same.
	out, err := exec.Command(binary, "cluster", "status", "--json", "--server", urls[leader], "--api-key", cfg.APIKey).Output()
	if err != nil {
		t.Fatal(err)
	}
	var st control.ClusterStatus
	if err := json.Unmarshal(out, &st); err != nil || !st.Leader || st.Lease.Term != term || st.Lease.Holder != st.Replica {
		t.Fatalf("suanli cluster status --json on the leader = %s (%v)", out, err)
	}
	var survivors []string
	for _, n := range names {
		if n != leader {
			survivors = append(survivors, n)
		}
	}
	t.Logf("leader %s (term %d); survivors-to-be %v", leader, term, survivors)

	// An agent syncs with a survivor; its machine is listed and rented on the leader.
	home := survivors[0]
	startAgent := func(i int) int64 {
		agentHome := filepath.Join(dir, fmt.Sprintf("agent%d", i))
		joinAgent(t, clients[home], urls[home], agentHome, filepath.Join(dir, fmt.Sprintf("agent%d.log", i)))
		var as struct {
			MachineID int64 `json:"machine_id"`
		}
		b, _ := os.ReadFile(filepath.Join(agentHome, "agent.json"))
		json.Unmarshal(b, &as)
		return as.MachineID
	}
	price := suanli.Money(3_600_000)
	// visible lists machine id on replica on and returns how long until
	// every replica in live finds it in a search.
	visible := func(on string, id int64, live []string) time.Duration {
		t.Helper()
		if _, err := clients[on].ListMachine(ctx, id, suanli.ListingUpdate{PriceGPU: &price}); err != nil {
			t.Fatal(err)
		}
		listed := time.Now()
		var worst time.Duration
		for _, n := range live {
			for {
				res, err := clients[n].SearchOffers(ctx, suanli.OfferQuery{Query: fmt.Sprintf("machine_id=%d rentable=any", id)})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Offers) == 1 {
					break
				}
				if time.Since(listed) > time.Second {
					t.Fatalf("machine %d listed on %s: not in %s's search within a second", id, on, n)
				}
				time.Sleep(5 * time.Millisecond)
			}
			worst = max(worst, time.Since(listed))
		}
		return worst
	}
	m1 := startAgent(1)
	t.Logf("a listing on %s is in all three replicas' search after %s", leader, visible(leader, m1, names).Round(time.Millisecond))
	in, err := clients[leader].CreateInstance(ctx, suanli.InstanceCreate{OfferID: m1, Image: "x", GPUCount: 1,
		Cmd: []string{"sleep", "600"}, Guards: suanli.Guards{IdleStopMinutes: -1}})
	if err != nil {
		t.Fatal(err)
	}
	var started time.Time
	waitFor(t, 20*time.Second, fmt.Sprintf("instance %d running", in.ID), func() bool {
		got, err := clients[home].FindInstanceByID(ctx, in.ID)
		if err == nil && got.Status == suanli.StatusRunning && got.StartedAt != nil {
			started = *got.StartedAt
			return true
		}
		return false
	})
	time.Sleep(1500 * time.Millisecond) // closes under the first leader

	// SIGKILL the leader: a survivor takes over within the TTL, at the next term.
	procs[leader].stop(syscall.SIGKILL)
	killed := time.Now()
	var next string
	waitFor(t, 2*ttl, "a survivor takes the lease", func() bool {
		ls, tm := leaders(survivors)
		if len(ls) == 1 && tm > term {
			next, term = ls[0], tm
			return true
		}
		return false
	})
	took := time.Since(killed)
	t.Logf("leader %s SIGKILLed: %s took over after %s (term %d, TTL %s)", leader, next, took.Round(time.Millisecond), term, ttl)
	if took > ttl {
		t.Errorf("takeover took %s, want within the lease TTL %s", took, ttl)
	}

	// A new listing on one survivor is in every survivor's search within a second.
	m2 := startAgent(2)
	other := survivors[0]
	if other == next {
		other = survivors[1]
	}
	t.Logf("a listing on %s is in both survivors' search after %s", other, visible(other, m2, survivors).Round(time.Millisecond))
	time.Sleep(1500 * time.Millisecond) // closes under the new leader

	// No settlement ran twice.
	db, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	closes, err := db.FindCloses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byTerm := map[int64]int{}
	for i, c := range closes {
		byTerm[c.Term]++
		if c.ID != int64(i+1) || (i > 0 && (!c.Through.After(closes[i-1].Through) || c.Term < closes[i-1].Term)) {
			t.Fatalf("close %d (through %s, term %d) at position %d: closes must be contiguous, each later, terms never going back",
				c.ID, c.Through.Format("15:04:05.000"), c.Term, i)
		}
	}
	if byTerm[term] == 0 {
		t.Errorf("no close by the new leader's term %d: closes by term %v", term, byTerm)
	}
	t.Logf("%d closes by term: %v", len(closes), byTerm)
	chk, err := db.CheckLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if chk.PostingSum != 0 || chk.BalanceSum != 0 || len(chk.Mismatched)+len(chk.UnbalancedTxn)+len(chk.SubLedger) > 0 {
		t.Fatalf("ledger check: %+v", chk)
	}
	secs := billedContinuously(t, clients[next], in.ID, started)
	t.Logf("instance %d billed continuously for %.1fs across the takeover", in.ID, secs)
}

// logURL reads a server's URL from the "control plane listening" line of
// its log.
func logURL(t *testing.T, path string) string {
	t.Helper()
	re := regexp.MustCompile(`control plane listening" url=(\S+)`)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	ms := re.FindAllSubmatch(b, -1)
	if len(ms) == 0 {
		t.Fatalf("no URL in %s", path)
	}
	return string(ms[len(ms)-1][1])
}
