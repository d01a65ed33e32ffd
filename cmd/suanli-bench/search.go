package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/market"
)

// searchConfig holds the search benchmark's flags.
type searchConfig struct {
	offers      int
	seed        uint64
	duration    time.Duration
	rate        int
	perClass    int
	dir         string
	jsonOut     bool
	cpuprofile  string
	systems     string
	minPerClass int
}

func runSearch(ctx context.Context, args []string) error {
	var c searchConfig
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	fs.IntVar(&c.offers, "offers", 250_000, "offers to generate (from offers/4 machines); the goals are for 1000000")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the market, query and update generators")
	fs.DurationVar(&c.duration, "duration", 15*time.Second, "query time per system")
	fs.IntVar(&c.rate, "updates", 20_000, "offer updates per second applied while querying (0: none)")
	fs.IntVar(&c.perClass, "queries", 12, "distinct queries per class (each is verified on every system)")
	fs.IntVar(&c.minPerClass, "min", 3, "timed queries per class at least, even past -duration (up to 8x -duration)")
	fs.StringVar(&c.dir, "dir", "", "directory for the SQLite file (default: a new temporary directory)")
	fs.BoolVar(&c.jsonOut, "json", false, "print the results as JSON")
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the timed phases to this file")
	fs.StringVar(&c.systems, "systems", "index,sqlite,naive", "systems to time (all three are always verified)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: suanli-bench search [flags]\n\n"+
			"Generates a seeded market, loads it into the market index, SQLite and a naive\n"+
			"scan-and-sort, checks that every query returns the same ids and totals on all three,\n"+
			"then times the query mix on each while a writer applies updates, and prints p50/p99\n"+
			"per query class. The last line is the p99 ratio of the index against the baselines.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.offers < 100 {
		return fmt.Errorf("-offers %d: at least 100", c.offers)
	}
	return benchSearch(ctx, c, os.Stdout)
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// system is one search implementation under test.
type system interface {
	search(ctx context.Context, q *benchQuery) (*suanli.OfferResult, error)
	apply(ctx context.Context, us []update) error
}

// indexSystem is market.Index; the writer reads the current offer from
// the index itself (Get) to derive each change.
type indexSystem struct {
	idx *market.Index
}

func (s *indexSystem) search(_ context.Context, q *benchQuery) (*suanli.OfferResult, error) {
	return s.idx.Search(q.q, market.Viewer{})
}

func (s *indexSystem) apply(_ context.Context, us []update) error {
	put := make([]*suanli.Offer, 0, len(us))
	latest := map[int64]*suanli.Offer{} // a batch may change an offer twice
	for _, u := range us {
		cur, ok := latest[u.id]
		if !ok {
			if cur, ok = s.idx.Get(u.id); !ok {
				return fmt.Errorf("offer %d is not in the index", u.id)
			}
		}
		o := u.apply(cur)
		latest[u.id] = o
		put = append(put, o)
	}
	s.idx.Apply(put, nil)
	return nil
}

// naiveSystem scans a slice of offers and sorts the matches (market.Scan),
// under a read-write lock shared with the writer.
type naiveSystem struct {
	mu     sync.RWMutex
	offers []*suanli.Offer
}

func (s *naiveSystem) search(_ context.Context, q *benchQuery) (*suanli.OfferResult, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return market.Scan(s.offers, q.q, market.Viewer{})
}

func (s *naiveSystem) apply(_ context.Context, us []update) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range us {
		s.offers[u.id-1] = u.apply(s.offers[u.id-1])
	}
	return nil
}

// sqliteSystem writes each batch of changes in one transaction.
type sqliteSystem struct {
	db     *sqliteBaseline
	shadow []*suanli.Offer
}

func (s *sqliteSystem) search(ctx context.Context, q *benchQuery) (*suanli.OfferResult, error) {
	return s.db.search(ctx, q)
}

func (s *sqliteSystem) apply(ctx context.Context, us []update) error {
	changed := make([]*suanli.Offer, len(us))
	for i, u := range us {
		o := u.apply(s.shadow[u.id-1])
		s.shadow[u.id-1] = o
		changed[i] = o
	}
	return s.db.apply(ctx, changed)
}

// named is a system with its name and its own copy of the update stream.
type named struct {
	name    string
	sys     system
	next    func() update
	applied int64
	tick    time.Duration // how often its writer applies what is due
	lat     map[string][]time.Duration
	cpu     map[string][]time.Duration // CPU time of the querying thread
	rate    float64                    // updates per second achieved while timed
	queries int
}

func benchSearch(ctx context.Context, c searchConfig, out io.Writer) error {
	start := time.Now()
	loadStart := loadavg()
	offers := generate(c.offers, c.seed)
	progress("generated %d offers from %d machines in %.1fs", len(offers), (len(offers)+3)/4, time.Since(start).Seconds())

	// The index, and its heap: the live heap it adds over the offers.
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	idx := market.NewIndex()
	idx.Replace(offers)
	build := time.Since(t0)
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	progress("index: built in %.1fs, heap %.1f MB (its own estimate %.1f MB)", build.Seconds(), mb(heap), mb(int64(idx.MemBytes())))

	dir := c.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "suanli-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	t0 = time.Now()
	db, err := openSQLite(ctx, dir, offers, progress)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	defer db.close()
	sqliteLoad := time.Since(t0)

	systems := []*named{
		{name: "index", sys: &indexSystem{idx: idx}, tick: 2 * time.Millisecond},
		{name: "sqlite", sys: &sqliteSystem{db: db, shadow: slices.Clone(offers)}, tick: 10 * time.Millisecond},
		{name: "naive", sys: &naiveSystem{offers: slices.Clone(offers)}, tick: 2 * time.Millisecond},
	}
	for _, s := range systems {
		s.next = updates(len(offers), c.seed)
		s.lat = map[string][]time.Duration{}
		s.cpu = map[string][]time.Duration{}
	}

	queries := makeQueries(c.perClass, len(offers), c.seed)
	for _, q := range queries {
		if err := db.prepare(ctx, q); err != nil {
			return err
		}
	}
	progress("verifying %d queries on all three systems", len(queries))
	if err := verify(ctx, systems, queries); err != nil {
		return err
	}

	stopProfile, err := startCPUProfile(c.cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	order := slices.Clone(queries)
	rand.New(rand.NewPCG(c.seed, 0x0de7)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, s := range systems {
		if !strings.Contains(","+c.systems+",", ","+s.name+",") {
			continue
		}
		if err := timeSystem(ctx, s, order, c); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	pprof.StopCPUProfile()

	// Bring every system to the same number of updates and check again.
	var most int64
	for _, s := range systems {
		most = max(most, s.applied)
	}
	for _, s := range systems {
		if err := catchUp(ctx, s, most); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	if _, err := db.w.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return fmt.Errorf("sqlite: checkpoint: %w", err)
	}
	progress("verifying again after %d updates on each system", most)
	if err := verify(ctx, systems, queries); err != nil {
		return err
	}

	r := report{
		Offers: len(offers), Machines: (len(offers) + 3) / 4, Seed: c.seed, UpdateRate: c.rate,
		Duration: c.duration.String(), Machine: machine(), Command: "go run ./cmd/suanli-bench search " + strings.Join(os.Args[2:], " "),
		IndexBuildS: build.Seconds(), IndexHeapMB: mb(heap), IndexEstimateMB: mb(int64(idx.MemBytes())),
		SQLiteLoadS: sqliteLoad.Seconds(), Verified: len(queries), UpdatesVerified: most,
		LoadStart: loadStart, LoadEnd: loadavg(),
	}
	for _, s := range systems {
		if len(s.lat) == 0 {
			continue
		}
		sr := systemReport{Name: s.name, Queries: s.queries, UpdatesPerS: s.rate, Classes: map[string]percentiles{}, CPUClasses: map[string]percentiles{}}
		var all, cpu []time.Duration
		for class, l := range s.lat {
			sr.Classes[class] = pct(l)
			all = append(all, l...)
		}
		for class, l := range s.cpu {
			sr.CPUClasses[class] = pct(l)
			cpu = append(cpu, l...)
		}
		sr.All, sr.CPUAll = pct(all), pct(cpu)
		r.Systems = append(r.Systems, sr)
	}
	if c.jsonOut {
		e := json.NewEncoder(out)
		e.SetIndent("", "  ")
		return e.Encode(r)
	}
	r.print(out)
	return nil
}

// verify runs every query on every system and compares ids and totals.
func verify(ctx context.Context, systems []*named, queries []*benchQuery) error {
	bad := 0
	for i, q := range queries {
		var first *suanli.OfferResult
		for _, s := range systems {
			res, err := s.sys.search(ctx, q)
			if err != nil {
				return fmt.Errorf("%s: %s %+v: %w", s.name, q.class, q.q, err)
			}
			if first == nil {
				first = res
				continue
			}
			if a, b := resultIDs(first), resultIDs(res); first.Total != res.Total || !slices.Equal(a, b) {
				bad++
				fmt.Fprintf(os.Stderr, "MISMATCH %s query %q order %q offset %d:\n  %s: total %d ids %v\n  %s: total %d ids %v\n",
					q.class, q.q.Query, q.q.Order, q.q.Offset, systems[0].name, first.Total, head(a), s.name, res.Total, head(b))
			}
		}
		if (i+1)%50 == 0 {
			progress("verified %d of %d queries", i+1, len(queries))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d results differ between systems: no timings reported", bad)
	}
	return nil
}

func resultIDs(r *suanli.OfferResult) []int64 {
	ids := make([]int64, len(r.Offers))
	for i, o := range r.Offers {
		ids[i] = o.ID
	}
	return ids
}

func head(ids []int64) []int64 { return ids[:min(len(ids), 10)] }

// timeSystem runs the query mix on s for c.duration while a writer applies
// c.rate updates per second to it.
func timeSystem(ctx context.Context, s *named, order []*benchQuery, c searchConfig) error {
	progress("%s: querying for %s with %d updates/s", s.name, c.duration, c.rate)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var werr error
	var applied atomic.Int64
	startApplied := s.applied
	wstart := time.Now()
	if c.rate > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			werr = writer(wctx, s, c.rate, &applied)
		}()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	enough := func() bool {
		if time.Since(start) < c.duration {
			return false
		}
		if time.Since(start) > 8*c.duration {
			return true
		}
		for _, qc := range queryClasses {
			if len(s.lat[qc.name]) < c.minPerClass {
				return false
			}
		}
		return true
	}
	for i := 0; !enough(); i++ {
		q := order[i%len(order)]
		c0, cpuOK := threadCPU()
		t := time.Now()
		_, err := s.sys.search(ctx, q)
		d := time.Since(t)
		c1, _ := threadCPU()
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		s.lat[q.class] = append(s.lat[q.class], d)
		if cpuOK {
			s.cpu[q.class] = append(s.cpu[q.class], c1-c0)
		}
		s.queries++
		if ctx.Err() != nil {
			break
		}
	}
	cancel()
	wg.Wait()
	s.rate = float64(s.applied-startApplied) / time.Since(wstart).Seconds()
	progress("%s: %d queries, %.0f updates/s applied", s.name, s.queries, s.rate)
	return werr
}

// writer applies updates to s at rate per second until ctx ends, in
// batches every s.tick.
func writer(ctx context.Context, s *named, rate int, applied *atomic.Int64) error {
	start := time.Now()
	done := int64(0)
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		due := int64(time.Since(start).Seconds()*float64(rate)) - done
		due = min(due, int64(rate)/10) // never more than 100 ms of backlog at once
		if due <= 0 {
			continue
		}
		us := make([]update, due)
		for i := range us {
			us[i] = s.next()
		}
		if err := s.sys.apply(context.WithoutCancel(ctx), us); err != nil {
			return err
		}
		done += due
		s.applied += due
		applied.Add(due)
	}
}

// catchUp applies updates to s until it has applied n.
func catchUp(ctx context.Context, s *named, n int64) error {
	for s.applied < n {
		k := min(n-s.applied, 10_000)
		us := make([]update, k)
		for i := range us {
			us[i] = s.next()
		}
		if err := s.sys.apply(ctx, us); err != nil {
			return err
		}
		s.applied += k
	}
	return nil
}

type percentiles struct {
	N      int     `json:"n"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
	MeanMS float64 `json:"mean_ms"`
}

func pct(l []time.Duration) percentiles {
	if len(l) == 0 {
		return percentiles{}
	}
	s := slices.Clone(l)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	at := func(p float64) float64 {
		i := int(p*float64(len(s))+0.999999) - 1
		return float64(s[max(0, min(i, len(s)-1))]) / 1e6
	}
	return percentiles{N: len(s), P50MS: at(0.50), P99MS: at(0.99), MeanMS: float64(sum) / float64(len(s)) / 1e6}
}

type systemReport struct {
	Name        string                 `json:"name"`
	Queries     int                    `json:"queries"`
	UpdatesPerS float64                `json:"updates_per_s"`
	Classes     map[string]percentiles `json:"classes"`
	All         percentiles            `json:"all"`
	CPUClasses  map[string]percentiles `json:"cpu_classes,omitempty"` // CPU time of the querying thread
	CPUAll      percentiles            `json:"cpu_all"`
}

type report struct {
	Command         string         `json:"command"`
	Machine         string         `json:"machine"`
	LoadStart       string         `json:"loadavg_start"`
	LoadEnd         string         `json:"loadavg_end"`
	Offers          int            `json:"offers"`
	Machines        int            `json:"machines"`
	Seed            uint64         `json:"seed"`
	UpdateRate      int            `json:"update_rate"`
	Duration        string         `json:"duration_per_system"`
	IndexBuildS     float64        `json:"index_build_s"`
	IndexHeapMB     float64        `json:"index_heap_mb"`
	IndexEstimateMB float64        `json:"index_estimate_mb"`
	SQLiteLoadS     float64        `json:"sqlite_load_s"`
	Verified        int            `json:"verified_queries"`
	UpdatesVerified int64          `json:"updates_before_second_check"`
	Systems         []systemReport `json:"systems"`
	RatioSQLite     float64        `json:"p99_ratio_vs_sqlite"`
	RatioNaive      float64        `json:"p99_ratio_vs_naive"`
}

func (r *report) print(out io.Writer) {
	fmt.Fprintf(out, "suanli-bench search: %d offers (%d machines), seed %d, %d updates/s while querying, %s per system\n",
		r.Offers, r.Machines, r.Seed, r.UpdateRate, r.Duration)
	fmt.Fprintf(out, "machine: %s\n", r.Machine)
	fmt.Fprintf(out, "load average: %s at start, %s at end (other work on the machine slows every system alike)\n", r.LoadStart, r.LoadEnd)
	fmt.Fprintf(out, "index: built in %.1fs, heap %.1f MB; sqlite: loaded and indexed in %.1fs\n", r.IndexBuildS, r.IndexHeapMB, r.SQLiteLoadS)
	fmt.Fprintf(out, "verified: %d queries return the same ids and totals on every system, before and after %d concurrent updates\n\n", r.Verified, r.UpdatesVerified)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := "class\t"
	for _, s := range r.Systems {
		hdr += fmt.Sprintf("%s n\tp50 ms\tp99 ms\tcpu p50\tcpu p99\t", s.Name)
	}
	fmt.Fprintln(tw, hdr)
	for _, c := range append(classNames(), "all") {
		line := c + "\t"
		for _, s := range r.Systems {
			p, cp := s.Classes[c], s.CPUClasses[c]
			if c == "all" {
				p, cp = s.All, s.CPUAll
			}
			line += fmt.Sprintf("%d\t%.3f\t%.3f\t%.3f\t%.3f\t", p.N, p.P50MS, p.P99MS, cp.P50MS, cp.P99MS)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	fmt.Fprintln(out)
	var rates []string
	p99 := map[string]float64{}
	for _, s := range r.Systems {
		rates = append(rates, fmt.Sprintf("%s %.0f/s", s.Name, s.UpdatesPerS))
		p99[s.Name] = s.All.P99MS
	}
	fmt.Fprintf(out, "updates applied while querying: %s\n", strings.Join(rates, ", "))
	if p99["index"] > 0 {
		r.RatioSQLite, r.RatioNaive = p99["sqlite"]/p99["index"], p99["naive"]/p99["index"]
	}
	fmt.Fprintf(out, "search p99 ratio: vs sqlite %.1fx, vs naive %.1fx\n", r.RatioSQLite, r.RatioNaive)
}

func classNames() []string {
	var n []string
	for _, c := range queryClasses {
		n = append(n, c.name)
	}
	return n
}

// loadavg returns the 1, 5 and 15 minute load averages, or "n/a".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "n/a"
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// machine describes the CPU and memory of this machine.
func machine() string {
	cpu := runtime.GOARCH
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GB RAM", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%s, %d CPUs%s, %s/%s, %s", cpu, runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
