package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	cmd := exec.Command(binary, "server", "--home", home, "--addr", "127.0.0.1:0", "--settle-every", "100ms", "--heartbeat", "1s")
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
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
		return &server{cmd: cmd, url: u}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("server did not start")
	}
	return nil
}

func (s *server) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
}

// TestCrashSafety kills the server with SIGKILL at random points while
// instances are created (with idempotency keys), run, report traffic and are
// settled, restarts it, and repeats. At the end: the ledger balances, every
// acknowledged create exists exactly once, and traffic is billed exactly
// once for the counters the agent reported.
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
	hw := suanli.Hardware{Hostname: "crash", CPUArch: "amd64", CPUCores: 64, RAMMB: 256 << 10, DiskFreeGB: 5000}
	for i := 0; i < 64; i++ {
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

	acked := map[string]int64{} // idempotency key → instance id, for creates the server answered
	var pending []string        // keys of creates whose answer was lost
	tx := map[int64]int64{}     // instance → cumulative bytes the agent counted
	var seq int64
	for round := 0; round < 12; round++ {
		renter := shttp.NewClient(srv.url, cfg.APIKey)
		agent := shttp.NewClient(srv.url, j.APIKey)
		renter.HTTP.Timeout, agent.HTTP.Timeout = 2*time.Second, 2*time.Second
		agent.Long = agent.HTTP
		killAt := time.Now().Add(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		for time.Now().Before(killAt) {
			// Retry creates whose reply was lost, with the same key.
			keys := append([]string{}, pending...)
			if len(acked)+len(pending) < 40 {
				keys = append(keys, fmt.Sprintf("create-%d-%d", round, rng.Int()))
			}
			pending = pending[:0]
			for _, k := range keys {
				in, err := renter.CreateInstance(shttp.WithIdempotencyKey(ctx, k),
					suanli.InstanceCreate{OfferID: j.MachineID, Image: "x", GPUCount: 1, Guards: suanli.Guards{IdleStopMinutes: -1}})
				if err != nil {
					pending = append(pending, k)
					continue
				}
				acked[k] = in.ID
			}
			var reps []suanli.InstanceReport
			var usage []suanli.UsageReport
			for _, id := range acked {
				reps = append(reps, suanli.InstanceReport{ID: id, Status: suanli.StatusRunning})
				tx[id] += rng.Int64N(500_000_000)
				seq++
				usage = append(usage, suanli.UsageReport{InstanceID: id, Seq: seq, TxBytes: tx[id]})
			}
			agent.Sync(ctx, &suanli.SyncRequest{Instances: reps, Usage: usage}) // may fail mid-kill: retried next time
		}
		srv.kill()
		srv = startServer(t, home)
	}
	// One final report with the final counters, after all crashes.
	agent := shttp.NewClient(srv.url, j.APIKey)
	var usage []suanli.UsageReport
	for id, b := range tx {
		seq++
		usage = append(usage, suanli.UsageReport{InstanceID: id, Seq: seq, TxBytes: b})
	}
	if _, err := agent.Sync(ctx, &suanli.SyncRequest{Usage: usage}); err != nil {
		t.Fatal(err)
	}
	renter := shttp.NewClient(srv.url, cfg.APIKey)
	for _, id := range acked {
		if _, err := renter.DestroyInstance(ctx, id); err != nil {
			t.Fatal(err)
		}
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
	if total < len(acked) || total > len(acked)+len(pending) {
		t.Errorf("%d instances in the store; %d creates acknowledged, %d unanswered", total, len(acked), len(pending))
	}
	seen := map[int64]bool{}
	for _, id := range acked {
		if seen[id] {
			t.Errorf("two acknowledged creates returned instance %d", id)
		}
		seen[id] = true
	}
	for _, in := range ins {
		sum, _ := db.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &in.ID})
		want := new(big.Int).Mul(big.NewInt(10_000), big.NewInt(tx[in.ID]))
		want.Quo(want, big.NewInt(1_000_000_000))
		if got := sum.ByKind[suanli.MeterInetUp]; int64(got) != want.Int64() {
			t.Errorf("instance %d: egress billed %d, want %s for %d bytes", in.ID, got, want, tx[in.ID])
		}
	}
	chk, err := db.CheckLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if chk.PostingSum != 0 || chk.BalanceSum != 0 || len(chk.Mismatched) > 0 || len(chk.UnbalancedTxn) > 0 || chk.Postings == 0 {
		t.Errorf("ledger after crashes: %+v", chk)
	}
	t.Logf("%d instances, %d postings, %d crashes survived", total, chk.Postings, 12)
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
