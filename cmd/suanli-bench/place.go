package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sched"
)

// placeFlags configure the placement benchmark.
type placeFlags struct {
	hosts      int
	ops        int // placements in the mixed phase
	preemptOps int // placements in the preemption phase
	seed       uint64
	batch      int
	dir        string
	baseline   time.Duration
	limit      int
	target     float64
}

// benchModel is one GPU model of the generated market.
type benchModel struct {
	name  string
	sizes []int        // GPUs per host, drawn uniformly
	price suanli.Money // base on-demand price per GPU-hour
	share int          // weight among hosts
	names []string     // Request.GPUNames, built once
}

var benchModels = []*benchModel{
	{name: "H100", sizes: []int{8, 8, 4}, price: 2_200_000, share: 20},
	{name: "A100 80GB", sizes: []int{8, 4, 4}, price: 1_400_000, share: 15},
	{name: "L40S", sizes: []int{4, 2}, price: 900_000, share: 15},
	{name: "RTX 4090", sizes: []int{1, 2, 4, 8}, price: 400_000, share: 30},
	{name: "RTX 3090", sizes: []int{1, 2, 4}, price: 250_000, share: 20},
}

// preemptModel is the pool the preemption phase keeps saturated.
const preemptModel = 0

func runPlace(args []string) error {
	var f placeFlags
	fs := flag.NewFlagSet("place", flag.ContinueOnError)
	fs.IntVar(&f.hosts, "hosts", 100_000, "hosts in the generated market")
	fs.IntVar(&f.ops, "ops", 1_000_000, "placements in the mixed phase (on-demand and bids)")
	fs.IntVar(&f.preemptOps, "preempt-ops", 300_000, "placements in the preemption phase (≥30% need one)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of every generator")
	fs.IntVar(&f.batch, "handoff", 256, "decisions the placer hands to the log writer at a time (a group commit takes every hand-over since the last fsync)")
	fs.StringVar(&f.dir, "dir", "", "directory for the decision log and the baseline database (default: a temp dir, removed after)")
	fs.DurationVar(&f.baseline, "baseline", 3*time.Second, "how long the SQLite baseline runs")
	fs.IntVar(&f.limit, "limit", 4, "candidates ranked per placement")
	fs.Float64Var(&f.target, "util", 0.90, "utilisation the generator holds (releases keep it there)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the timed phases to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if f.dir == "" {
		d, err := os.MkdirTemp("", "suanli-bench-place")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		f.dir = d
	}
	for _, m := range benchModels {
		m.names = []string{m.name}
	}
	fmt.Printf("machine: %s, %d cores, %s %s/%s\n", cpuModel(), runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("command: go run ./cmd/suanli-bench place %s\n", strings.Join(args, " "))

	// The main run: group-committed decision log.
	logPath := filepath.Join(f.dir, "decisions.log")
	dl, err := openDecisionLog(logPath, f.batch)
	if err != nil {
		return err
	}
	main := newPlaceRun(f, dl)
	main.keep = 1 << 20
	if err := main.fill(); err != nil {
		return err
	}
	if err := dl.sync(); err != nil {
		return err
	}
	total, used := main.c.Usage()
	fmt.Printf("fill: %d hosts, %d GPUs, %.1f%% used by %d claims (%d on-demand, %d bids); %d decisions logged\n",
		f.hosts, total, 100*float64(used)/float64(total), main.c.Claims(), main.byClass[0], main.byClass[1], dl.records)

	a, err := main.phase("mixed", f.ops, main.mixedStep)
	if err != nil {
		return err
	}
	if err := main.c.Verify(); err != nil {
		return fmt.Errorf("engine after the mixed phase: %w", err)
	}
	if err := main.saturate(); err != nil {
		return err
	}
	if err := dl.sync(); err != nil {
		return err
	}
	b, err := main.phase("preempt", f.preemptOps, main.preemptStep)
	if err != nil {
		return err
	}
	if err := main.c.Verify(); err != nil {
		return fmt.Errorf("engine after the preemption phase: %w", err)
	}
	if err := dl.close(); err != nil {
		return err
	}
	fmt.Printf("group commit: %d decisions in %d batches (%.0f a batch), fsync mean %s; a decision is durable %s (p50) / %s (p99) after it is made\n",
		dl.records, dl.batches, float64(dl.records)/float64(max(dl.batches, 1)), dl.meanSync().Round(time.Microsecond),
		dl.latency(50).Round(time.Microsecond), dl.latency(99).Round(time.Microsecond))

	// Verify the durable record on its own: replay the log.
	n, over, err := replay(logPath, main.world, main.c)
	if err != nil {
		return err
	}
	fmt.Printf("verify: engine indexes consistent; log replay of %d decisions: %d over-allocations, final state equal to the engine's\n", n, over)
	if over != 0 {
		return fmt.Errorf("%d over-allocations", over)
	}

	// The baseline: the same engine and stream, one SQLite transaction per
	// decision (WAL, synchronous=FULL).
	base, err := runBaseline(f, main.decisions)
	if err != nil {
		return err
	}
	ratio := a.rate / base.rate
	fmt.Printf("baseline: one SQLite transaction per decision (WAL, synchronous=FULL): %d placements and %d releases in %s = %.0f placements/s; its %d decisions equal the main run's\n",
		base.placements, base.releases, base.elapsed.Round(time.Millisecond), base.rate, base.placements)
	fmt.Printf("preemption phase: %.0f placements/s with %.1f%% preempting\n", b.rate, 100*b.preemptShare)
	fmt.Printf("place: %.0f placements/s, ratio vs sqlite %.1fx\n", a.rate, ratio)
	return nil
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// world is the generated market: hosts and what the replay needs of them.
type world struct {
	hosts []sched.Host
	gpus  []int // by host id − 1: GPU count
	model []int // by host id − 1: model index
}

func genWorld(n int, seed uint64) *world {
	rng := rand.New(rand.NewPCG(seed, 1))
	w := &world{gpus: make([]int, n), model: make([]int, n)}
	identity := make([][]int, sched.MaxGPUs+1)
	for k := range identity {
		for i := 0; i < k; i++ {
			identity[k] = append(identity[k], i)
		}
	}
	regions := []string{"eu-west", "eu-central", "us-east", "asia-east"}
	countries := []string{"DE", "FR", "US", "JP"}
	totalShare := 0
	for _, m := range benchModels {
		totalShare += m.share
	}
	for i := 0; i < n; i++ {
		pick := rng.IntN(totalShare)
		mi := 0
		for ; pick >= benchModels[mi].share; mi++ {
			pick -= benchModels[mi].share
		}
		m := benchModels[mi]
		g := m.sizes[rng.IntN(len(m.sizes))]
		price := m.price * suanli.Money(90+rng.IntN(21)) / 100
		r := rng.IntN(len(regions))
		h := sched.Host{ID: int64(i + 1), OwnerID: 1, GPUName: m.name, GPUMemMB: 80 << 10, GPUIndex: identity[g], CPUCores: 8 * g,
			RAMMB: int64(g) * 64 << 10, DiskFreeGB: 4000, Region: regions[r], Country: countries[r], Status: suanli.MachineOnline,
			Listing: suanli.Listing{Listed: true, PriceGPU: price, MinBid: price * 4 / 10, PriceDisk: 100_000, PreemptGraceS: 30}}
		w.hosts = append(w.hosts, h)
		w.gpus[i], w.model[i] = g, mi
	}
	return w
}

// sink makes decisions durable: the decision log, or the SQLite baseline.
type sink interface {
	place(d decision) error
	release(id, host int64, gpus sched.GPUSet) error
}

// decision is one placement as both runs must agree on it.
type decision struct {
	id      int64
	host    int64
	gpus    sched.GPUSet
	class   sched.Class
	bid     suanli.Money
	victims []int64
}

func (d decision) equal(e decision) bool {
	return d.id == e.id && d.host == e.host && d.gpus == e.gpus && d.class == e.class && d.bid == e.bid && slices.Equal(d.victims, e.victims)
}

// claimInfo is what the generator knows of a live claim.
type claimInfo struct {
	pos   int32 // index in its live list
	units int16
	model int8
	class sched.Class
}

// placeRun drives the engine with the generated stream.
type placeRun struct {
	f       placeFlags
	world   *world
	c       *sched.Cluster
	out     sink
	rng     *rand.Rand
	next    int64
	claims  []claimInfo // by claim id (ids are dense from 1); model −1: gone
	live    [][]int64   // per model
	used    []int       // GPUs owned per model
	total   []int       // GPUs per model
	byClass [2]int

	keep      int        // how many decisions to keep for the baseline's comparison
	decisions []decision // the first keep placements of the mixed phase
	recording bool

	placements, preempting, failures, releases int
	utilMin, utilMax                           float64
}

func newPlaceRun(f placeFlags, out sink) *placeRun {
	w := genWorld(f.hosts, f.seed)
	r := &placeRun{f: f, world: w, c: sched.NewCluster(f.seed), out: out, rng: rand.New(rand.NewPCG(f.seed, 2)), next: 1,
		claims: make([]claimInfo, 1, f.hosts*4), live: make([][]int64, len(benchModels)),
		used: make([]int, len(benchModels)), total: make([]int, len(benchModels))}
	r.c.Limit = f.limit
	for _, h := range w.hosts {
		if err := r.c.AddHost(h); err != nil {
			panic(err)
		}
		r.total[w.model[h.ID-1]] += len(h.GPUIndex)
	}
	return r
}

// request draws a request for model mi (−1: any, by capacity).
func (r *placeRun) request(mi int) sched.Request {
	if mi < 0 {
		mi = r.pickModel(-1)
	}
	m := benchModels[mi]
	n := []int{1, 1, 1, 1, 2, 2, 2, 4, 4, 8}[r.rng.IntN(10)]
	n = min(n, slices.Max(m.sizes))
	req := sched.Request{GPUCount: n, GPUNames: m.names, DiskGB: 50, AllowSimulated: true}
	if r.rng.IntN(100) >= 55 {
		per := m.price*4/10 + suanli.Money(r.rng.Int64N(int64(m.price)))
		req.RentalType, req.Bid = suanli.RentalInterruptible, per*suanli.Money(n)
	}
	return req
}

// pickModel draws a model by capacity, other than skip.
func (r *placeRun) pickModel(skip int) int {
	sum := 0
	for i, t := range r.total {
		if i != skip {
			sum += t
		}
	}
	x := r.rng.IntN(sum)
	for i, t := range r.total {
		if i == skip {
			continue
		}
		if x < t {
			return i
		}
		x -= t
	}
	return len(r.total) - 1
}

// place places one request; false when nothing fits.
func (r *placeRun) place(req sched.Request) (bool, error) {
	id := r.next
	p, _, ok := r.c.Place(req, id)
	if !ok {
		r.failures++
		return false, nil
	}
	r.next++
	mi := r.world.model[p.HostID-1]
	d := decision{id: id, host: p.HostID, gpus: p.GPUs, class: sched.ClassOf(req.RentalType), bid: p.Rates.ComputePerHour}
	for _, v := range p.Preempt {
		d.victims = append(d.victims, v.ID)
		r.forget(v.ID)
	}
	if err := r.out.place(d); err != nil {
		return false, err
	}
	if r.recording && len(r.decisions) < r.keep {
		r.decisions = append(r.decisions, d)
	}
	units := p.GPUs.Count()
	for int64(len(r.claims)) <= id {
		r.claims = append(r.claims, claimInfo{model: -1})
	}
	r.claims[id] = claimInfo{pos: int32(len(r.live[mi])), units: int16(units), model: int8(mi), class: d.class}
	r.live[mi] = append(r.live[mi], id)
	r.used[mi] += units
	r.byClass[d.class^1]++ // index 0: firm, 1: bids
	r.placements++
	if len(p.Preempt) > 0 {
		r.preempting++
	}
	return true, nil
}

// forget drops a claim from the generator's books.
func (r *placeRun) forget(id int64) claimInfo {
	ci := r.claims[id]
	l := r.live[ci.model]
	last := l[len(l)-1]
	l[ci.pos] = last
	if last != id {
		lc := r.claims[last]
		lc.pos = ci.pos
		r.claims[last] = lc
	}
	r.live[ci.model] = l[:len(l)-1]
	r.used[ci.model] -= int(ci.units)
	r.claims[id] = claimInfo{model: -1}
	return ci
}

// release releases a random claim of model mi (−1: any model, by claims).
func (r *placeRun) release(mi int, onlyFirm bool) error {
	if mi < 0 {
		n := 0
		for _, l := range r.live {
			n += len(l)
		}
		x := r.rng.IntN(n)
		for i, l := range r.live {
			if x < len(l) {
				mi = i
				break
			}
			x -= len(l)
		}
	}
	l := r.live[mi]
	if len(l) == 0 {
		return nil
	}
	id := l[r.rng.IntN(len(l))]
	for tries := 0; onlyFirm && r.claims[id].class != sched.ClassFirm && tries < 64; tries++ {
		id = l[r.rng.IntN(len(l))]
	}
	hostID, gpus, ok := r.c.Release(id)
	if !ok {
		return fmt.Errorf("release %d: unknown to the engine", id)
	}
	r.forget(id)
	r.releases++
	return r.out.release(id, hostID, gpus)
}

// noteUtil widens the utilisation band seen.
func (r *placeRun) noteUtil() {
	u := r.util()
	r.utilMin, r.utilMax = min(r.utilMin, u), max(r.utilMax, u)
}

func (r *placeRun) util() float64 {
	u, t := 0, 0
	for i := range r.used {
		u, t = u+r.used[i], t+r.total[i]
	}
	return float64(u) / float64(t)
}

// fill places requests until the target utilisation.
func (r *placeRun) fill() error {
	for misses := 0; r.util() < r.f.target && misses < 1000; {
		ok, err := r.place(r.request(-1))
		if err != nil {
			return err
		}
		if !ok {
			misses++
		}
	}
	return nil
}

// mixedStep: one placement (on-demand or bid, any model), then releases
// hold the utilisation at the target.
func (r *placeRun) mixedStep() error {
	if _, err := r.place(r.request(-1)); err != nil {
		return err
	}
	r.noteUtil()
	for r.util() > r.f.target {
		if err := r.release(-1, false); err != nil {
			return err
		}
	}
	return nil
}

// saturate fills the preemption pool with one-GPU claims, half of them bids.
func (r *placeRun) saturate() error {
	for len(r.live[preemptModel]) > 0 {
		if err := r.release(preemptModel, false); err != nil {
			return err
		}
	}
	for i := 0; r.used[preemptModel] < r.total[preemptModel]; i++ {
		if _, err := r.place(r.poolRequest(i%2 == 0)); err != nil {
			return err
		}
	}
	return nil
}

func (r *placeRun) poolRequest(firm bool) sched.Request {
	m := benchModels[preemptModel]
	req := sched.Request{GPUCount: 1, GPUNames: m.names, DiskGB: 50, AllowSimulated: true}
	if !firm {
		req.RentalType, req.Bid = suanli.RentalInterruptible, m.price*4/10+suanli.Money(r.rng.Int64N(int64(m.price)))
	}
	return req
}

// preemptStep: half the time an on-demand request into the saturated pool
// (it must preempt a bid), after which an on-demand claim there ends and a
// bid takes its GPU back; otherwise a request elsewhere, as in the mixed
// phase.
func (r *placeRun) preemptStep() error {
	if r.rng.IntN(2) == 0 {
		if _, err := r.place(r.poolRequest(true)); err != nil {
			return err
		}
		if err := r.release(preemptModel, true); err != nil {
			return err
		}
		for r.used[preemptModel] < r.total[preemptModel] {
			ok, err := r.place(r.poolRequest(false))
			if err != nil || !ok {
				return err
			}
		}
		return nil
	}
	if _, err := r.place(r.request(r.pickModel(preemptModel))); err != nil {
		return err
	}
	r.noteUtil()
	for r.otherUtil() > r.f.target {
		mi := r.pickModel(preemptModel)
		if err := r.release(mi, false); err != nil {
			return err
		}
	}
	return nil
}

func (r *placeRun) otherUtil() float64 {
	u, t := 0, 0
	for i := range r.used {
		if i != preemptModel {
			u, t = u+r.used[i], t+r.total[i]
		}
	}
	return float64(u) / float64(t)
}

// phaseResult is one timed phase.
type phaseResult struct {
	rate         float64
	preemptShare float64
}

// phase runs step until ops placements were made, and times it up to the
// last group commit.
func (r *placeRun) phase(name string, ops int, step func() error) (phaseResult, error) {
	r.placements, r.preempting, r.failures, r.releases = 0, 0, 0, 0
	r.utilMin, r.utilMax = 1, 0
	r.recording = name == "mixed"
	dl, _ := r.out.(*decisionLog)
	cpu0 := cpuTime()
	start := time.Now()
	lastReport := start
	for r.placements < ops {
		if err := step(); err != nil {
			return phaseResult{}, err
		}
		r.noteUtil()
		if dl != nil && time.Since(lastReport) > 2*time.Second {
			lastReport = time.Now()
			fmt.Printf("  %s: %d placements…\n", name, r.placements)
		}
	}
	if dl != nil {
		if err := dl.sync(); err != nil {
			return phaseResult{}, err
		}
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	res := phaseResult{rate: float64(r.placements) / elapsed.Seconds(), preemptShare: float64(r.preempting) / float64(max(r.placements, 1))}
	if dl != nil {
		fmt.Printf("%s: %d placements (%.1f%% preempting, %d found no host) and %d releases in %s, utilisation %.2f–%.2f%%: %.0f placements/s durable (%s of CPU: %.0f placements per CPU-second)\n",
			name, r.placements, 100*res.preemptShare, r.failures, r.releases, elapsed.Round(time.Millisecond), 100*r.utilMin, 100*r.utilMax, res.rate,
			cpu.Round(time.Millisecond), float64(r.placements)/cpu.Seconds())
	}
	return res, nil
}

// cpuTime is the CPU time this process has used (all threads: the placer,
// the log writer, the garbage collector).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
