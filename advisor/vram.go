package advisor

import (
	"fmt"
	"math"
	"strings"

	"github.com/suanli/suanli"
)

// Dtype is the number format of a model's weights: fp32, fp16, bf16, int8
// or int4. For training, fp16 and bf16 mean mixed precision (16-bit weights,
// gradients and activations, fp32 master weights in the optimizer).
type Dtype string

// The dtypes the advisor knows.
const (
	FP32 Dtype = "fp32"
	FP16 Dtype = "fp16"
	BF16 Dtype = "bf16"
	INT8 Dtype = "int8"
	INT4 Dtype = "int4"
)

// Bits returns the storage width of one weight in d; 0 for an unknown dtype.
func (d Dtype) Bits() int {
	switch d {
	case FP32:
		return 32
	case FP16, BF16:
		return 16
	case INT8:
		return 8
	case INT4:
		return 4
	}
	return 0
}

// ParseDtype accepts the usual spellings: fp32/float32, fp16/float16/half,
// bf16/bfloat16, int8/8bit, int4/4bit/nf4.
func ParseDtype(s string) (Dtype, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fp32", "float32", "f32", "float", "full":
		return FP32, nil
	case "fp16", "float16", "f16", "half":
		return FP16, nil
	case "bf16", "bfloat16":
		return BF16, nil
	case "int8", "8bit", "8-bit", "fp8", "q8":
		return INT8, nil
	case "int4", "4bit", "4-bit", "nf4", "q4", "fp4":
		return INT4, nil
	}
	return "", suanli.FieldErrorf("dtype", "%q is not a dtype: use fp32, fp16, bf16, int8 or int4", s)
}

// Task is what the GPU memory is for: inference, fine-tuning or training.
// Full fine-tuning needs the same memory as training (every weight gets a
// gradient and optimizer state); fine-tuning differs in practice by smaller
// batches and by LoRA.
type Task string

// The tasks.
const (
	TaskInfer    Task = "infer"
	TaskFinetune Task = "finetune"
	TaskTrain    Task = "train"
)

// ParseTask accepts infer/inference, finetune/fine-tune, train/training.
func ParseTask(s string) (Task, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "infer", "inference", "serve", "predict":
		return TaskInfer, nil
	case "finetune", "fine-tune", "ft", "tune":
		return TaskFinetune, nil
	case "train", "training", "pretrain":
		return TaskTrain, nil
	}
	return "", suanli.FieldErrorf("task", "%q is not a task: use infer, finetune or train", s)
}

// Optimizer is the training optimizer; it decides the optimizer-state bytes
// per trainable parameter.
type Optimizer string

// The optimizers. SGD means SGD with momentum (one state per parameter), as
// vision training uses it.
const (
	Adam  Optimizer = "adam"
	AdamW Optimizer = "adamw"
	SGD   Optimizer = "sgd"
)

// ParseOptimizer accepts adam, adamw and sgd.
func ParseOptimizer(s string) (Optimizer, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "adam":
		return Adam, nil
	case "adamw":
		return AdamW, nil
	case "sgd", "momentum":
		return SGD, nil
	}
	return "", suanli.FieldErrorf("optimizer", "%q is not an optimizer: use adam, adamw or sgd", s)
}

// Workload describes what will run. Either Model (a name or alias from the
// Models table) or Params is set. Zero values take defaults: Dtype fp16,
// Task infer, Batch 1, Seq min(2048, the model's context), Optimizer adamw,
// LoRARank 16, GradAccum 1.
type Workload struct {
	Model         string    `json:"model,omitempty"`
	Params        int64     `json:"params,omitempty"`
	Dtype         Dtype     `json:"dtype"`
	Task          Task      `json:"task"`
	Batch         int       `json:"batch"`      // samples per optimizer step (the effective batch)
	Seq           int       `json:"seq"`        // tokens per sample (transformers)
	Optimizer     Optimizer `json:"optimizer"`  // training only
	LoRA          bool      `json:"lora"`       // train low-rank adapters only; int8/int4 + LoRA is QLoRA
	LoRARank      int       `json:"lora_rank"`  // adapter rank
	GradAccum     int       `json:"grad_accum"` // micro-batches per step: activations are for Batch/GradAccum samples
	Checkpointing bool      `json:"checkpointing"`
}

func (w Workload) training() bool { return w.Task == TaskTrain || w.Task == TaskFinetune }

// MicroBatch is the number of samples whose activations are held at once:
// Batch split over GradAccum micro-batches, rounded up.
func (w Workload) MicroBatch() int {
	b, k := max(w.Batch, 1), max(w.GradAccum, 1)
	return (b + k - 1) / k
}

// Estimate is the minimum GPU memory for a workload, in bytes, with its
// parts. Total = Weights + Gradients + OptimizerStates + Activations +
// KVCache + Overhead. Alternatives say what changing one choice would need.
type Estimate struct {
	Workload        Workload `json:"workload"` // with defaults filled in
	ModelName       string   `json:"model_name"`
	Params          int64    `json:"params"`
	Trainable       int64    `json:"trainable"` // parameters with gradients (0 for inference)
	Weights         int64    `json:"weights"`
	Gradients       int64    `json:"gradients"`
	OptimizerStates int64    `json:"optimizer_states"` // incl. fp32 master weights under mixed precision
	Activations     int64    `json:"activations"`
	KVCache         int64    `json:"kv_cache"`
	Overhead        int64    `json:"overhead"` // CUDA context and allocator fragmentation
	Total           int64    `json:"total"`
	// PublishedGB is the published minimum GPU memory for this workload, in
	// GB as cards are sold (binary): set when the model's table row has one
	// and the workload is the model's typical workload, 0 otherwise. The
	// recommendation (SmallestCard, SearchQuery) never falls below it, even
	// when the formula's Total does.
	PublishedGB  float64       `json:"published_gb,omitempty"`
	Assumptions  []string      `json:"assumptions"`
	Alternatives []Alternative `json:"alternatives,omitempty"`
}

// Alternative is the estimate's total under one change of the workload.
type Alternative struct {
	Change string `json:"change"`
	Total  int64  `json:"total"`
	Delta  int64  `json:"delta"` // Total minus the estimate's Total: negative saves memory
}

// Overhead constants: the CUDA context with cuBLAS/cuDNN workspaces takes
// roughly 300-800 MiB depending on the GPU and driver (CUDA lazy loading
// trims it); PyTorch's caching allocator adds fragmentation, commonly
// 5-20% (EleutherAI's "Transformer Math 101" budgets 20% for inference).
const (
	CUDAContextBytes int64 = 512 << 20
	FragmentationBP  int64 = 1000 // 10% of the tensors, in basis points
)

// GiB is 2^30 bytes: GPU memory sizes ("24 GB" cards) are binary.
const GiB = 1 << 30

// GiBOf converts bytes to GiB for display.
func GiBOf(b int64) float64 { return float64(b) / GiB }

// EstimateVRAM estimates the minimum GPU memory for w. It returns EINVALID
// for an unknown model, a missing parameter count, or a combination that
// cannot run (training int8/int4 weights without LoRA).
func EstimateVRAM(w Workload) (*Estimate, error) {
	e, a, err := estimate(w)
	if err != nil {
		return nil, err
	}
	e.PublishedGB = publishedGB(e.Workload)
	for _, alt := range alternatives(e.Workload, isTransformer(a.kind)) {
		ae, _, err := estimate(alt.w)
		if err != nil {
			continue
		}
		e.Alternatives = append(e.Alternatives, Alternative{Change: alt.change, Total: ae.Total, Delta: ae.Total - e.Total})
	}
	return e, nil
}

// publishedGB returns the model's published minimum when w (resolved) is
// the model's typical workload, else 0: a published figure refers to one
// workload, and a changed dtype, batch or task voids it.
func publishedGB(w Workload) float64 {
	if w.Model == "" {
		return 0
	}
	m, ok := FindModel(w.Model)
	if !ok || m.PublishedGB <= 0 {
		return 0
	}
	if t, _, _, err := resolve(m.TypicalWorkload()); err != nil || t != w {
		return 0
	}
	return m.PublishedGB
}

// arch is the architecture the activation formulas use.
type arch struct {
	kind                                    ModelKind
	layers, hidden, heads, kvHeads, headDim int
	vocab                                   int
	flash                                   bool
	trainActPerSample, inferActPerSample    int64
	name                                    string
	guessed                                 bool
	context                                 int
}

func resolve(w Workload) (Workload, arch, int64, error) {
	var a arch
	var params int64
	switch {
	case w.Model != "" && w.Params != 0:
		return w, a, 0, suanli.FieldErrorf("params", "give a model name or a parameter count, not both")
	case w.Model != "":
		m, ok := FindModel(w.Model)
		if !ok {
			return w, a, 0, suanli.FieldErrorf("model", "unknown model %q: pick one of `suanli advise vram --list`%s, or give --params", w.Model, suggestModels(w.Model))
		}
		params = m.Params
		w.Model = m.Name
		a = arch{kind: m.Kind, layers: m.Layers, hidden: m.Hidden, heads: m.Heads, kvHeads: m.KVHeads,
			headDim: m.HeadDim, vocab: m.Vocab, flash: m.FlashAttention, context: m.Context,
			trainActPerSample: m.TrainActPerSample, inferActPerSample: m.InferActPerSample, name: m.Display}
	case w.Params > 0:
		params = w.Params
		a = guessArch(params)
	default:
		return w, a, 0, suanli.FieldErrorf("params", "give a model name or the parameter count (e.g. --params 7B)")
	}
	if a.kvHeads == 0 {
		a.kvHeads = a.heads
	}
	if a.headDim == 0 && a.heads > 0 {
		a.headDim = a.hidden / a.heads
	}
	if w.Dtype == "" {
		w.Dtype = FP16
	}
	if w.Dtype.Bits() == 0 {
		return w, a, 0, suanli.FieldErrorf("dtype", "%q is not a dtype: use fp32, fp16, bf16, int8 or int4", w.Dtype)
	}
	if w.Task == "" {
		w.Task = TaskInfer
	}
	if _, err := ParseTask(string(w.Task)); err != nil {
		return w, a, 0, err
	}
	if w.Batch < 0 || w.Seq < 0 || w.GradAccum < 0 || w.LoRARank < 0 {
		return w, a, 0, suanli.FieldErrorf("batch", "batch, seq, grad-accum and lora rank must not be negative")
	}
	w.Batch = max(w.Batch, 1)
	w.GradAccum = max(w.GradAccum, 1)
	if w.GradAccum > w.Batch {
		return w, a, 0, suanli.FieldErrorf("grad-accum", "%d micro-batches cannot split a batch of %d: use at most --grad-accum %d", w.GradAccum, w.Batch, w.Batch)
	}
	if w.Seq == 0 && isTransformer(a.kind) {
		w.Seq = 2048
		if a.context > 0 && a.context < w.Seq {
			w.Seq = a.context
		}
	}
	if !w.training() {
		w.Optimizer, w.LoRA, w.LoRARank, w.GradAccum, w.Checkpointing = "", false, 0, 1, false
		return w, a, params, nil
	}
	if w.Optimizer == "" {
		w.Optimizer = AdamW
	}
	if _, err := ParseOptimizer(string(w.Optimizer)); err != nil {
		return w, a, 0, err
	}
	if w.LoRA && w.LoRARank == 0 {
		w.LoRARank = 16
	}
	if !w.LoRA {
		w.LoRARank = 0
		if w.Dtype.Bits() < 16 {
			return w, a, 0, suanli.FieldErrorf("dtype", "%s weights cannot be trained directly: add --lora (QLoRA trains adapters on a quantised model) or use bf16", w.Dtype)
		}
	}
	return w, a, params, nil
}

func isTransformer(k ModelKind) bool { return k == KindDecoder || k == KindEncoder }

// guessArch derives a decoder-only transformer shape from a parameter count
// alone: 12·L·h² ≈ params with h/L ≈ 128, the aspect ratio of GPT-3 and
// LLaMA (LLaMA-7B: h 4096, L 32).
func guessArch(params int64) arch {
	h := math.Cbrt(float64(params) * 128 / 12)
	hidden := max(64, int(math.Round(h/64))*64)
	layers := max(1, int(math.Round(float64(hidden)/128)))
	heads := max(1, hidden/128)
	return arch{kind: KindDecoder, layers: layers, hidden: hidden, heads: heads, kvHeads: heads,
		headDim: hidden / heads, vocab: 32000, flash: true, guessed: true}
}

func estimate(w Workload) (*Estimate, arch, error) {
	w, a, p, err := resolve(w)
	if err != nil {
		return nil, a, err
	}
	e := &Estimate{Workload: w, Params: p, ModelName: a.name}
	if e.ModelName == "" {
		e.ModelName = "custom model"
	}
	note := func(format string, args ...any) { e.Assumptions = append(e.Assumptions, fmt.Sprintf(format, args...)) }
	if a.guessed {
		note("architecture guessed from the parameter count: decoder-only transformer, %d layers, hidden size %d", a.layers, a.hidden)
	}
	P := float64(p)
	bits := float64(w.Dtype.Bits())
	mb := w.MicroBatch()
	// Activation scale relative to 16-bit: fp32 activations take twice the
	// bytes; quantised weights still compute in 16 bits.
	actScale := 1.0
	if w.Dtype == FP32 {
		actScale = 2
	}
	switch {
	case !w.training():
		e.Weights = round(P * bits / 8)
		note("inference: %s weights (%g bytes per parameter), no gradients or optimizer states", w.Dtype, bits/8)
		if w.Dtype.Bits() < 16 {
			note("quantised weights counted at exactly %d bits; scales and unquantised embeddings fall within the overhead", w.Dtype.Bits())
		}
	case w.LoRA:
		e.Weights = round(P * bits / 8)
		t := loraParams(a, p, w.LoRARank)
		e.Trainable = t
		e.Weights += 4 * t
		e.Gradients = 4 * t
		e.OptimizerStates = optimizerBytes(w.Optimizer) * t
		kind := "LoRA"
		if w.Dtype.Bits() < 16 {
			kind = "QLoRA"
		}
		note("%s: frozen %s base weights; rank-%d adapters on q,k,v,o (%s trainable parameters) kept in fp32 with their gradients and %s states", kind, w.Dtype, w.LoRARank, FormatParams(t), w.Optimizer)
	case w.Dtype == FP32:
		e.Trainable = p
		e.Weights, e.Gradients = round(4*P), round(4*P)
		e.OptimizerStates = round(float64(optimizerBytes(w.Optimizer)) * P)
		note("full-precision training: fp32 weights and gradients (4+4 bytes per parameter), %s states %d bytes per parameter", w.Optimizer, optimizerBytes(w.Optimizer))
	default:
		e.Trainable = p
		e.Weights, e.Gradients = round(2*P), round(2*P)
		e.OptimizerStates = round(float64(4+optimizerBytes(w.Optimizer)) * P)
		note("mixed precision: %s weights and gradients (2+2 bytes per parameter), fp32 master weights and %s states (%d bytes per parameter), as in the ZeRO paper's accounting", w.Dtype, w.Optimizer, 4+optimizerBytes(w.Optimizer))
	}

	b, s := float64(mb), float64(w.Seq)
	switch {
	case isTransformer(a.kind):
		h, L := float64(a.hidden), float64(a.layers)
		// Korthikanti et al. 2022 (arXiv:2205.05198, eq. 1): bytes of
		// activations per layer with 16-bit values, no tensor parallelism:
		// s·b·h·(34 + 5·a·s/h). Memory-efficient attention does not keep
		// the a·s² attention scores.
		layer := s * b * h * 34
		if !a.flash {
			layer += 5 * float64(a.heads) * s * s * b
		}
		layer *= actScale
		if w.training() {
			if w.Checkpointing {
				e.Activations = round(L*2*s*b*h*actScale + layer)
				note("activation checkpointing: each layer keeps its input (2·s·b·h bytes), one layer is recomputed at a time")
			} else {
				e.Activations = round(L * layer)
			}
			formula := "s·b·h·34 (memory-efficient attention)"
			if !a.flash {
				formula = "s·b·h·(34 + 5·a·s/h)"
			}
			if w.Dtype == FP32 {
				formula += ", doubled for fp32"
			}
			note("activations per Korthikanti et al. 2022: %s bytes per layer at 16 bits, micro-batch %d, sequence %d", formula, mb, w.Seq)
			if a.kind == KindDecoder && a.vocab > 0 {
				e.Activations += round(b * s * float64(a.vocab) * 4 * 2)
				note("output logits over a %d-token vocabulary in fp32, with their gradient", a.vocab)
			}
		} else {
			e.Activations = round(layer)
			note("inference keeps one layer's activations at a time (micro-batch %d, sequence %d)", mb, w.Seq)
			if a.kind == KindDecoder {
				kvBytes := 2.0
				if w.Dtype == FP32 {
					kvBytes = 4
				}
				e.KVCache = round(2 * L * b * s * float64(a.kvHeads) * float64(a.headDim) * kvBytes)
				note("KV cache: 2 × %d layers × %d KV heads × %d head size × %d tokens × batch %d at %g bytes", a.layers, a.kvHeads, a.headDim, w.Seq, mb, kvBytes)
				if a.vocab > 0 {
					e.Activations += round(b * float64(a.vocab) * 4)
				}
			}
		}
	default:
		scale := actScale / 2 // the table's per-sample figures are fp32
		per := a.inferActPerSample
		if w.training() {
			per = a.trainActPerSample
		}
		samples := b
		if a.kind == KindDiffusion && !w.training() {
			samples *= 2
			note("classifier-free guidance runs each image twice (conditional and unconditional)")
		}
		act := float64(per) * scale * samples
		if w.training() && w.Checkpointing {
			act /= 3
			note("activation checkpointing taken as keeping about a third of the activations")
		}
		e.Activations = round(act)
		note("activations: %.0f MiB per sample at fp32 from the model table, ×%g for %s, %g samples at once", float64(per)/(1<<20), scale, w.Dtype, samples)
	}

	tensors := e.Weights + e.Gradients + e.OptimizerStates + e.Activations + e.KVCache
	e.Overhead = CUDAContextBytes + tensors*FragmentationBP/10000
	note("overhead: %d MiB CUDA context and workspaces + %d%% allocator fragmentation", CUDAContextBytes>>20, FragmentationBP/100)
	e.Total = tensors + e.Overhead
	if w.GradAccum > 1 {
		note("gradient accumulation: %d micro-batches of %d make the batch of %d; only one micro-batch's activations are held", w.GradAccum, mb, w.Batch)
	}
	return e, a, nil
}

func round(f float64) int64 { return int64(math.Round(f)) }

// optimizerBytes is the optimizer state per trainable parameter in fp32:
// Adam/AdamW keep two moments (8 bytes), SGD with momentum one (4 bytes).
func optimizerBytes(o Optimizer) int64 {
	if o == SGD {
		return 4
	}
	return 8
}

// loraParams counts rank-r adapters (A: h×r, B: r×h) on the four attention
// projections of every layer; without an architecture, 0.5% of the model.
func loraParams(a arch, params int64, r int) int64 {
	if a.layers > 0 && a.hidden > 0 {
		return int64(a.layers) * 4 * 2 * int64(a.hidden) * int64(r)
	}
	return params / 200
}

type alt struct {
	change string
	w      Workload
}

// alternatives lists the changes worth showing for w: the other side of
// mixed precision, gradient accumulation, checkpointing, LoRA/QLoRA (for
// transformers) for training; quantisation for inference.
func alternatives(w Workload, transformer bool) []alt {
	var out []alt
	with := func(change string, f func(*Workload)) {
		c := w
		f(&c)
		out = append(out, alt{change, c})
	}
	if !w.training() {
		if w.Dtype.Bits() > 8 {
			with("int8 weights", func(c *Workload) { c.Dtype = INT8 })
		}
		if w.Dtype.Bits() > 4 {
			with("int4 weights", func(c *Workload) { c.Dtype = INT4 })
		}
		if w.Dtype == FP32 {
			with("fp16 weights", func(c *Workload) { c.Dtype = FP16 })
		}
		return out
	}
	if w.Dtype == FP32 {
		with("bf16 mixed precision", func(c *Workload) { c.Dtype = BF16 })
	} else if w.Dtype.Bits() == 16 {
		with("fp32, no mixed precision", func(c *Workload) { c.Dtype = FP32 })
	}
	if w.MicroBatch() > 1 {
		with(fmt.Sprintf("gradient accumulation over %d micro-batches of 1 (same batch of %d)", w.Batch, w.Batch), func(c *Workload) { c.GradAccum = c.Batch })
	}
	if !w.Checkpointing {
		with("activation checkpointing", func(c *Workload) { c.Checkpointing = true })
	}
	if !w.LoRA && transformer {
		with("LoRA rank 16 (bf16 base)", func(c *Workload) {
			c.LoRA, c.LoRARank = true, 16
			if c.Dtype == FP32 {
				c.Dtype = BF16
			}
		})
	}
	if w.Dtype.Bits() >= 16 && transformer {
		with("QLoRA (int4 base, LoRA rank 16)", func(c *Workload) { c.LoRA, c.LoRARank, c.Dtype = true, 16, INT4 })
	}
	if w.Optimizer != SGD && !w.LoRA {
		with("SGD with momentum instead of "+string(w.Optimizer), func(c *Workload) { c.Optimizer = SGD })
	}
	return out
}

// Required is the GPU memory to plan for, in bytes: the estimate's Total,
// or the published minimum when there is one and it is larger.
func (e *Estimate) Required() int64 {
	return max(e.Total, int64(math.Ceil(e.PublishedGB*GiB)))
}

// MinGPUGiB is the smallest whole number of GiB that holds Required.
func (e *Estimate) MinGPUGiB() int { return int((e.Required() + GiB - 1) / GiB) }

// CardSizesGiB are common GPU memory sizes, smallest first (RTX 3060 12,
// RTX 4090 24, L40S 48, H100 80, H100 NVL 94, H200 141, B200 180, MI300X 192).
var CardSizesGiB = []int{4, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 80, 94, 141, 180, 192}

// SmallestCard returns the smallest common card size that holds Required
// (the estimate, or the published minimum when larger) on one GPU, and 0
// when none does (the model must be split over GPUs).
func (e *Estimate) SmallestCard() int {
	need := e.Required()
	for _, c := range CardSizesGiB {
		if int64(c)*GiB >= need {
			return c
		}
	}
	return 0
}

// CardShortfallBP is how far, in basis points, the memory a driver reports
// may fall short of the size a card is sold as: an RTX 4090 reports 24,564
// MiB (23.99 GB), an "80 GB" H100 81,559 MiB (79.6), a 16 GB V100 16,160 MiB
// (15.78). A published minimum is a card size, so the search floor for it
// is the size less this shortfall: below it, but above any smaller card.
const CardShortfallBP = 200

// SearchQuery is the offer query (DESIGN §5) for machines that hold the
// estimate: one GPU with enough memory, or, past the largest card, enough
// memory over all the offer's GPUs (model split by tensor or pipeline
// parallelism, which the estimate does not include).
//
// The floor is in GB to one decimal, rounded up: offers report memory as the
// driver does (an "80 GB" H100 shows 79.6), so a whole-number floor would
// drop cards that fit. With a published minimum (PublishedGB), the floor is
// at least that card size as drivers report it (less CardShortfallBP),
// which admits the published card and no smaller one.
func (e *Estimate) SearchQuery() string {
	tenths := (e.Total*10 + GiB - 1) / GiB
	if e.PublishedGB > 0 {
		tenths = max(tenths, int64(math.Ceil(e.PublishedGB*10*(10000-CardShortfallBP)/10000)))
	}
	n := fmt.Sprintf("%d.%d", tenths/10, tenths%10)
	if e.SmallestCard() == 0 {
		return "gpu_total_ram>=" + n
	}
	return "gpu_ram>=" + n
}
