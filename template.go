package suanli

// Template is a named preset for create: an image with a recommended disk,
// ports and start command. Flags given to create override it.
type Template struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Image       string   `json:"image"`
	DiskGB      int64    `json:"disk_gb"`
	Ports       []int    `json:"ports,omitempty"`
	Cmd         []string `json:"cmd,omitempty"`
	NeedsGPU    bool     `json:"needs_gpu"`
}

// Templates are the built-in presets, tagged to exact versions so a
// template means the same image tomorrow.
var Templates = []Template{
	{Name: "pytorch", Description: "PyTorch 2.5 with CUDA 12.4 and cuDNN 9 (runtime)", Image: "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
		DiskGB: 50, Cmd: []string{"sleep", "infinity"}, NeedsGPU: true},
	{Name: "tensorflow", Description: "TensorFlow 2.18 with GPU support", Image: "tensorflow/tensorflow:2.18.0-gpu",
		DiskGB: 40, Cmd: []string{"sleep", "infinity"}, NeedsGPU: true},
	{Name: "cuda-base", Description: "CUDA 12.6 base on Ubuntu 24.04, for your own stack", Image: "nvidia/cuda:12.6.3-base-ubuntu24.04",
		DiskGB: 20, Cmd: []string{"sleep", "infinity"}, NeedsGPU: true},
	{Name: "jupyter", Description: "Jupyter Lab with PyTorch and CUDA 12 on port 8888", Image: "quay.io/jupyter/pytorch-notebook:cuda12-2024-11-25",
		DiskGB: 50, Ports: []int{8888}, NeedsGPU: true},
	{Name: "vllm", Description: "vLLM 0.6 OpenAI-compatible inference server on port 8000", Image: "vllm/vllm-openai:v0.6.4",
		DiskGB: 100, Ports: []int{8000}, NeedsGPU: true},
	{Name: "ubuntu", Description: "Ubuntu 24.04, CPU or GPU, a clean shell", Image: "ubuntu:24.04", DiskGB: 10, Cmd: []string{"sleep", "infinity"}},
}

// FindTemplate returns the built-in template with that name.
func FindTemplate(name string) (Template, bool) {
	for _, t := range Templates {
		if t.Name == name {
			return t, true
		}
	}
	return Template{}, false
}
