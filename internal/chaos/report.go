package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Summary is what one fault did over several trials.
type Summary struct {
	Fault  Fault
	Trials int
	// Detection (fault → relaunch), and from the last heartbeat; nearest
	// rank percentiles.
	DetectP50, DetectP99, DetectMax time.Duration
	SinceBeatP50                    time.Duration
	// The worst trial's billing: after the last heartbeat, while no copy
	// ran, and twice (seconds).
	BilledAfterBeat, BilledIdle, BilledTwice float64
	// The most copies of one rental at once, and the longest they ran
	// together.
	MaxCopies    int
	DuplicateMax time.Duration
	// Relaunches of the managed job, fewest and most per trial.
	RelaunchesMin, RelaunchesMax int
	// Interruptions on the faulted host, most in one trial.
	Interruptions int
	// Rentals declared lost in all (a false loss where the fault must not
	// be detected), and trials with the host seen suspect.
	Lost, Suspect int
	// Fault → the managed job running elsewhere; heal → the healed host's
	// copy removed.
	RecoveryP50, RecoveryMax time.Duration
	CleanupP50, CleanupMax   time.Duration
	// Delayed: the lossy link delayed packets too (netem).
	Delayed bool
	Notes   []string
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}

// Summarize groups trials by fault, in the order the faults first appear.
func Summarize(trials []*Trial) []Summary {
	var out []Summary
	idx := map[Fault]int{}
	var detect, since, recovery, cleanup [][]time.Duration
	for _, t := range trials {
		i, ok := idx[t.Fault]
		if !ok {
			i = len(out)
			idx[t.Fault] = i
			out = append(out, Summary{Fault: t.Fault, RelaunchesMin: t.Relaunches, RelaunchesMax: t.Relaunches})
			detect, since, recovery, cleanup = append(detect, nil), append(since, nil), append(recovery, nil), append(cleanup, nil)
		}
		s := &out[i]
		s.Trials++
		if t.Detected > 0 {
			detect[i] = append(detect[i], t.Detected)
			since[i] = append(since[i], t.SinceHeartbeat)
		}
		if t.Recovery > 0 {
			recovery[i] = append(recovery[i], t.Recovery)
		}
		if t.Cleanup > 0 {
			cleanup[i] = append(cleanup[i], t.Cleanup)
		}
		s.BilledAfterBeat = max(s.BilledAfterBeat, t.BilledAfterHeartbeat)
		s.BilledIdle = max(s.BilledIdle, t.BilledIdle)
		s.BilledTwice = max(s.BilledTwice, t.BilledTwice)
		s.MaxCopies = max(s.MaxCopies, t.MaxCopies)
		s.DuplicateMax = max(s.DuplicateMax, t.Duplicate)
		s.RelaunchesMin, s.RelaunchesMax = min(s.RelaunchesMin, t.Relaunches), max(s.RelaunchesMax, t.Relaunches)
		s.Interruptions = max(s.Interruptions, t.Interruptions)
		s.Lost += t.Lost
		if t.Suspect {
			s.Suspect++
		}
		s.Delayed = s.Delayed || t.Delayed
		for _, n := range append(slices.Clone(t.Notes), t.Details...) {
			s.Notes = append(s.Notes, fmt.Sprintf("round %d: %s", t.Round, n))
		}
	}
	for i := range out {
		s := &out[i]
		s.DetectP50, s.DetectP99, s.DetectMax = percentile(detect[i], 50), percentile(detect[i], 99), percentile(detect[i], 100)
		s.SinceBeatP50 = percentile(since[i], 50)
		s.RecoveryP50, s.RecoveryMax = percentile(recovery[i], 50), percentile(recovery[i], 100)
		s.CleanupP50, s.CleanupMax = percentile(cleanup[i], 50), percentile(cleanup[i], 100)
	}
	return out
}

func secs(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", d.Seconds())
}

// WriteTable writes the summaries as a Markdown table, one row per fault,
// and the notes of any trial that broke a promise under it.
func WriteTable(w io.Writer, sums []Summary) {
	fmt.Fprintln(w, "| fault | trials | detection p50 / p99 / max (s) | last heartbeat → relaunch p50 (s) | billed after last heartbeat (s, max) | billed while no copy ran (s, max) | billed twice (s) | copies at once (max) | two copies ran (ms, max) | relaunches per trial | interrupted on the host (max) | rentals declared lost | trials suspect | recovery p50 / max (s) | healed copy removed p50 / max (s) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range sums {
		name := string(s.Fault)
		if s.Fault == Loss && !s.Delayed {
			name += " (no delay: no netem)"
		}
		det := "–"
		if s.DetectMax > 0 {
			det = fmt.Sprintf("%s / %s / %s", secs(s.DetectP50), secs(s.DetectP99), secs(s.DetectMax))
		}
		rec := "–"
		if s.RecoveryMax > 0 {
			rec = fmt.Sprintf("%s / %s", secs(s.RecoveryP50), secs(s.RecoveryMax))
		}
		clean := "–"
		if s.CleanupMax > 0 {
			clean = fmt.Sprintf("%s / %s", secs(s.CleanupP50), secs(s.CleanupMax))
		}
		rel := fmt.Sprint(s.RelaunchesMin)
		if s.RelaunchesMax != s.RelaunchesMin {
			rel = fmt.Sprintf("%d–%d", s.RelaunchesMin, s.RelaunchesMax)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %.3f | %.3f | %.3f | %d | %d | %s | %d | %d | %d | %s | %s |\n",
			name, s.Trials, det, secs(s.SinceBeatP50), s.BilledAfterBeat, s.BilledIdle, s.BilledTwice, s.MaxCopies,
			s.DuplicateMax.Milliseconds(), rel, s.Interruptions, s.Lost, s.Suspect, rec, clean)
	}
	var notes []string
	for _, s := range sums {
		for _, n := range s.Notes {
			notes = append(notes, fmt.Sprintf("- %s: %s", s.Fault, n))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nNotes:\n%s\n", strings.Join(notes, "\n"))
	}
}
