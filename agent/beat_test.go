package agent_test

import (
	"net"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
	"github.com/suanli/suanli/heartbeat"
)

// withBeats gives srv a light heartbeat channel on a loopback UDP socket
// and returns its table.
func withBeats(t *testing.T, srv *testServer) *heartbeat.Table {
	t.Helper()
	keys, err := heartbeat.NewKeys([]byte("0123456789abcdef0123456789abcdef"), 0)
	if err != nil {
		t.Fatal(err)
	}
	table := heartbeat.NewTable(keys)
	hs, err := heartbeat.Listen("127.0.0.1:0", table, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	srv.beats, srv.beatAddr = table, hs.Addr().String()
	return table
}

func dialBeats(c *agent.Config) {
	c.DialBeats = func(addr string) (agent.Beater, error) {
		b, err := heartbeat.Dial(addr, 42)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}

// TestAgentBeatsBetweenSyncs: with a light channel, an idle agent sends a
// datagram per interval instead of syncing, and a change of the desired
// state still reaches it at once (a poke), not an interval later.
func TestAgentBeatsBetweenSyncs(t *testing.T) {
	const hb = 100 * time.Millisecond
	srv, rt := newTestServer(t, hb), newTestRuntime(t)
	table := withBeats(t, srv)
	stop := startAgent(t, srv, rt, dialBeats)
	defer stop()
	time.Sleep(15 * hb)
	if n := len(srv.requests()); n > 3 {
		t.Errorf("%d syncs in 15 intervals on the light channel, want at most 3 (the first ones)", n)
	}
	if n := table.Stats().Beats.Load(); n < 10 {
		t.Errorf("%d beats in 15 intervals, want ≥ 10", n)
	}
	if at, ok := table.LastBeat(42); !ok || time.Since(at) > 3*hb {
		t.Errorf("last beat %v ago (%v), want within 3 intervals", time.Since(at), ok)
	}
	syncs := len(srv.requests())
	changed := time.Now()
	srv.set(running(1))
	deadline := time.Now().Add(20 * hb)
	for {
		if r, ok := srv.report(1); ok && r.Status == suanli.StatusRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance 1 not running 20 intervals after it was asked for")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The poke brings the sync within a fraction of the interval; the
	// instance's start and its report take a few more milliseconds.
	first := srv.requests()[syncs]
	if first.Wait {
		t.Errorf("the sync after a change waited: it must ask for the state at once")
	}
	if took := time.Since(changed); took > hb+50*time.Millisecond {
		t.Logf("change to running took %v", took) // informative: the poke makes it prompt
	}
	if table.Stats().Pokes.Load() == 0 {
		t.Errorf("no poke sent for the change")
	}
}

// TestAgentBeatsFallBackToSync: when nothing answers on the advertised UDP
// address (a firewall), the agent goes back to the long poll and keeps its
// lease: it never fences, and a change still reaches it.
func TestAgentBeatsFallBackToSync(t *testing.T) {
	const hb = 100 * time.Millisecond
	srv, rt := newTestServer(t, hb), newTestRuntime(t)
	withBeats(t, srv)
	dead, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	srv.beatAddr = dead.LocalAddr().String()
	dead.Close() // nothing listens there now
	srv.set(running(1))
	stop := startAgent(t, srv, rt, func(c *agent.Config) {
		dialBeats(c)
		c.FenceAfter = 6 * hb
	})
	defer stop()
	time.Sleep(20 * hb)
	if n := len(srv.requests()); n < 10 {
		t.Errorf("%d syncs in 20 intervals with the light channel blocked, want ≥ 10 (long polls)", n)
	}
	if in, _ := rt.inst(1); in.status != suanli.StatusRunning {
		t.Errorf("instance 1 is %s, want running: the agent fenced though the control plane answered syncs", in.status)
	}
	srv.set(stopped(1))
	deadline := time.Now().Add(10 * hb)
	for {
		if in, _ := rt.inst(1); in.status == suanli.StatusStopped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a change did not reach the agent on the long poll")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
