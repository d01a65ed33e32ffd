package main

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
	"github.com/suanli/suanli/heartbeat"
	"github.com/suanli/suanli/sqlstore"
)

// The heartbeat benchmark's server is this binary in another process
// (suanli-bench heartbeat-server), so that its CPU time is its own:
//
//   - light: the product. A control.Service over the store with its
//     heartbeat table flushed in batches (RunHeartbeats, one batch per
//     second), the lease checker ticked as Run ticks it (every second at a
//     2 s interval), and the heartbeat channel on UDP.
//   - naive: one HTTP POST per beat, answered after one database write
//     (the UPDATE of the machine's row that every sync used to make) in its
//     own transaction, as the sync path did before.
//
// Both listen on loopback and print "ready udp=ADDR http=ADDR" on stdout.
// The http address also answers the driver: GET /stats, and (light) POST
// /change?id= (a desired-state change: the version bumped and the agent
// woken, as control does on a rental) and POST /synced?id= (what a full
// sync tells the heartbeat table). The server exits when stdin closes.

// serverStats is what GET /stats answers.
type serverStats struct {
	Beats    int64 `json:"beats"`
	Acks     int64 `json:"acks"`
	Syncs    int64 `json:"syncs"`
	Pokes    int64 `json:"pokes"`
	Rejected int64 `json:"rejected"`
	Flushes  int64 `json:"flushes"`
	Flushed  int64 `json:"flushed"`
	FlushNS  int64 `json:"flush_ns"`
	Pending  int64 `json:"pending"`
	FlushMax int64 `json:"flush_max_ns"`
}

func runHeartbeatServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("heartbeat-server", flag.ContinueOnError)
	dbPath := fs.String("db", "", "SQLite database")
	mode := fs.String("mode", "light", "light or naive")
	secretHex := fs.String("secret", "", "the server's master secret (hex)")
	interval := fs.Duration("interval", 2*time.Second, "heartbeat interval")
	suspect := fs.Duration("suspect-after", 5*time.Second, "silence after which a machine is suspect")
	lost := fs.Duration("lost-after", time.Minute, "silence after which a machine is offline")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the measured window to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var profiling sync.Mutex // held while a profile runs: POST /profile?on=1, then ?on=0
	var profile *os.File
	defer func() {
		if profile != nil {
			pprof.StopCPUProfile()
			profile.Close()
		}
	}()
	secret, err := hex.DecodeString(*secretHex)
	if err != nil || len(secret) != 32 {
		return fmt.Errorf("-secret: 32 bytes in hex")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the driver closes stdin (or dies): stop
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	store, err := sqlstore.Open(ctx, *dbPath)
	if err != nil {
		return err
	}
	defer store.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	mux.HandleFunc("POST /profile", func(w http.ResponseWriter, r *http.Request) {
		profiling.Lock()
		defer profiling.Unlock()
		if *cpuprofile == "" {
			return
		}
		if r.URL.Query().Get("on") == "1" && profile == nil {
			f, err := os.Create(*cpuprofile)
			if err == nil {
				err = pprof.StartCPUProfile(f)
			}
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			profile = f
		} else if profile != nil {
			pprof.StopCPUProfile()
			profile.Close()
			profile = nil
		}
	})
	out := bufio.NewWriter(os.Stdout)
	switch *mode {
	case "light":
		cfg := control.Config{HeartbeatInterval: *interval, SuspectAfter: *suspect, LostAfter: *lost, FailoverGrace: *lost, SecretKey: secret}
		svc, err := control.New(ctx, store, cfg, logger)
		if err != nil {
			return err
		}
		if err := svc.RefreshBeats(ctx); err != nil { // as suanli server does before it opens the channel
			return err
		}
		hs, err := heartbeat.Listen("127.0.0.1:0", svc.Beats, logger)
		if err != nil {
			return err
		}
		defer hs.Close()
		svc.SetHeartbeatAddr(hs.Addr().String())
		loops, beats := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(loops)
			// The lease checker as Run ticks it. Run's other loops (closes,
			// market samples, bookings) are not heartbeat work; at 100k
			// machines the market sample holds SQLite's one connection for
			// seconds, which would measure that instead.
			t := time.NewTicker(max(time.Second, *interval/2))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if err := svc.CheckLeases(ctx); err != nil && ctx.Err() == nil {
						logger.Error("check leases", "err", err)
					}
				}
			}
		}()
		go func() { defer close(beats); svc.RunHeartbeats(ctx) }()
		defer func() { <-loops; <-beats }()
		mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
			st := svc.Beats.Stats()
			var rej int64
			for i := range st.Rejected {
				rej += st.Rejected[i].Load()
			}
			json.NewEncoder(w).Encode(serverStats{Beats: st.Beats.Load(), Acks: st.Acks.Load(), Syncs: st.Syncs.Load(), Pokes: st.Pokes.Load(),
				Rejected: rej, Flushes: st.Flushes.Load(), Flushed: st.Flushed.Load(), FlushNS: st.FlushTime.Load(), FlushMax: st.FlushMax.Load(),
				Pending: int64(svc.Beats.Pending())})
		})
		mux.HandleFunc("POST /change", func(w http.ResponseWriter, r *http.Request) {
			id, _ := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
			if _, err := store.SQL().ExecContext(r.Context(), `UPDATE machines SET desired_version = desired_version + 1 WHERE id = ?`, id); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			svc.Beats.Wake(id)
		})
		mux.HandleFunc("POST /synced", func(w http.ResponseWriter, r *http.Request) {
			id, _ := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
			wakes := svc.Beats.Wakes(id)
			v, err := store.DesiredVersion(r.Context(), id)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			// A full sync of a machine that is not online brings it back.
			if m, err := store.FindMachineByID(r.Context(), id); err == nil && m.Status != suanli.MachineOnline {
				now := time.Now()
				if err := store.RecordHeartbeat(r.Context(), id, sqlstore.Heartbeat{At: now, Status: suanli.MachineOnline}); err != nil {
					http.Error(w, err.Error(), 500)
					return
				}
				svc.Beats.Persisted(id, now)
			}
			svc.Beats.Synced(id, v, wakes)
			fmt.Fprint(w, v)
		})
		fmt.Fprintf(out, "ready udp=%s http=%s\n", hs.Addr(), ln.Addr())
	case "naive":
		versions := map[int64]int64{}
		rows, err := store.SQL().QueryContext(ctx, `SELECT id, desired_version FROM machines`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id, v int64
			rows.Scan(&id, &v)
			versions[id] = v
		}
		rows.Close()
		var beats atomic.Int64
		mux.HandleFunc("POST /beat", func(w http.ResponseWriter, r *http.Request) {
			var b naiveBeat
			if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			if !hmac.Equal([]byte(r.Header.Get("Authorization")), []byte("Bearer "+naiveToken(secret, b.MachineID))) {
				http.Error(w, "unauthorized", 401)
				return
			}
			if _, err := store.SQL().ExecContext(r.Context(), `UPDATE machines SET last_heartbeat = ?, status = 'online' WHERE id = ?`,
				time.Now().UnixMicro(), b.MachineID); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			beats.Add(1)
			json.NewEncoder(w).Encode(naiveAnswer{Version: versions[b.MachineID]})
		})
		mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
			n := beats.Load()
			json.NewEncoder(w).Encode(serverStats{Beats: n, Acks: n})
		})
		fmt.Fprintf(out, "ready udp=- http=%s\n", ln.Addr())
	default:
		return fmt.Errorf("-mode %q: light or naive", *mode)
	}
	out.Flush()
	<-ctx.Done()
	return nil
}

// naiveBeat is the baseline's heartbeat: what the light channel's datagram
// carries, as JSON.
type naiveBeat struct {
	MachineID    int64 `json:"machine_id"`
	Seq          int64 `json:"seq"`
	KnownVersion int64 `json:"known_version"`
}

type naiveAnswer struct {
	Version int64 `json:"version"`
}

// naiveToken is machine id's credential on the baseline: checked in
// memory, which spares the baseline the key lookup a real API makes.
func naiveToken(secret []byte, id int64) string {
	m := hmac.New(sha256.New, secret)
	fmt.Fprint(m, id)
	return hex.EncodeToString(m.Sum(nil))
}
