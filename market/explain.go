package market

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/suanli/suanli"
)

// explainer applies a search's conditions one after another, in the order
// the search lists them, and records for each how many offers it removed and
// the removed value nearest to passing.
type explainer struct {
	s          *search
	considered int
	steps      []stepStat
}

// stepStat is what one condition removed.
type stepStat struct {
	removed int
	has     bool // best is set
	best    val  // lowest (for < <=), highest (> >=), closest (= in)
	bestD   float64
	counts  map[string]int // values removed, for = in != notin on text
}

func newExplainer(s *search, considered int) *explainer {
	return &explainer{s: s, considered: considered, steps: make([]stepStat, len(s.conds))}
}

// add runs o through the conditions and reports whether it passed all.
func (e *explainer) add(o *suanli.Offer) bool {
	for i := range e.s.conds {
		c := &e.s.conds[i]
		v := e.s.valueOf(o, c.id)
		if c.match(v) {
			continue
		}
		e.steps[i].note(c, v)
		return false
	}
	return true
}

// note records removed value v for condition c.
func (st *stepStat) note(c *Cond, v val) {
	st.removed++
	f := &fields[c.id]
	switch {
	case f.kind == kindBool:
	case f.kind == kindString || c.Op == OpNE || c.Op == OpNotIn:
		if st.counts == nil {
			st.counts = map[string]int{}
		}
		st.counts[formatVal(f, v)]++
	case c.Op == OpLT || c.Op == OpLE:
		if !st.has || compareVals(f.kind, v, st.best) < 0 {
			st.best, st.has = v, true
		}
	case c.Op == OpGT || c.Op == OpGE:
		if !st.has || compareVals(f.kind, v, st.best) > 0 {
			st.best, st.has = v, true
		}
	default: // = or in on a number: the closest value
		d := math.Inf(1)
		for _, w := range c.vals {
			d = min(d, distance(f.kind, v, w))
		}
		if !st.has || d < st.bestD || (d == st.bestD && compareVals(f.kind, v, st.best) < 0) {
			st.best, st.bestD, st.has = v, d, true
		}
	}
}

func distance(k kind, a, b val) float64 {
	if k == kindFloat {
		return math.Abs(a.f - b.f)
	}
	return math.Abs(float64(a.i) - float64(b.i))
}

// nearest describes the removed value nearest to passing, e.g.
// "cheapest is $1.87/h".
func (st *stepStat) nearest(c *Cond) string {
	f := &fields[c.id]
	if st.counts != nil {
		type kv struct {
			v string
			n int
		}
		var all []kv
		for v, n := range st.counts {
			all = append(all, kv{v, n})
		}
		slices.SortFunc(all, func(a, b kv) int {
			if a.n != b.n {
				return cmp.Compare(b.n, a.n)
			}
			return strings.Compare(a.v, b.v)
		})
		var parts []string
		for i := 0; i < len(all) && i < 3; i++ {
			parts = append(parts, fmt.Sprintf("%s (%s)", all[i].v, formatCount(all[i].n)))
		}
		if len(parts) == 0 {
			return ""
		}
		return "most common " + f.name + ": " + strings.Join(parts, ", ")
	}
	if !st.has {
		return ""
	}
	s := formatVal(f, st.best)
	switch c.Op {
	case OpLT, OpLE:
		if f.kind == kindMoney && f.unit == "/h" {
			return "cheapest is " + s
		}
		return "lowest is " + s
	case OpGT, OpGE:
		if f.unit == "GB" {
			return "largest is " + s
		}
		return "highest is " + s
	}
	return "closest is " + s
}

// result builds the explanation once every offer went through add.
func (e *explainer) result(total int) *suanli.Explain {
	ex := &suanli.Explain{Considered: e.considered, Steps: []suanli.ExplainStep{}}
	remaining := e.considered
	var parts []string
	for i := range e.s.conds {
		c, st := &e.s.conds[i], &e.steps[i]
		before := remaining
		remaining -= st.removed
		step := suanli.ExplainStep{Condition: c.Text, Removed: st.removed, Remaining: remaining}
		if st.removed > 0 {
			step.Nearest = st.nearest(c)
			switch {
			case st.removed == before && i == 0:
				parts = append(parts, fmt.Sprintf("%s removed all %s", c.Text, formatCount(before)))
			case st.removed == before:
				parts = append(parts, fmt.Sprintf("%s removed the remaining %s", c.Text, formatCount(before)))
			default:
				parts = append(parts, fmt.Sprintf("%s removed %s of %s", c.Text, formatCount(st.removed), formatCount(before)))
			}
			if remaining == 0 && step.Nearest != "" {
				parts[len(parts)-1] += " — " + step.Nearest
			}
		}
		ex.Steps = append(ex.Steps, step)
	}
	switch {
	case e.considered == 0:
		ex.Summary = "the market has no offers"
	case len(parts) == 0:
		ex.Summary = fmt.Sprintf("all %s offers match", formatCount(e.considered))
	case total > 0:
		ex.Summary = strings.Join(parts, "; ") + fmt.Sprintf("; %s of %s match", formatCount(total), formatCount(e.considered))
	default:
		ex.Summary = strings.Join(parts, "; ")
	}
	return ex
}
