package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
)

// The advisor's tools, each a page with a form (GET: advice changes
// nothing, so a result is a link to share, and no CSRF token is needed)
// and, once submitted, the result. The advice itself is package advisor's;
// this file only reads the form and lays the result out.
const (
	toolVRAM      = "vram"
	toolCPUOrGPU  = "cpu-or-gpu"
	toolRentVsBuy = "rent-vs-buy"
	toolCompare   = "compare"
)

// advisorTool is one tab of the advisor page.
type advisorTool struct {
	Key, Label, Lead string
}

var advisorTools = []advisorTool{
	{toolVRAM, "GPU memory", "How much GPU memory a model needs to run, fine-tune or train, and the offers that have it."},
	{toolCPUOrGPU, "CPU or GPU", "Whether a many-core CPU offer does your kind of work cheaper than a GPU offer."},
	{toolRentVsBuy, "Rent or buy", "Whether buying the hardware would pay off: the rule of thumb, then the total cost of ownership."},
	{toolCompare, "Public clouds", "The market's offers next to public-cloud prices for the same GPU."},
}

// maxAdvisorOffers bounds the offers one piece of advice looks at.
const maxAdvisorOffers = 500

func (c *Console) registerAdvisorRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /advisor", c.page(c.handleAdvisor))
	mux.HandleFunc("GET /advisor/{tool}", c.page(c.handleAdvisor))
}

// advisorPage is the advisor template's data: the tool shown, its inputs
// as typed, and its result once the form was submitted (or the error,
// with the field it names).
type advisorPage struct {
	Tool  advisorTool
	Tools []advisorTool
	Error *fieldError
	VRAM  *vramView
	CPU   *cpuView
	Rent  *rentBuyView
	Cmp   *compareView
}

// handleAdvisor shows one tool. A request with no query shows its empty
// form; with one, the result too.
func (c *Console) handleAdvisor(w http.ResponseWriter, r *http.Request, s *session) error {
	key := r.PathValue("tool")
	if key == "" {
		key = toolVRAM
	}
	p := advisorPage{Tools: advisorTools}
	for _, t := range advisorTools {
		if t.Key == key {
			p.Tool = t
		}
	}
	if p.Tool.Key == "" {
		return suanli.Errorf(suanli.ENOTFOUND, "no advisor tool %q: choose %s, %s, %s or %s", key, toolVRAM, toolCPUOrGPU, toolRentVsBuy, toolCompare)
	}
	q := r.URL.Query()
	run := len(q) > 0
	var err error
	switch key {
	case toolVRAM:
		p.VRAM = &vramView{In: readVRAMInputs(q)}
		if run {
			err = c.adviseVRAM(r, p.VRAM)
		}
	case toolCPUOrGPU:
		p.CPU = &cpuView{In: cpuInputs{Workload: q.Get("workload"), Q: q.Get("q"), GPUCode: q.Get("gpu-code")}, Kinds: advisor.KindProfiles()}
		if run {
			err = c.adviseCPUOrGPU(r, p.CPU)
		}
	case toolRentVsBuy:
		p.Rent = &rentBuyView{In: readRentBuyInputs(q)}
		if run {
			p.Rent.Result, err = p.Rent.In.advise()
		}
	case toolCompare:
		p.Cmp = &compareView{In: compareInputs{Q: q.Get("q"), Limit: cmpOr(q.Get("limit"), "10"), Order: cmpOr(q.Get("order"), "dph")}}
		if p.Cmp.Catalog, err = c.catalog(); err != nil {
			return err
		}
		advisor.SortCatalog(p.Cmp.Catalog)
		if run {
			err = c.compare(r, p.Cmp)
		}
	}
	status := http.StatusOK
	if err != nil {
		if p.Error = formError(err); p.Error == nil {
			return err
		}
		status = statusOf(err)
	}
	c.render(w, r, status, "advisor.html", &view{Title: "Advisor: " + p.Tool.Label, Nav: "advisor", sess: s, Page: p})
	return nil
}

// vramInputs are the GPU-memory form's inputs, as typed; names are the
// CLI's flags (advise vram), which the advisor's errors name. Empty means
// the model's typical workload, or the advisor's default.
type vramInputs struct {
	Model, Params, Dtype, Task, Batch, Seq, Optimizer, LoRA, LoRARank, GradAccum, Checkpointing string
}

func readVRAMInputs(q url.Values) vramInputs {
	return vramInputs{Model: q.Get("model"), Params: q.Get("params"), Dtype: q.Get("dtype"), Task: q.Get("task"), Batch: q.Get("batch"),
		Seq: q.Get("seq"), Optimizer: q.Get("optimizer"), LoRA: q.Get("lora"), LoRARank: q.Get("lora-rank"),
		GradAccum: q.Get("grad-accum"), Checkpointing: q.Get("checkpointing")}
}

// vramView is the GPU-memory tool: the model table for the form, the
// inputs, and the estimate with offers that hold it.
type vramView struct {
	In     vramInputs
	E      *advisor.Estimate
	Model  *advisor.Model // the named model, if one was
	Desc   string
	Parts  []vramPart
	Offers *suanli.OfferResult
	Query  string // the offer query for machines that hold it
}

// vramPart is one line of the breakdown.
type vramPart struct {
	Name  string
	Bytes int64
}

// Models lists the built-in models for the form's menu.
func (v *vramView) Models() []advisor.Model { return advisor.Models() }

// smallInt reads a whole-number input of the advisor's, bounded so that
// no estimate overflows.
func smallInt(field, s string) (int, bool, error) {
	if strings.TrimSpace(s) == "" {
		return 0, false, nil
	}
	n, err := parseInt(field, s, 0)
	if err != nil {
		return 0, false, err
	}
	if n < 0 || n > 1<<24 {
		return 0, false, suanli.FieldErrorf(field, "%d is out of range: give 0 to %d", n, 1<<24)
	}
	return int(n), true, nil
}

// workload turns the inputs into the advisor's workload, as `suanli advise
// vram` does with its flags: a named model starts from its typical
// workload, and each input given changes it.
func (in vramInputs) workload() (advisor.Workload, *advisor.Model, error) {
	var w advisor.Workload
	var model *advisor.Model
	name, params := strings.TrimSpace(in.Model), strings.TrimSpace(in.Params)
	if name != "" {
		m, ok := advisor.FindModel(name)
		if !ok {
			return w, nil, suanli.FieldErrorf("model", "unknown model %q: choose one from the list, or give the parameter count", name)
		}
		model, w = m, m.TypicalWorkload()
	}
	if params != "" {
		if model != nil {
			return w, nil, suanli.FieldErrorf("params", "choose a model or give a parameter count, not both")
		}
		n, err := advisor.ParseParams(params)
		if err != nil {
			return w, nil, err
		}
		w.Params = n
	}
	if model == nil && params == "" {
		return w, nil, suanli.FieldErrorf("params", "choose a model or give the parameter count, such as 7B")
	}
	var err error
	if s := strings.TrimSpace(in.Dtype); s != "" {
		if w.Dtype, err = advisor.ParseDtype(s); err != nil {
			return w, nil, err
		}
	}
	if s := strings.TrimSpace(in.Task); s != "" {
		if w.Task, err = advisor.ParseTask(s); err != nil {
			return w, nil, err
		}
	}
	if s := strings.TrimSpace(in.Optimizer); s != "" {
		if w.Optimizer, err = advisor.ParseOptimizer(s); err != nil {
			return w, nil, err
		}
	}
	for _, f := range []struct {
		field, text string
		dst         *int
	}{{"batch", in.Batch, &w.Batch}, {"seq", in.Seq, &w.Seq}, {"grad-accum", in.GradAccum, &w.GradAccum}} {
		n, set, err := smallInt(f.field, f.text)
		if err != nil {
			return w, nil, err
		}
		if set {
			*f.dst = n
		}
	}
	rank, set, err := smallInt("lora-rank", in.LoRARank)
	if err != nil {
		return w, nil, err
	}
	if set {
		w.LoRA, w.LoRARank = true, rank
	}
	for _, f := range []struct {
		text string
		dst  *bool
	}{{in.LoRA, &w.LoRA}, {in.Checkpointing, &w.Checkpointing}} {
		switch f.text {
		case "on":
			*f.dst = true
		case "off":
			*f.dst = false
		}
	}
	return w, model, nil
}

// adviseVRAM estimates the memory and finds the cheapest offers that hold it.
func (c *Console) adviseVRAM(r *http.Request, v *vramView) error {
	w, model, err := v.In.workload()
	if err != nil {
		return err
	}
	e, err := advisor.EstimateVRAM(w)
	if err != nil {
		return err
	}
	v.E, v.Model, v.Query = e, model, e.SearchQuery()
	v.Desc = workloadText(e.Workload)
	v.Parts = []vramPart{{"Weights", e.Weights}, {"Gradients", e.Gradients}, {"Optimizer states", e.OptimizerStates},
		{"Activations", e.Activations}, {"KV cache", e.KVCache}, {"Overhead", e.Overhead}}
	v.Offers, err = c.svc.SearchOffers(r.Context(), suanli.OfferQuery{Query: v.Query, Order: "dph", Limit: 5})
	return err
}

// workloadText describes a workload the way `suanli advise vram` does.
func workloadText(w advisor.Workload) string {
	d := string(w.Task) + ", " + string(w.Dtype)
	if w.Task != advisor.TaskInfer && w.Dtype.Bits() == 16 {
		d += " mixed precision"
	}
	d += ", batch " + strconv.Itoa(w.Batch)
	if w.GradAccum > 1 {
		d += " (" + strconv.Itoa(w.GradAccum) + " × " + strconv.Itoa(w.MicroBatch()) + ")"
	}
	if w.Seq > 0 {
		d += ", sequence " + strconv.Itoa(w.Seq)
	}
	if w.Task != advisor.TaskInfer {
		d += ", " + string(w.Optimizer)
		if w.LoRA {
			d += ", LoRA rank " + strconv.Itoa(w.LoRARank)
		}
		if w.Checkpointing {
			d += ", checkpointing"
		}
	}
	return d
}

// cpuInputs are the CPU-or-GPU form's inputs; names are the CLI's flags.
type cpuInputs struct {
	Workload, Q, GPUCode string
}

// cpuView is the CPU-or-GPU tool: the workload kinds for the form and the
// advice.
type cpuView struct {
	In     cpuInputs
	Kinds  []advisor.KindProfile
	Advice *advisor.CPUOrGPUAdvice
}

// cpuRow is one line of the CPU-or-GPU table: the best offer of a side,
// nil when that side has none.
type cpuRow struct {
	Label string
	C     *advisor.OfferCost
}

// Rows are the best CPU and the best GPU offer, for the result table.
func (v *cpuView) Rows() []cpuRow {
	return []cpuRow{{"Best CPU", v.Advice.BestCPU}, {"Best GPU", v.Advice.BestGPU}}
}

// adviseCPUOrGPU prices the matching offers per unit of the kind's work.
func (c *Console) adviseCPUOrGPU(r *http.Request, v *cpuView) error {
	if strings.TrimSpace(v.In.Workload) == "" {
		return suanli.FieldErrorf("workload", "say what runs: choose a kind of work")
	}
	p, err := advisor.ParseWorkloadKind(v.In.Workload)
	if err != nil {
		return err
	}
	res, err := c.svc.SearchOffers(r.Context(), suanli.OfferQuery{Query: v.In.Q, Order: "dph", Limit: maxAdvisorOffers})
	if err != nil {
		return queryError(err)
	}
	v.Advice = advisor.AdviseCPUOrGPU(p, res.Offers, v.In.GPUCode != "")
	return nil
}

// queryError makes a search's invalid-query error name the form's query
// input (q): the market names the query's own field (gpu_ram), which is
// no input of the advisor's forms. The message stays the market's.
func queryError(err error) error {
	var e *suanli.Error
	if errors.As(err, &e) && e.Code == suanli.EINVALID && e.Field != "order" {
		return &suanli.Error{Code: e.Code, Message: e.Message, Field: "q"}
	}
	return err
}

// gib shows bytes as GiB with two decimals, as the CLI does.
func gib(b int64) string { return strconv.FormatFloat(advisor.GiBOf(b), 'f', 2, 64) }

// offersLink is the offers page for a query, cheapest first.
func offersLink(query string) string {
	return "/?" + url.Values{"q": {query}, "order": {"dph"}}.Encode()
}
