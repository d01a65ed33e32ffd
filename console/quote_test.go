package console

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
)

func gpuOffer() *suanli.Offer {
	return &suanli.Offer{ID: 7, GPUName: "RTX 4090", NumGPUs: 2, TotalGPUs: 4, GPUPrice: 400_000, DPHBase: 800_000,
		MinBid: 400_000, StorageCost: 100_000, InetUpCost: 10_000, InetDownCost: 20_000}
}

// TestQuoteMatchesMeters checks the quote against what the meters would
// bill: compute per hour, storage accrued second by second (the remainder
// carried) from creation to destroy, traffic per GB.
func TestQuoteMatchesMeters(t *testing.T) {
	o := gpuOffer()
	q, err := newQuote(o, quoteRequest{GPUs: 1, DiskGB: 50, RunHours: 10, StoppedHours: 5, UpGB: 3, DownGB: 7}, 250)
	if err != nil {
		t.Fatal(err)
	}
	// Storage as a meter accrues it: one second at a time, remainder carried.
	var storage suanli.Money
	var rem int64
	for s := 0; s < 15*3600; s++ {
		var m suanli.Money
		m, rem = suanli.Accrue(o.StorageCost*50, suanli.MicrosPerSecond, suanli.MicrosPerMonth, rem)
		storage += m
	}
	want := map[string]suanli.Money{
		"Compute":          4_000_000,
		"Traffic sent":     30_000,
		"Traffic received": 140_000,
		"Platform fee":     0,
	}
	var gotStorage suanli.Money
	for _, l := range q.Lines {
		if strings.HasPrefix(l.Item, "Storage") {
			gotStorage += l.Amount
			continue
		}
		if w, ok := want[l.Item]; !ok || l.Amount != w {
			t.Errorf("%s = %s, want %s", l.Item, l.Amount, w)
		}
	}
	// The quote splits running and stopped hours, so it may round down once
	// more than the single meter does.
	if d := storage - gotStorage; d < 0 || d > 1 {
		t.Errorf("storage quoted %d µ$, metered %d µ$", gotStorage, storage)
	}
	if q.Total != 4_000_000+30_000+140_000+gotStorage {
		t.Errorf("total %s does not add up", q.Total)
	}
	if q.ComputePerHour != 400_000 || q.MinBid != 200_000 || q.StoppedPerMonth != 5_000_000 {
		t.Errorf("rates: compute %s, min bid %s, stopped/month %s", q.ComputePerHour, q.MinBid, q.StoppedPerMonth)
	}
	if !strings.Contains(q.FeeNote, "2.5%") {
		t.Errorf("fee note %q does not give 2.5%%", q.FeeNote)
	}
}

func TestQuoteErrors(t *testing.T) {
	o := gpuOffer()
	huge := suanli.Money(1) << 60
	for _, c := range []struct {
		req   quoteRequest
		field string
		msg   string
	}{
		{quoteRequest{GPUs: 3}, "num_gpus", "offer 7 has 2 free GPUs, you asked for 3"},
		{quoteRequest{DiskGB: -1}, "disk_gb", "not a disk size"},
		{quoteRequest{RunHours: -2}, "hours", "outside"},
		{quoteRequest{StoppedHours: maxQuoteHours + 1}, "stopped_hours", "outside"},
		{quoteRequest{UpGB: -1}, "up_gb", "outside"},
		{quoteRequest{RentalType: "spot"}, "rental_type", "not a rental type"},
		{quoteRequest{RentalType: suanli.RentalInterruptible}, "bid", "needs a positive bid"},
		{quoteRequest{GPUs: 1, RentalType: suanli.RentalInterruptible, Bid: 100_000}, "bid", "$0.10/h is below this offer's minimum bid of $0.20/h"},
		{quoteRequest{GPUs: 1, RentalType: suanli.RentalInterruptible, Bid: huge, RunHours: maxQuoteHours}, "", "larger than any amount"},
	} {
		_, err := newQuote(o, c.req, 0)
		var e *suanli.Error
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("newQuote(%+v) = %v, want %q", c.req, err, c.msg)
		} else if e = err.(*suanli.Error); e.Field != c.field {
			t.Errorf("newQuote(%+v) names field %q, want %q", c.req, e.Field, c.field)
		}
	}
	// An interruptible quote bills the bid.
	q, err := newQuote(o, quoteRequest{GPUs: 1, RunHours: 2, RentalType: suanli.RentalInterruptible, Bid: 250_000}, 0)
	if err != nil || q.Lines[0].Amount != 500_000 {
		t.Errorf("interruptible quote: %v, %+v", err, q)
	}
}

func TestFiltersQuery(t *testing.T) {
	for _, c := range []struct {
		f     offerFilters
		query string
		order string
		field string
	}{
		{offerFilters{}, "", "", ""},
		{offerFilters{Q: "cuda_vers>=12", GPU: "RTX 4090", VRAM: "24", GPUs: "2"}, `cuda_vers>=12 gpu_name="RTX 4090" gpu_ram>=24 num_gpus>=2`, "", ""},
		{offerFilters{Price: "$0.5", Region: "eu-west", Reliability: "99.5"}, `dph<=0.50 region="eu-west" reliability>=0.995`, "", ""},
		{offerFilters{Price: "0.2", Type: "interruptible", Order: "dph-"}, `min_bid<=0.20`, "dph-", ""},
		{offerFilters{GPU: `a"b'c`}, "", "", "gpu"},
		{offerFilters{VRAM: "24 num_gpus>=8"}, "", "", "vram"},
		{offerFilters{GPUs: "-1"}, "", "", "gpus"},
		{offerFilters{Price: "cheap"}, "", "", "price"},
		{offerFilters{Reliability: "101"}, "", "", "reliability"},
		{offerFilters{Type: "spot"}, "", "", "type"},
		{offerFilters{Storage: "0"}, "", "", "storage"},
	} {
		q, err := c.f.query()
		if c.field != "" {
			if e, ok := err.(*suanli.Error); !ok || e.Field != c.field {
				t.Errorf("query(%+v) = %v, want an error naming %s", c.f, err, c.field)
			}
			continue
		}
		if err != nil || q.Query != c.query || q.Order != c.order {
			t.Errorf("query(%+v) = %q %q %v, want %q %q", c.f, q.Query, q.Order, err, c.query, c.order)
		}
	}
	// Sorting by the column already sorted ascending flips it.
	cols := offerFilters{Order: "dph", GPU: "A100"}.columns()
	for _, c := range cols {
		if c.Key == "dph" && (c.Sort != "ascending" || !strings.Contains(c.URL, "order=dph-") || !strings.Contains(c.URL, "gpu=A100")) {
			t.Errorf("price column: %+v", c)
		}
		if c.Key == "gpu_ram" && (c.Sort != "" || !strings.HasSuffix(c.URL, "order=gpu_ram")) {
			t.Errorf("vram column: %+v", c)
		}
	}
}

// TestSpendChart checks the server-drawn chart: well-formed SVG, one bar per
// day, heights proportional to the amounts on a 1-2-5 axis, a text
// alternative, and nothing that needs inline style or script.
func TestSpendChart(t *testing.T) {
	first := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	charges := []*suanli.Charge{
		{Kind: "compute", Amount: 1_500_000, To: first.Add(5 * time.Hour)},
		{Kind: "storage", Amount: 500_000, To: first.Add(6 * time.Hour)},
		{Kind: "compute", Amount: 1_000_000, To: first.AddDate(0, 0, 2)},
		{Kind: "credit", Amount: -50_000_000, To: first.AddDate(0, 0, 2)},
		{Kind: "compute", Amount: 9_000_000, To: first.AddDate(0, 0, -1)}, // before the period
	}
	days := spendByDay(charges, first, first.AddDate(0, 0, 6))
	if len(days) != 7 || days[0].Amount != 2_000_000 || days[2].Amount != 1_000_000 || days[1].Amount != 0 {
		t.Fatalf("spendByDay = %+v", days)
	}
	svg := string(spendChart(days, "Spend & more"))
	var doc struct {
		Rects []struct {
			Class  string `xml:"class,attr"`
			Height int    `xml:"height,attr"`
			Title  string `xml:"title"`
		} `xml:"rect"`
		Texts []string `xml:"text"`
		Title string   `xml:"title"`
	}
	if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
		t.Fatalf("chart is not well-formed: %v\n%s", err, svg)
	}
	if len(doc.Rects) != 7 || doc.Title != "Spend & more" {
		t.Fatalf("chart has %d bars, title %q", len(doc.Rects), doc.Title)
	}
	if h0, h2 := doc.Rects[0].Height, doc.Rects[2].Height; h0 != 2*h2 || doc.Rects[1].Height != 0 {
		t.Errorf("bar heights %d, %d, %d: want $2 twice $1 and an empty day", h0, doc.Rects[1].Height, h2)
	}
	if doc.Rects[0].Title != "Sun Mar 1: $2.00" {
		t.Errorf("first bar's tooltip %q", doc.Rects[0].Title)
	}
	if !strings.Contains(strings.Join(doc.Texts, " "), "$2.00") {
		t.Errorf("axis labels %q lack $2.00", doc.Texts)
	}
	if strings.Contains(svg, "style=") || strings.Contains(svg, "<script") {
		t.Errorf("chart uses inline style or script")
	}
	for _, c := range []struct{ max, step suanli.Money }{{0, 10_000}, {1, 1}, {4_000_000, 1_000_000}, {4_100_000, 2_000_000}, {7, 2}, {990, 500}} {
		if got := niceStep(c.max, 4); got != c.step {
			t.Errorf("niceStep(%d) = %d, want %d", c.max, got, c.step)
		}
	}
}

func TestShellQuote(t *testing.T) {
	got := shellQuote([]string{"sh", "-c", `echo "it's $HOME"`})
	if want := `sh -c 'echo "it'\''s $HOME"'`; got != want {
		t.Errorf("shellQuote = %s, want %s", got, want)
	}
}
