package advisor

import (
	"sort"
	"strings"
)

// ModelKind says which activation formula applies to a model.
type ModelKind string

// The model kinds.
const (
	KindDecoder   ModelKind = "decoder"   // decoder-only transformer (LLMs): KV cache at inference, vocabulary logits
	KindEncoder   ModelKind = "encoder"   // encoder-only transformer (BERT)
	KindCNN       ModelKind = "cnn"       // convolutional network: per-sample activation figure
	KindDiffusion ModelKind = "diffusion" // latent diffusion (UNet + text encoder + VAE): per-sample figure, guidance doubles it
	KindSpeech    ModelKind = "speech"    // encoder-decoder speech model (Whisper): per-sample figure
)

// Model is one row of the built-in model table: the parameter count, the
// architecture the activation formulas need, and where the numbers come
// from. Transformers carry their shape (Layers, Hidden, Heads, KVHeads,
// HeadDim, Vocab); other kinds carry measured-or-derived activation bytes per
// sample at fp32. Typical and PublishedGB, when set, are a published
// minimum-VRAM figure and the workload it refers to.
type Model struct {
	Name              string    `json:"name"` // lookup key, lower-case: "llama-3.1-8b"
	Display           string    `json:"display"`
	Aliases           []string  `json:"aliases,omitempty"`
	Kind              ModelKind `json:"kind"`
	Params            int64     `json:"params"`
	ActiveParams      int64     `json:"active_params,omitempty"` // mixture of experts: per token (all experts stay in memory)
	Layers            int       `json:"layers,omitempty"`
	Hidden            int       `json:"hidden,omitempty"`
	Heads             int       `json:"heads,omitempty"`
	KVHeads           int       `json:"kv_heads,omitempty"` // grouped-query attention; 0 = Heads
	HeadDim           int       `json:"head_dim,omitempty"` // 0 = Hidden/Heads
	Vocab             int       `json:"vocab,omitempty"`
	Context           int       `json:"context,omitempty"`         // longest sequence the model takes
	FlashAttention    bool      `json:"flash_attention,omitempty"` // its usual runtime does not store attention scores
	TrainActPerSample int64     `json:"train_act_per_sample,omitempty"`
	InferActPerSample int64     `json:"infer_act_per_sample,omitempty"`
	Typical           Workload  `json:"typical"`
	PublishedGB       float64   `json:"published_gb,omitempty"`
	Source            string    `json:"source"`
}

// TypicalWorkload returns the model's typical workload, with Model set.
func (m *Model) TypicalWorkload() Workload {
	w := m.Typical
	w.Model = m.Name
	return w
}

const mib = 1 << 20

// models is the table. Parameter counts are the exact totals of the
// published checkpoints (Hugging Face config and safetensors index) where
// those exist.
var models = []Model{
	{
		Name: "resnet50", Display: "ResNet-50", Aliases: []string{"resnet-50"}, Kind: KindCNN,
		Params: 25_557_032, TrainActPerSample: 115_000_000, InferActPerSample: 12 * mib,
		Typical: Workload{Task: TaskTrain, Dtype: FP32, Batch: 32, Optimizer: SGD}, PublishedGB: 8,
		Source: "He et al. 2015, arXiv:1512.03385 Table 1; 25,557,032 parameters per torchvision " +
			"(pytorch.org/vision/stable/models/generated/torchvision.models.resnet50.html). Activations: " +
			"≈29M stored fp32 values per 224×224 image (conv, batch-norm and ReLU outputs of the 53 conv layers), ≈115 MB. " +
			"8 GB: the minimum in Suanli issue 10 for training at batch 32 in fp32",
	},
	{
		Name: "bert-base", Display: "BERT-base", Aliases: []string{"bert-base-uncased", "bert-base-cased", "bert"}, Kind: KindEncoder,
		Params: 109_482_240, Layers: 12, Hidden: 768, Heads: 12, Vocab: 30522, Context: 512,
		Typical: Workload{Task: TaskFinetune, Dtype: FP32, Batch: 32, Seq: 256, Optimizer: AdamW}, PublishedGB: 16,
		Source: "Devlin et al. 2018, arXiv:1810.04805 §3 (L=12, H=768, A=12, 110M); 109,482,240 parameters in " +
			"huggingface.co/google-bert/bert-base-uncased. 16 GB: the minimum in Suanli issue 10 for fine-tuning " +
			"(fp32, AdamW, batch 32, sequence 256)",
	},
	{
		Name: "bert-large", Display: "BERT-large", Aliases: []string{"bert-large-uncased"}, Kind: KindEncoder,
		Params: 335_141_888, Layers: 24, Hidden: 1024, Heads: 16, Vocab: 30522, Context: 512,
		Typical: Workload{Task: TaskFinetune, Dtype: FP32, Batch: 12, Seq: 384, Optimizer: AdamW},
		Source:  "Devlin et al. 2018, arXiv:1810.04805 §3 (L=24, H=1024, A=16, 340M); huggingface.co/google-bert/bert-large-uncased",
	},
	{
		Name: "gpt2-xl", Display: "GPT-2 XL (1.5B)", Aliases: []string{"gpt2-1.5b", "gpt-2-xl"}, Kind: KindDecoder,
		Params: 1_557_611_200, Layers: 48, Hidden: 1600, Heads: 25, Vocab: 50257, Context: 1024,
		Typical: Workload{Task: TaskTrain, Dtype: FP16, Batch: 8, Seq: 1024, Optimizer: Adam},
		Source:  "Radford et al. 2019 (GPT-2) Table 2; huggingface.co/openai-community/gpt2-xl config (n_layer 48, n_embd 1600, n_head 25)",
	},
	{
		Name: "sd-1.4", Display: "Stable Diffusion 1.4", Aliases: []string{"stable-diffusion-1.4", "sd14", "stable-diffusion-v1-4", "sd-1.5", "stable-diffusion-1.5"},
		Kind: KindDiffusion, Params: 1_066_000_000, TrainActPerSample: 5 * GiB, InferActPerSample: 1229 * mib,
		Typical: Workload{Task: TaskInfer, Dtype: FP32, Batch: 1}, PublishedGB: 10,
		Source: "huggingface.co/CompVis/stable-diffusion-v1-4 model card (860M UNet, 123M CLIP ViT-L/14 text encoder) + 84M VAE, ≈1.07B in all. " +
			"Activations: 512×512 image, 64×64 latent, 8-head self-attention over 4096 tokens keeps 2 × 4096² × 8 fp32 scores (≈1 GiB) per UNet pass. " +
			"10 GB: Stability AI launch announcement (stability.ai/news/stable-diffusion-announcement, Aug 2022) \"runs on under 10 GB of VRAM\", and Suanli issue 10",
	},
	{
		Name: "sdxl", Display: "Stable Diffusion XL 1.0", Aliases: []string{"sdxl-1.0", "stable-diffusion-xl"}, Kind: KindDiffusion,
		Params: 3_468_000_000, TrainActPerSample: 12 * GiB, InferActPerSample: 2 * GiB,
		Typical: Workload{Task: TaskInfer, Dtype: FP16, Batch: 1},
		Source: "Podell et al. 2023, arXiv:2307.01952 Table 1 (2.6B UNet) + CLIP ViT-L (123M) and OpenCLIP ViT-bigG (695M) text encoders + 84M VAE. " +
			"Activations: 1024×1024 image, attention at the 64×64 and 32×32 latent levels only, ≈2 GiB per pass at fp32 (estimate)",
	},
	{
		Name: "whisper-large-v3", Display: "Whisper large-v3", Aliases: []string{"whisper-large", "whisper"}, Kind: KindSpeech,
		Params: 1_543_490_560, Layers: 32, Hidden: 1280, Heads: 20, Vocab: 51866, Context: 448,
		TrainActPerSample: 4 * GiB, InferActPerSample: 1 * GiB,
		Typical: Workload{Task: TaskInfer, Dtype: FP32, Batch: 1}, PublishedGB: 10,
		Source: "Radford et al. 2022, arXiv:2212.04356 Table 1 (large: 32 layers, width 1280, 20 heads, 1550M). " +
			"10 GB: github.com/openai/whisper README, table of models, \"Required VRAM ~10 GB\" for large; the reference code keeps fp32 weights " +
			"(its Linear casts them per call). Activations: beam search 5, cross-attention keys/values over 1500 audio frames ≈1 GiB",
	},
	{
		Name: "llama-7b", Display: "LLaMA-7B", Aliases: []string{"llama-1-7b", "llama7b"}, Kind: KindDecoder,
		Params: 6_738_415_616, Layers: 32, Hidden: 4096, Heads: 32, Vocab: 32000, Context: 2048, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: FP16, Batch: 1, Seq: 2048}, PublishedGB: 24,
		Source: "Touvron et al. 2023, arXiv:2302.13971 Table 2 (dim 4096, 32 heads, 32 layers, 6.7B). 24 GB: the minimum in Suanli issue 10 " +
			"for fp16 inference with the full 2048-token context (the estimate fills a 16 GB card with no headroom)",
	},
	{
		Name: "llama-2-7b", Display: "Llama 2 7B", Aliases: []string{"llama2-7b"}, Kind: KindDecoder,
		Params: 6_738_415_616, Layers: 32, Hidden: 4096, Heads: 32, Vocab: 32000, Context: 4096, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: FP16, Batch: 1, Seq: 4096},
		Source:  "Touvron et al. 2023, arXiv:2307.09288 Table 1; huggingface.co/meta-llama/Llama-2-7b-hf config",
	},
	{
		Name: "llama-2-13b", Display: "Llama 2 13B", Aliases: []string{"llama2-13b"}, Kind: KindDecoder,
		Params: 13_015_864_320, Layers: 40, Hidden: 5120, Heads: 40, Vocab: 32000, Context: 4096, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: FP16, Batch: 1, Seq: 4096},
		Source:  "Touvron et al. 2023, arXiv:2307.09288 Table 1; huggingface.co/meta-llama/Llama-2-13b-hf config",
	},
	{
		Name: "llama-2-70b", Display: "Llama 2 70B", Aliases: []string{"llama2-70b"}, Kind: KindDecoder,
		Params: 68_976_648_192, Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, Vocab: 32000, Context: 4096, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: FP16, Batch: 1, Seq: 4096},
		Source:  "Touvron et al. 2023, arXiv:2307.09288 Table 1 (GQA); huggingface.co/meta-llama/Llama-2-70b-hf config",
	},
	{
		Name: "llama-3.1-8b", Display: "Llama 3.1 8B", Aliases: []string{"llama3.1-8b", "llama-3-8b", "llama3-8b", "meta-llama-3.1-8b"}, Kind: KindDecoder,
		Params: 8_030_261_248, Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 128256, Context: 131072, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: BF16, Batch: 1, Seq: 8192},
		Source: "huggingface.co/meta-llama/Llama-3.1-8B config.json (32 layers, hidden 4096, 32 heads, 8 KV heads, vocab 128256); " +
			"memory figures: huggingface.co/blog/llama31 \"Inference Memory Requirements\" (16 GB fp16, 8 GB fp8, 4 GB int4; KV cache 0.125 GB per 1k tokens)",
	},
	{
		Name: "llama-3.1-70b", Display: "Llama 3.1 70B", Aliases: []string{"llama3.1-70b", "llama-3-70b", "llama3-70b", "llama-3.3-70b"}, Kind: KindDecoder,
		Params: 70_553_706_496, Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, Vocab: 128256, Context: 131072, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: BF16, Batch: 1, Seq: 8192},
		Source: "huggingface.co/meta-llama/Llama-3.1-70B config.json (80 layers, hidden 8192, 64 heads, 8 KV heads); " +
			"huggingface.co/blog/llama31 \"Inference Memory Requirements\" (140 GB fp16, 70 GB fp8, 35 GB int4; KV cache 39.06 GB at 128k tokens)",
	},
	{
		Name: "llama-3.1-405b", Display: "Llama 3.1 405B", Aliases: []string{"llama3.1-405b"}, Kind: KindDecoder,
		Params: 405_853_388_800, Layers: 126, Hidden: 16384, Heads: 128, KVHeads: 8, HeadDim: 128, Vocab: 128256, Context: 131072, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: INT8, Batch: 1, Seq: 8192},
		Source:  "huggingface.co/meta-llama/Llama-3.1-405B config.json; huggingface.co/blog/llama31 (810 GB fp16, 405 GB fp8, 203 GB int4)",
	},
	{
		Name: "mistral-7b", Display: "Mistral 7B", Aliases: []string{"mistral-7b-v0.1", "mistral-7b-instruct", "mistral"}, Kind: KindDecoder,
		Params: 7_241_732_096, Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 32000, Context: 32768, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: BF16, Batch: 1, Seq: 8192},
		Source:  "Jiang et al. 2023, arXiv:2310.06825 Table 1 (dim 4096, 32 layers, 32 heads, 8 KV heads, head 128); huggingface.co/mistralai/Mistral-7B-v0.1",
	},
	{
		Name: "mixtral-8x7b", Display: "Mixtral 8x7B", Aliases: []string{"mixtral", "mixtral-8x7b-instruct"}, Kind: KindDecoder,
		Params: 46_702_792_704, ActiveParams: 12_900_000_000, Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 32000, Context: 32768, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: BF16, Batch: 1, Seq: 8192},
		Source:  "Jiang et al. 2024, arXiv:2401.04088 §2 (46.7B total, 12.9B active, 8 experts, top-2); huggingface.co/mistralai/Mixtral-8x7B-v0.1 config",
	},
	{
		Name: "qwen2.5-7b", Display: "Qwen2.5 7B", Aliases: []string{"qwen-2.5-7b", "qwen2.5-7b-instruct"}, Kind: KindDecoder,
		Params: 7_615_616_512, Layers: 28, Hidden: 3584, Heads: 28, KVHeads: 4, HeadDim: 128, Vocab: 152064, Context: 131072, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: BF16, Batch: 1, Seq: 8192},
		Source:  "huggingface.co/Qwen/Qwen2.5-7B model card (7.61B, 28 layers, 28 Q / 4 KV heads) and config.json (hidden 3584); Qwen2.5 report arXiv:2412.15115 Table 1",
	},
	{
		Name: "qwen2.5-72b", Display: "Qwen2.5 72B", Aliases: []string{"qwen-2.5-72b", "qwen2.5-72b-instruct"}, Kind: KindDecoder,
		Params: 72_706_203_648, Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, Vocab: 152064, Context: 131072, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: BF16, Batch: 1, Seq: 8192},
		Source:  "huggingface.co/Qwen/Qwen2.5-72B model card (72.7B, 80 layers, 64 Q / 8 KV heads) and config.json; arXiv:2412.15115 Table 1",
	},
	{
		Name: "gemma-2-9b", Display: "Gemma 2 9B", Aliases: []string{"gemma2-9b", "gemma-2-9b-it"}, Kind: KindDecoder,
		Params: 9_241_705_984, Layers: 42, Hidden: 3584, Heads: 16, KVHeads: 8, HeadDim: 256, Vocab: 256000, Context: 8192, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: BF16, Batch: 1, Seq: 8192},
		Source:  "Gemma Team 2024, arXiv:2408.00118 Table 1 (d_model 3584, 42 layers, 16 heads, 8 KV heads, head 256); huggingface.co/google/gemma-2-9b",
	},
	{
		Name: "gemma-2-27b", Display: "Gemma 2 27B", Aliases: []string{"gemma2-27b", "gemma-2-27b-it"}, Kind: KindDecoder,
		Params: 27_227_128_320, Layers: 46, Hidden: 4608, Heads: 32, KVHeads: 16, HeadDim: 128, Vocab: 256000, Context: 8192, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: BF16, Batch: 1, Seq: 8192},
		Source:  "Gemma Team 2024, arXiv:2408.00118 Table 1 (d_model 4608, 46 layers, 32 heads, 16 KV heads); huggingface.co/google/gemma-2-27b",
	},
	{
		Name: "phi-3-mini", Display: "Phi-3 mini (3.8B)", Aliases: []string{"phi3-mini", "phi-3-mini-4k-instruct"}, Kind: KindDecoder,
		Params: 3_821_079_552, Layers: 32, Hidden: 3072, Heads: 32, Vocab: 32064, Context: 4096, FlashAttention: true,
		Typical: Workload{Task: TaskInfer, Dtype: BF16, Batch: 1, Seq: 4096},
		Source:  "Abdin et al. 2024, arXiv:2404.14219 §2 (3.8B, 32 layers, hidden 3072, 32 heads); huggingface.co/microsoft/Phi-3-mini-4k-instruct",
	},
}

var modelIndex = func() map[string]int {
	m := make(map[string]int)
	for i, md := range models {
		m[modelKey(md.Name)] = i
		for _, a := range md.Aliases {
			m[modelKey(a)] = i
		}
	}
	return m
}()

// modelKey folds case, spaces and underscores, and drops an "org/" prefix,
// so that "meta-llama/Llama-3.1-8B" finds llama-3.1-8b.
func modelKey(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	return strings.NewReplacer(" ", "-", "_", "-").Replace(s)
}

// FindModel looks a model up by name or alias, ignoring case, and
// "org/name" prefixes.
func FindModel(name string) (*Model, bool) {
	i, ok := modelIndex[modelKey(name)]
	if !ok {
		return nil, false
	}
	m := models[i]
	return &m, true
}

// Models returns a copy of the model table sorted by name.
func Models() []Model {
	out := append([]Model(nil), models...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// suggestModels returns " (did you mean a, b?)" for names sharing a word
// with s, or "".
func suggestModels(s string) string {
	k := modelKey(s)
	var hits []string
	for _, m := range models {
		for _, part := range strings.FieldsFunc(k, func(r rune) bool { return r == '-' || r == '.' }) {
			if len(part) >= 3 && strings.Contains(m.Name, part) {
				hits = append(hits, m.Name)
				break
			}
		}
	}
	if len(hits) == 0 {
		return ""
	}
	if len(hits) > 5 {
		hits = hits[:5]
	}
	return " (did you mean " + strings.Join(hits, ", ") + "?)"
}
