package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
	shttp "github.com/suanli/suanli/http"
	"github.com/suanli/suanli/internal/gctune"
	"github.com/suanli/suanli/market"
	"github.com/suanli/suanli/sqlstore"
)

// runHTTPSearch measures POST /v1/offers/search through the real API server
// (authentication, JSON both ways, the offer index) over loopback, with
// concurrent keep-alive clients. Before timing, a sample of the queries is
// checked to return the same offers over HTTP as the index does directly.
func runHTTPSearch(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("http-search", flag.ContinueOnError)
	n := fs.Int("offers", 200_000, "offers in the index")
	seed := fs.Uint64("seed", 1, "generator seed")
	clients := fs.Int("clients", 8, "concurrent HTTP clients")
	dur := fs.Duration("duration", 10*time.Second, "how long to send requests")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the timed phase to this file")
	gcPercent := fs.Int("gc-percent", gctune.DefaultPercent, "GC target, as `suanli server` sets it (GOGC in the environment overrides both)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "GC target %d%%\n", gctune.Apply(*gcPercent))
	dir, err := os.MkdirTemp("", "suanli-bench-http")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sqlstore.Open(ctx, filepath.Join(dir, "s.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := control.New(ctx, db, control.Config{}, logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "generating %d offers (seed %d)…\n", *n, *seed)
	offers := generate(*n, *seed)
	svc.Index.Replace(offers)
	_, key, err := svc.CreateAccountWithKey(ctx, "bench", suanli.RoleUser, 0)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: shttp.NewServer(svc, logger)}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/v1/offers/search"
	qs := makeQueries(20, *n, *seed)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients * 2}, Timeout: 30 * time.Second}
	// post sends q; with decode false (the timed phase) it reads the reply
	// whole and checks its status but does not parse it — a load generator's
	// job, like wrk's; the answers were checked before timing.
	post := func(q suanli.OfferQuery, decode bool) (*suanli.OfferResult, error) {
		body, _ := json.Marshal(q)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		if !decode {
			n, err := io.Copy(io.Discard, resp.Body)
			if err == nil && n < 2 {
				err = fmt.Errorf("empty reply")
			}
			return nil, err
		}
		var r suanli.OfferResult
		return &r, json.NewDecoder(resp.Body).Decode(&r)
	}
	// Same answers over HTTP as from the index.
	for _, bq := range qs {
		got, err := post(bq.q, true)
		if err != nil {
			return fmt.Errorf("query %q: %w", bq.q.Query, err)
		}
		want, err := svc.Index.Search(bq.q, market.Viewer{})
		if err != nil {
			return err
		}
		if got.Total != want.Total || !slices.EqualFunc(got.Offers, want.Offers, func(a, b *suanli.Offer) bool { return a.ID == b.ID }) {
			return fmt.Errorf("query %q: HTTP and index disagree (%d vs %d matches)", bq.q.Query, got.Total, want.Total)
		}
	}
	fmt.Fprintf(os.Stderr, "verified %d queries; %d clients for %s…\n", len(qs), *clients, *dur)
	stopProfile, err := startCPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var mu sync.Mutex
	var lat []time.Duration
	byClass := map[string][]time.Duration{}
	var errs atomic.Int64
	cpu0 := processCPU()
	deadline := time.Now().Add(*dur)
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < *clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			var mine []time.Duration
			mineBy := map[string][]time.Duration{}
			for i := c; time.Now().Before(deadline); i++ {
				bq := qs[i%len(qs)]
				t0 := time.Now()
				if _, err := post(bq.q, false); err != nil {
					errs.Add(1)
					continue
				}
				d := time.Since(t0)
				mine = append(mine, d)
				mineBy[bq.class] = append(mineBy[bq.class], d)
			}
			mu.Lock()
			lat = append(lat, mine...)
			for k, v := range mineBy {
				byClass[k] = append(byClass[k], v...)
			}
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) == 0 {
		return fmt.Errorf("no request succeeded (%d errors)", errs.Load())
	}
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	rps := float64(len(lat)) / elapsed.Seconds()
	fmt.Printf("offers %d, clients %d, requests %d, errors %d\n", *n, *clients, len(lat), errs.Load())
	classes := make([]string, 0, len(byClass))
	for k := range byClass {
		classes = append(classes, k)
	}
	sort.Strings(classes)
	for _, k := range classes {
		l := byClass[k]
		slices.Sort(l)
		fmt.Printf("  %-14s %6d requests  p50 %6.2f ms  p99 %6.2f ms\n", k, len(l), ms(l[len(l)/2]), ms(l[min(len(l)-1, len(l)*99/100)]))
	}
	fmt.Printf("latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", ms(pct(0.50)), ms(pct(0.99)), ms(lat[len(lat)-1]))
	// CPU per request (server and load generator together, one process)
	// does not depend on what else the machine runs: cores / it is the rate
	// this machine can serve when the benchmark has it to itself.
	if perReq := cpu / time.Duration(len(lat)); perReq > 0 {
		fmt.Printf("cpu %.3f ms per request (server and clients); %d cores would serve %.0f req/s\n", ms(perReq), runtime.NumCPU(), float64(runtime.NumCPU())/perReq.Seconds())
	}
	fmt.Printf("http search: %.0f req/s, p99 %.2f ms\n", rps, ms(pct(0.99)))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
