package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

// benchQuery is one search in two languages: the query language for the
// index and the naive scan, and SQL for SQLite. Each class writes both from
// the same parameters.
type benchQuery struct {
	class string
	q     suanli.OfferQuery
	where string // SQL condition, without the default filter
	args  []any
	order string // SQL ORDER BY keys, without the id tie-break
	any   bool   // the query drops the default rentable filter
}

// sqlWhere is the full condition: the default filter (rentable for an
// anonymous renter) and the class's own.
func (q *benchQuery) sqlWhere() string {
	var parts []string
	if !q.any {
		parts = append(parts, "rentable = 1 AND simulated = 0")
	}
	if q.where != "" {
		parts = append(parts, q.where)
	}
	if len(parts) == 0 {
		return "1"
	}
	return strings.Join(parts, " AND ")
}

func (q *benchQuery) sqlSelect(cols []string) string {
	return "SELECT " + strings.Join(cols, ", ") + " FROM offers WHERE " + q.sqlWhere() +
		" ORDER BY " + q.order + ", id LIMIT ? OFFSET ?"
}

func (q *benchQuery) sqlCount() string {
	return "SELECT count(*) FROM offers WHERE " + q.sqlWhere()
}

// queryClasses are the benchmark's query mix, each a generator of one
// query from the seeded source.
var queryClasses = []struct {
	name string
	make func(r *rand.Rand, n int) benchQuery
}{
	{"model-shop", func(r *rand.Rand, n int) benchQuery {
		// A model, a GPU count, verified, reliable; cheapest first.
		m := models[zipfIndex(r, 10)]
		ng := []int{1, 2, 4}[r.IntN(3)]
		rel := []string{"0.9", "0.95", "0.98"}[r.IntN(3)]
		return benchQuery{
			q:     suanli.OfferQuery{Query: fmt.Sprintf("gpu_name=%s num_gpus>=%d verified=true reliability>%s", under(m.name), ng, rel), Order: "dph"},
			where: "gpu_name = ? AND num_gpus >= ? AND verified = 1 AND reliability > ?", args: []any{m.name, ng, atof(rel)},
			order: "dph_total",
		}
	}},
	{"value-hunt", func(r *rand.Rand, n int) benchQuery {
		// Enough VRAM under a price cap; most DLPerf per dollar first.
		vram := []int{12, 16, 24, 48}[r.IntN(4)]
		cap := []string{"0.3", "0.5", "1", "2"}[r.IntN(4)]
		return benchQuery{
			q:     suanli.OfferQuery{Query: fmt.Sprintf("gpu_ram>=%d dph<%s", vram, cap), Order: "dlperf_per_dphtotal-"},
			where: "gpu_ram >= ? AND dph_total < ?", args: []any{float64(vram), money(cap)},
			order: "dlperf_per_dphtotal DESC",
		}
	}},
	{"region-8gpu", func(r *rand.Rand, n int) benchQuery {
		// A country, a bandwidth floor, 8 GPUs; cheapest first.
		c := countries[zipfIndex(r, 20)].code
		bw := []int{500, 1000, 2000}[r.IntN(3)]
		return benchQuery{
			q:     suanli.OfferQuery{Query: fmt.Sprintf("country=%s inet_down>=%d num_gpus=8", c, bw), Order: "dph"},
			where: "country = ? AND inet_down >= ? AND num_gpus = 8", args: []any{c, float64(bw)},
			order: "dph_total",
		}
	}},
	{"browse", func(r *rand.Rand, n int) benchQuery {
		// Everything rentable, by dlperf per dollar (the order the SQLite
		// baseline has a column for); sometimes page 2 or 10.
		off := []int{0, 0, 64, 576}[r.IntN(4)]
		return benchQuery{
			q:     suanli.OfferQuery{Offset: off, Order: "dlperf_per_dphtotal-"},
			order: "dlperf_per_dphtotal DESC",
		}
	}},
	{"datacenter", func(r *rand.Rand, n int) benchQuery {
		// Datacenter parts with CUDA and disk floors; two sort keys.
		sets := [][]string{{"A100 SXM4", "H100 SXM"}, {"H100 SXM", "H200", "B200"}, {"L40S", "A40", "RTX 6000 Ada"}}
		set := sets[r.IntN(len(sets))]
		cuda := []string{"12", "12.2", "12.4"}[r.IntN(3)]
		disk := []int{200, 500, 1000}[r.IntN(3)]
		var names []string
		var args []any
		for _, s := range set {
			names = append(names, under(s))
			args = append(args, s)
		}
		return benchQuery{
			q: suanli.OfferQuery{Query: fmt.Sprintf("gpu_name in [%s] cuda_vers>=%s disk_space>=%d datacenter=true", strings.Join(names, ","), cuda, disk),
				Order: "dph,reliability-"},
			where: "gpu_name IN (" + strings.TrimSuffix(strings.Repeat("?,", len(set)), ",") + ") AND cuda_vers >= ? AND disk_space >= ? AND datacenter = 1",
			args:  append(args, atof(cuda), float64(disk)),
			order: "dph_total, reliability DESC",
		}
	}},
	{"lookup", func(r *rand.Rand, n int) benchQuery {
		// One offer by id, rented or not.
		id := 1 + r.IntN(n)
		return benchQuery{
			q:     suanli.OfferQuery{Query: fmt.Sprintf("id=%d rentable=any", id), Order: "dlperf_per_dphtotal-"},
			where: "id = ?", args: []any{id}, any: true,
			order: "dlperf_per_dphtotal DESC",
		}
	}},
	{"count", func(r *rand.Rand, n int) benchQuery {
		// How many offers of a model in a country (the total; one row).
		m := models[zipfIndex(r, len(models))]
		c := countries[zipfIndex(r, 30)].code
		return benchQuery{
			q:     suanli.OfferQuery{Query: fmt.Sprintf("gpu_name=%s country=%s", under(m.name), c), Limit: 1, Order: "dlperf_per_dphtotal-"},
			where: "gpu_name = ? AND country = ?", args: []any{m.name, c},
			order: "dlperf_per_dphtotal DESC",
		}
	}},
	{"bid", func(r *rand.Rand, n int) benchQuery {
		// Interruptible: a low minimum bid for several GPUs; lowest bid first.
		bid := []string{"0.2", "0.5", "1"}[r.IntN(3)]
		ng := []int{2, 4, 8}[r.IntN(3)]
		return benchQuery{
			q:     suanli.OfferQuery{Query: fmt.Sprintf("min_bid<%s num_gpus>=%d", bid, ng), Order: "min_bid"},
			where: "min_bid < ? AND num_gpus >= ?", args: []any{money(bid), ng},
			order: "min_bid",
		}
	}},
}

// zipfIndex draws an index in [0, n) favouring the front.
func zipfIndex(r *rand.Rand, n int) int {
	return int(rand.NewZipf(r, 1.2, 1, uint64(n-1)).Uint64())
}

func under(s string) string { return strings.ReplaceAll(s, " ", "_") }

func atof(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(err)
	}
	return f
}

func money(s string) int64 {
	m, err := suanli.ParseMoney(s)
	if err != nil {
		panic(err)
	}
	return int64(m)
}

// makeQueries returns perClass queries of every class, interleaved.
func makeQueries(perClass, n int, seed uint64) []*benchQuery {
	r := rand.New(rand.NewPCG(seed, 0x9e77))
	var qs []*benchQuery
	for range perClass {
		for _, c := range queryClasses {
			q := c.make(r, n)
			q.class = c.name
			qs = append(qs, &q)
		}
	}
	return qs
}
