package console

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
)

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
	rep := &suanli.CostReport{By: "day", Rows: []suanli.CostRow{
		{Key: "2026-02-28", Amount: 9_000_000}, // before the period
		{Key: "2026-03-01", Amount: 2_000_000}, {Key: "2026-03-03", Amount: 1_000_000},
	}}
	days := daysOf(rep, first, first.AddDate(0, 0, 6))
	if len(days) != 7 || days[0].Amount != 2_000_000 || days[2].Amount != 1_000_000 || days[1].Amount != 0 {
		t.Fatalf("daysOf = %+v", days)
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

func TestBudgetBar(t *testing.T) {
	svg := string(budgetBar(85, []int{50, 80, 100}))
	var doc struct {
		Rects []struct {
			Class string `xml:"class,attr"`
			Width int    `xml:"width,attr"`
		} `xml:"rect"`
		Lines []struct {
			X int `xml:"x1,attr"`
		} `xml:"line"`
	}
	if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Rects) != 2 || doc.Rects[1].Width != 204 || doc.Rects[1].Class != "bar warn" {
		t.Errorf("85%% bar: %+v", doc.Rects)
	}
	if len(doc.Lines) != 2 || doc.Lines[0].X != 120 || doc.Lines[1].X != 192 {
		t.Errorf("threshold ticks at 50%% and 80%%: %+v", doc.Lines)
	}
	if !strings.Contains(string(budgetBar(130, nil)), `class="bar over" x="0" y="3" width="240"`) {
		t.Errorf("an overspent budget is not a full bar marked over")
	}
}

func TestShellQuote(t *testing.T) {
	got := shellQuote([]string{"sh", "-c", `echo "it's $HOME"`})
	if want := `sh -c 'echo "it'\''s $HOME"'`; got != want {
		t.Errorf("shellQuote = %s, want %s", got, want)
	}
}
