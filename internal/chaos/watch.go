package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SampleEvery is how often a Watch looks at the workloads' beat files.
const SampleEvery = 100 * time.Millisecond

// liveWithin: a copy whose beat file changed this recently is running (the
// workload rewrites it every beatEvery; a frozen or stopped one does not).
const liveWithin = 350 * time.Millisecond

// Watch samples, every SampleEvery, which agents hold a running copy of each
// watched rental, from the beat files the workload writes in its working
// directory. It is safe for concurrent use.
type Watch struct {
	c    *Cluster
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	ids     []int64
	samples []sample
}

type sample struct {
	at    time.Time
	alive map[int64][]int // instance → indexes of the agents running a copy
}

// Watch starts watching; Stop (or the cluster's Close) ends it.
func (c *Cluster) Watch() *Watch {
	w := &Watch{c: c, stop: make(chan struct{}), done: make(chan struct{})}
	c.monitors = append(c.monitors, w)
	go w.run()
	return w
}

// Add watches more rentals.
func (w *Watch) Add(ids ...int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids = append(w.ids, ids...)
}

// Stop ends the sampling.
func (w *Watch) Stop() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

func (w *Watch) run() {
	defer close(w.done)
	t := time.NewTicker(SampleEvery)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		ids := append([]int64(nil), w.ids...)
		w.mu.Unlock()
		now := time.Now()
		s := sample{at: now, alive: map[int64][]int{}}
		for _, id := range ids {
			for _, a := range w.c.Agents {
				fi, err := os.Stat(a.InstanceDir(id) + "/work/beat")
				if err == nil && now.Sub(fi.ModTime()) < liveWithin {
					s.alive[id] = append(s.alive[id], a.Index)
				}
			}
		}
		w.mu.Lock()
		w.samples = append(w.samples, s)
		w.mu.Unlock()
	}
}

// RunningNow returns the agents seen running a copy of the rental in the
// last two samples.
func (w *Watch) RunningNow(id int64) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[int]bool{}
	var out []int
	for i := len(w.samples) - 1; i >= 0 && i >= len(w.samples)-2; i-- {
		for _, a := range w.samples[i].alive[id] {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// MovedAway reports whether a copy of the rental was seen running after t
// on an agent other than not.
func (w *Watch) MovedAway(id int64, after time.Time, not int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.samples {
		if !s.at.After(after) {
			continue
		}
		for _, a := range s.alive[id] {
			if a != not {
				return true
			}
		}
	}
	return false
}

// beatGap is the longest pause between two beats of one running copy; a
// longer one (a freeze) splits its life in two. A loaded machine (two cores
// for a dozen processes) delays beats by a few hundred milliseconds at times:
// that is no freeze.
const beatGap = time.Second

// lives returns when each copy of the rental ran, per agent, from the beat
// logs (exact, unlike the samples): from a start, or the first beat after a
// gap, to a SIGTERM (exact) or the last beat plus a beat period (a SIGKILL
// or a freeze comes unannounced, some time before the next beat).
func (w *Watch) lives(id int64) map[int][]span {
	out := map[int][]span{}
	for _, a := range w.c.Agents {
		b, err := os.ReadFile(filepath.Join(a.Home, "beats", fmt.Sprintf("%d.log", id)))
		if err != nil {
			continue
		}
		var cur *span
		var last time.Time
		closeAt := func(t time.Time) {
			if cur != nil {
				cur.to = t
				out[a.Index] = append(out[a.Index], *cur)
				cur = nil
			}
		}
		for _, line := range strings.Split(string(b), "\n") {
			ns, kind, ok := strings.Cut(line, " ")
			n, err := strconv.ParseInt(ns, 10, 64)
			if !ok || err != nil {
				continue // a line cut short by SIGKILL
			}
			t := time.Unix(0, n)
			switch {
			case kind == "s" || cur == nil || t.Sub(last) > beatGap:
				closeAt(last.Add(beatEvery))
				cur = &span{from: t}
			}
			last = t
			if kind == "t" {
				closeAt(t)
			}
		}
		closeAt(last.Add(beatEvery))
	}
	return out
}

// beatEvery is how often the rentals' workload beats (its -every): the
// resolution of a copy's end when SIGKILL, not SIGTERM, ends it.
const beatEvery = 25 * time.Millisecond

// Copies returns, for one rental between from and to, the most copies that
// ran at once and how long two or more ran at once, from the beat logs.
func (w *Watch) Copies(id int64, from, to time.Time) (most int, dup time.Duration) {
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for _, spans := range w.lives(id) {
		for _, s := range spans {
			a, b := maxTime(s.from, from), minTime(s.to, to)
			if b.After(a) {
				edges = append(edges, edge{a, +1}, edge{b, -1})
			}
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].d < edges[j].d // an end before a start at the same instant
	})
	n := 0
	for i, e := range edges {
		if n >= 2 && i > 0 {
			dup += e.at.Sub(edges[i-1].at)
		}
		n += e.d
		most = max(most, n)
	}
	return most, dup
}

// FirstRunning returns when a copy of the rental first started (or resumed)
// after t on an agent other than not (-1: any agent), and on which, from the
// beat logs.
func (w *Watch) FirstRunning(id int64, after time.Time, not int) (time.Time, int, bool) {
	var best time.Time
	agent, found := 0, false
	for a, spans := range w.lives(id) {
		if a == not {
			continue
		}
		for _, s := range spans {
			if s.to.After(after) {
				at := maxTime(s.from, after)
				if !found || at.Before(best) {
					best, agent, found = at, a, true
				}
				break
			}
		}
	}
	return best, agent, found
}

// span is a time interval [from, to).
type span struct{ from, to time.Time }

// running returns the intervals in which some copy of the rental ran.
func (w *Watch) running(id int64) []span {
	var all []span
	for _, spans := range w.lives(id) {
		all = append(all, spans...)
	}
	sortSpans(all)
	var out []span
	for _, s := range all {
		if n := len(out); n > 0 && !s.from.After(out[n-1].to) {
			out[n-1].to = maxTime(out[n-1].to, s.to)
			continue
		}
		out = append(out, s)
	}
	return out
}

// overlap returns how much of [from, to) the spans cover.
func overlap(spans []span, from, to time.Time) time.Duration {
	var d time.Duration
	for _, s := range spans {
		a, b := maxTime(s.from, from), minTime(s.to, to)
		if b.After(a) {
			d += b.Sub(a)
		}
	}
	return d
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// sortSpans sorts spans by start.
func sortSpans(s []span) {
	sort.Slice(s, func(i, j int) bool { return s[i].from.Before(s[j].from) })
}
