package console_test

import (
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
	"github.com/suanli/suanli/control"
)

// TestAdvisor checks the advisor's four tools: each needs a session, shows
// its empty form, and, submitted, the advisor package's own answer (the
// same numbers `suanli advise … --json` prints); bad inputs come back
// naming the field.
func TestAdvisor(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	small, _, _ := m.addMachine(machineSpec{host: "rig", gpus: "RTX 4090:2", price: 400_000, minBid: 200_000})
	big, _, _ := m.addMachine(machineSpec{host: "dc", gpus: "A100:4", price: 1_600_000, minBid: 900_000})
	anon := m.browser()
	for _, p := range []string{"/advisor", "/advisor/vram?model=llama-3.1-8b", "/advisor/cpu-or-gpu", "/advisor/rent-vs-buy", "/advisor/compare"} {
		if r := anon.get(p); r.status != http.StatusSeeOther || r.location != "/signin?next="+url.QueryEscape(p) {
			t.Errorf("GET %s without a session: %d %q", p, r.status, r.location)
		}
	}
	b := m.browser()
	b.signIn(m.renterKey)
	for _, p := range []string{"/advisor", "/advisor/cpu-or-gpu", "/advisor/rent-vs-buy", "/advisor/compare"} {
		r := b.get(p)
		if r.status != http.StatusOK || !strings.Contains(r.body, `method="get" action="/advisor/`) || strings.Contains(r.body, `class="card result"`) {
			t.Errorf("GET %s: %d, want the empty form\n%s", p, r.status, r.body)
		}
	}
	// The tables `--list` and `catalog ls` print are on the pages too.
	contains(t, b.get("/advisor/compare"), "The price catalog", "p4de.24xlarge", "2024-10-01")
	contains(t, b.get("/advisor/cpu-or-gpu"), "The rules of thumb", "feature-engineering", "opendata.blender.org")
	if r := b.get("/advisor/horoscope"); r.status != http.StatusNotFound {
		t.Errorf("unknown tool: %d", r.status)
	}

	// GPU memory: a model's typical workload, then one changed by inputs.
	m8 := mustModel(t, "llama-3.1-8b")
	e, err := advisor.EstimateVRAM(m8.TypicalWorkload())
	if err != nil {
		t.Fatal(err)
	}
	r := b.get("/advisor/vram?model=llama-3.1-8b")
	contains(t, r, `id="vram-total">`+gibText(e.Total)+` GiB`, html.EscapeString(e.SearchQuery()), "/offers/"+strconv.FormatInt(small, 10))
	// LLaMA-7B's typical workload: the formula's 15.7 GiB and the issue's
	// published 24 GB both show; the card and the offers follow the
	// published figure, and the rig's RTX 4090 (23.99 GB as its driver
	// reports it) still holds it.
	e, err = advisor.EstimateVRAM(mustModel(t, "llama-7b").TypicalWorkload())
	if err != nil {
		t.Fatal(err)
	}
	r = b.get("/advisor/vram?model=llama-7b")
	contains(t, r, "Estimate from the formula", `id="vram-total">`+gibText(e.Total)+` GiB`, `id="vram-published">24 GB`,
		"Recommended card", `id="vram-card">24 GB`, html.EscapeString("gpu_ram>=23.6"), "/offers/"+strconv.FormatInt(small, 10))
	if strings.Contains(r.body, `id="vram-card">16 GB`) {
		t.Errorf("llama-7b: the console recommends a 16 GB card, below the published 24 GB")
	}
	w := advisor.Workload{Params: 7_000_000_000, Dtype: advisor.BF16, Task: advisor.TaskFinetune, LoRA: true, Batch: 8, Seq: 2048}
	e, err = advisor.EstimateVRAM(w)
	if err != nil {
		t.Fatal(err)
	}
	r = b.get("/advisor/vram?" + url.Values{"params": {"7B"}, "dtype": {"bf16"}, "task": {"finetune"}, "lora": {"on"}, "batch": {"8"}, "seq": {"2048"}}.Encode())
	contains(t, r, `id="vram-total">`+gibText(e.Total)+` GiB`, "LoRA rank 16", `href="`+html.EscapeString("/?"+url.Values{"q": {e.SearchQuery()}, "order": {"dph"}}.Encode())+`"`)
	for _, c := range []struct {
		query url.Values
		msg   string
		field string
	}{
		{url.Values{"params": {"lots"}}, "is not a parameter count", "params"},
		{url.Values{"model": {"llama-3.1-8b"}, "params": {"7B"}}, "not both", "params"},
		{url.Values{"model": {"gpt-9"}}, "unknown model", "model"},
		{url.Values{"params": {"7B"}, "task": {"train"}, "dtype": {"int4"}}, "cannot be trained directly", "dtype"},
		{url.Values{"params": {"7B"}, "batch": {"x"}}, "is not a whole number", "batch"},
		{url.Values{"params": {"7B"}, "task": {"train"}, "batch": {"2"}, "grad-accum": {"4"}}, "cannot split a batch of 2", "grad-accum"},
	} {
		r := b.get("/advisor/vram?" + c.query.Encode())
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, c.msg) || !marked(r.body, c.field) {
			t.Errorf("vram %v: %d, want 400 with %q and %s marked\n%s", c.query, r.status, c.msg, c.field, r.body)
		}
	}

	// CPU or GPU: the market has GPU offers only.
	r = b.get("/advisor/cpu-or-gpu?workload=web-service")
	contains(t, r, "A GPU offer is the better buy", "No CPU-only offer matched", "this work does not use the GPU")
	r = b.get("/advisor/cpu-or-gpu?workload=training")
	contains(t, r, "/offers/"+strconv.FormatInt(small, 10), "Best GPU")
	for _, c := range []struct{ query, msg, field string }{
		{"workload=", "choose a kind of work", "workload"},
		{"workload=knitting", "is not a workload kind", "workload"},
		{"workload=training&q=gpu_nam%3DA100", "unknown field", "q"},
	} {
		r := b.get("/advisor/cpu-or-gpu?" + c.query)
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, c.msg) || !marked(r.body, c.field) {
			t.Errorf("cpu-or-gpu %s: %d, want 400 with %q\n%s", c.query, r.status, c.msg, r.body)
		}
	}

	// Rent or buy: the example, both answers exactly as the advisor has them.
	res, err := advisor.RentVsBuy(advisor.RentVsBuyInput{Hourly: 2_500_000, Hours: 300, Instances: 1, HardwarePrice: suanli.Dollars(30000),
		PowerWatts: 700, KWhPrice: 150_000})
	if err != nil {
		t.Fatal(err)
	}
	r = b.get("/advisor/rent-vs-buy?" + url.Values{"hourly": {"2.5"}, "hours": {"300"}, "instances": {"1"}, "hardware-price": {"30000"},
		"power-watts": {"700"}, "kwh-price": {"0.15"}}.Encode())
	contains(t, r, html.EscapeString(res.TCO.Verdict), res.Rule.RentTotal.String(), res.Rule.DeviceCost.String(), res.Rule.Threshold.String(),
		res.TCO.OwnOverLife.String(), `id="break-even">month `+strconv.FormatInt(res.TCO.BreakEvenMonth, 10))
	for _, c := range []struct {
		query url.Values
		msg   string
		field string
	}{
		{url.Values{"hours": {"300"}, "hardware-price": {"30000"}}, "give the rent per instance-hour", "hourly"},
		{url.Values{"hourly": {"x"}, "hours": {"300"}, "hardware-price": {"30000"}}, "hourly: ", "hourly"},
		{url.Values{"hourly": {"2"}, "hours": {"900"}, "hardware-price": {"30000"}}, "1 to 744", "hours"},
		{url.Values{"hourly": {"2"}, "hours": {"300"}, "hardware-price": {"30000"}, "utilization": {"150%"}}, "between 0 and 1", "utilization"},
		{url.Values{"hourly": {"2"}, "hours": {"300"}, "hardware-price": {"30000"}, "months": {"0"}, "utilization": {"0"}}, "never runs", "utilization"},
	} {
		r := b.get("/advisor/rent-vs-buy?" + c.query.Encode())
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, c.msg) || !marked(r.body, c.field) {
			t.Errorf("rent-vs-buy %v: %d, want 400 with %q and %s marked\n%s", c.query, r.status, c.msg, c.field, r.body)
		}
	}

	// Public clouds: the A100 offer next to the catalog's A100 instances.
	offers, err := m.svc.SearchOffers(as(m.renterID), suanli.OfferQuery{Query: "gpu_name=A100"})
	if err != nil || len(offers.Offers) != 1 {
		t.Fatalf("A100 offers: %v %v", offers, err)
	}
	cmp := advisor.Compare(offers.Offers, advisor.BuiltinCatalog(), m.clock.now().UTC())
	if len(cmp.Offers) != 1 || len(cmp.Offers[0].Equivalents) == 0 {
		t.Fatalf("the catalog has no A100 equivalents: %+v", cmp)
	}
	r = b.get("/advisor/compare?q=gpu_name%3DA100&limit=10&order=dph")
	eq := cmp.Offers[0].Equivalents[0]
	contains(t, r, `data-offer="`+strconv.FormatInt(big, 10)+`"`, eq.Provider, eq.InstanceType, eq.PerGPUHour.String(), advisor.FormatBP(eq.SavingsBP),
		html.EscapeString(cmp.Offers[0].Summary[1:]))
	if r := b.get("/advisor/compare?q=gpu_ram%3Elots"); r.status != http.StatusBadRequest || !marked(r.body, "q") {
		t.Errorf("compare with a bad query: %d\n%s", r.status, r.body)
	}
	if r := b.get("/advisor/compare?limit=1000"); r.status != http.StatusBadRequest || !marked(r.body, "limit") {
		t.Errorf("compare 1000 offers: %d", r.status)
	}
}

func mustModel(t *testing.T, name string) *advisor.Model {
	t.Helper()
	m, ok := advisor.FindModel(name)
	if !ok {
		t.Fatalf("no model %s", name)
	}
	return m
}

// gibText is bytes as the advisor page shows GiB.
func gibText(b int64) string { return strconv.FormatFloat(advisor.GiBOf(b), 'f', 2, 64) }

// marked reports whether the input or select named field carries
// aria-invalid.
func marked(body, field string) bool {
	i := strings.Index(body, `name="`+field+`"`)
	if i < 0 {
		return false
	}
	end := strings.IndexByte(body[i:], '<') // attribute values never hold a raw <
	return end >= 0 && strings.Contains(body[i:i+end], `aria-invalid="true"`)
}
