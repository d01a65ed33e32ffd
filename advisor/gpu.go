package advisor

import (
	"regexp"
	"strings"
)

// GPUKey names a GPU model the same way whoever spelled it: nvidia-smi
// ("NVIDIA A100-SXM4-80GB"), a marketplace ("RTX_4090", "H100 SXM") or a
// cloud catalog ("A100-80GB", "RTX6000-Ada"). Family is the chip and board
// line ("H100", "A100", "RTX 4090"); Variant is what changes memory or
// price within it ("SXM", "PCIe", "NVL", "80GB", "40GB", "Ti"), "" when the
// name does not say. The zero value is an unknown GPU.
type GPUKey struct {
	Family  string `json:"family"`
	Variant string `json:"variant,omitempty"`
}

// String returns the canonical name: "H100 SXM", "A100-80GB", "V100-16GB",
// "RTX 4090", "RTX 4070 Ti". Memory variants are joined with "-" as cloud
// catalogs write them; form factors with a space.
func (k GPUKey) String() string {
	switch {
	case k.Variant == "":
		return k.Family
	case strings.HasSuffix(k.Variant, "GB"):
		return k.Family + "-" + k.Variant
	default:
		return k.Family + " " + k.Variant
	}
}

// Match reports whether two GPUs are the same model for a price comparison:
// ok when the families agree and the variants agree or one is unknown;
// exact only when both variants are known and equal (or both empty).
func (k GPUKey) Match(o GPUKey) (ok, exact bool) {
	if k.Family == "" || k.Family != o.Family {
		return false, false
	}
	if k.Variant == o.Variant {
		return true, true
	}
	return k.Variant == "" || o.Variant == "", false
}

var (
	rtxToken = regexp.MustCompile(`^(RTX|GTX)(PRO)?(A?\d{3,4})?([A-Z]*)$`)
	memToken = regexp.MustCompile(`^(\d+)GB$`)
)

// noise words that never distinguish one GPU from another.
var gpuNoise = map[string]bool{
	"NVIDIA": true, "GEFORCE": true, "TESLA": true, "QUADRO": true, "GENERATION": true,
	"GPU": true, "AMD": true, "INSTINCT": true, "TENSOR": true, "CORE": true, "BLACKWELL": true,
}

// NormalizeGPU returns the GPUKey for a GPU name as nvidia-smi, a
// marketplace or a catalog spells it. memGiB is the GPU's memory when known
// (0 otherwise): it tells an A100 40GB from an 80GB, a V100 16GB from a
// 32GB, and an H100 NVL (94 GB) from an SXM or PCIe card when the name does
// not. An empty or unrecognised name gives its cleaned upper-case words as
// Family, so that two spellings of an unknown GPU still match each other.
func NormalizeGPU(name string, memGiB float64) GPUKey {
	toks := gpuTokens(name)
	if len(toks) == 0 {
		return GPUKey{}
	}
	has := func(t ...string) bool {
		for _, x := range toks {
			for _, y := range t {
				if x == y {
					return true
				}
			}
		}
		return false
	}
	hasPrefix := func(p string) bool {
		for _, x := range toks {
			if strings.HasPrefix(x, p) {
				return true
			}
		}
		return false
	}
	mem := 0
	for _, t := range toks {
		if m := memToken.FindStringSubmatch(t); m != nil {
			mem = atoiSmall(m[1])
		}
	}
	if mem == 0 && memGiB > 0 {
		mem = int(memGiB + 0.5)
	}
	for i, t := range toks {
		switch t {
		case "H100":
			v := ""
			switch {
			case has("NVL") || (mem >= 90 && mem <= 100):
				v = "NVL"
			case hasPrefix("SXM") || has("HBM3", "MEGA", "NVLINK"):
				v = "SXM"
			case has("PCIE", "HBM2E"):
				v = "PCIe"
			}
			return GPUKey{"H100", v}
		case "H200":
			if has("NVL") {
				return GPUKey{"H200", "NVL"}
			}
			return GPUKey{"H200", ""}
		case "A100":
			switch {
			case mem >= 60:
				return GPUKey{"A100", "80GB"}
			case mem > 0:
				return GPUKey{"A100", "40GB"}
			}
			return GPUKey{"A100", ""}
		case "V100":
			switch {
			case mem >= 24:
				return GPUKey{"V100", "32GB"}
			case mem > 0:
				return GPUKey{"V100", "16GB"}
			}
			return GPUKey{"V100", ""}
		case "GH200", "GB200", "B200", "B100", "B300", "A10G", "A10", "A30", "A40", "A16", "A2",
			"L4", "L40", "L40S", "T4", "T4G", "P100", "P40", "P4", "K80", "M60",
			"MI300X", "MI325X", "MI250", "MI250X", "MI210", "MI100":
			return GPUKey{t, ""}
		case "TPU":
			if i+1 < len(toks) {
				return GPUKey{"TPU " + strings.ToLower(toks[i+1]), ""}
			}
		}
		if k, ok := rtxKey(toks[i:]); ok {
			return k
		}
	}
	return GPUKey{strings.Join(toks, " "), ""}
}

// rtxKey reads an RTX/GTX name from its tokens: "RTX 4090", "RTX A6000",
// "RTX 6000 Ada", "RTX PRO 6000", "RTX 4070 Ti Super".
func rtxKey(toks []string) (GPUKey, bool) {
	m := rtxToken.FindStringSubmatch(toks[0])
	if m == nil {
		return GPUKey{}, false
	}
	line, pro, num, suffix := m[1], m[2] != "", m[3], m[4]
	rest := toks[1:]
	if num == "" && len(rest) > 0 && rest[0] == "PRO" {
		pro, rest = true, rest[1:]
	}
	if num == "" && len(rest) > 0 {
		if n := rtxToken.FindStringSubmatch("RTX" + rest[0]); n != nil && n[3] != "" {
			num, suffix, rest = n[3], n[4], rest[1:]
		}
	}
	if num == "" {
		return GPUKey{}, false
	}
	words := []string{suffix}
	words = append(words, rest...)
	ada, ti, super := false, false, false
	for _, w := range words {
		switch w {
		case "ADA":
			ada = true
		case "TI":
			ti = true
		case "S", "SUPER":
			super = true
		}
	}
	fam := line + " " + num
	if pro {
		// RTX PRO 6000 (Blackwell): server ("S") and workstation editions
		// share the chip and the 96 GB.
		return GPUKey{line + " PRO " + num, ""}, true
	}
	if ada {
		return GPUKey{fam + " Ada", ""}, true
	}
	var v []string
	if ti {
		v = append(v, "Ti")
	}
	if super {
		v = append(v, "Super")
	}
	return GPUKey{fam, strings.Join(v, " ")}, true
}

// gpuTokens upper-cases name, splits it on spaces and punctuation, and drops
// noise words.
func gpuTokens(name string) []string {
	u := strings.ToUpper(name)
	u = strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', '/', '(', ')', ',', ':', '.':
			return ' '
		}
		return r
	}, u)
	var out []string
	for _, t := range strings.Fields(u) {
		if !gpuNoise[t] {
			out = append(out, t)
		}
	}
	return out
}

func atoiSmall(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' || n > 1_000_000 {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// GPUSpec is what the advisor knows about a GPU model: memory and board
// power. Source says where the figures come from.
type GPUSpec struct {
	Key    GPUKey  `json:"key"`
	MemGiB float64 `json:"mem_gib"` // per GPU
	Watts  int     `json:"watts"`   // board power (TDP/TGP) at full load
	Source string  `json:"source"`
}

const (
	srcNVDatasheet = "NVIDIA product datasheet (nvidia.com), board power / TDP"
	srcNVGeForce   = "NVIDIA GeForce specifications (nvidia.com), total graphics power"
	srcAMD         = "AMD Instinct product page (amd.com), typical board power"
)

// gpuSpecs is the GPU table, keyed by GPUKey.String().
var gpuSpecs = []GPUSpec{
	{GPUKey{"B200", ""}, 180, 1000, srcNVDatasheet + " (HGX B200)"},
	{GPUKey{"GH200", ""}, 96, 900, srcNVDatasheet + " (GH200 module, configurable 450-1000 W)"},
	{GPUKey{"H200", ""}, 141, 700, srcNVDatasheet + " (H200 SXM)"},
	{GPUKey{"H200", "NVL"}, 141, 600, srcNVDatasheet + " (H200 NVL)"},
	{GPUKey{"H100", "SXM"}, 80, 700, srcNVDatasheet},
	{GPUKey{"H100", "PCIe"}, 80, 350, srcNVDatasheet},
	{GPUKey{"H100", "NVL"}, 94, 400, srcNVDatasheet},
	{GPUKey{"H100", ""}, 80, 700, srcNVDatasheet + " (form unknown: SXM assumed)"},
	{GPUKey{"A100", "80GB"}, 80, 400, srcNVDatasheet + " (SXM; PCIe 300 W)"},
	{GPUKey{"A100", "40GB"}, 40, 400, srcNVDatasheet + " (SXM; PCIe 250 W)"},
	{GPUKey{"A100", ""}, 40, 400, srcNVDatasheet},
	{GPUKey{"A40", ""}, 48, 300, srcNVDatasheet},
	{GPUKey{"A30", ""}, 24, 165, srcNVDatasheet},
	{GPUKey{"A10", ""}, 24, 150, srcNVDatasheet},
	{GPUKey{"A10G", ""}, 24, 150, "AWS G5 (A10G, 24 GB); power taken as the A10's 150 W"},
	{GPUKey{"L40S", ""}, 48, 350, srcNVDatasheet},
	{GPUKey{"L40", ""}, 48, 300, srcNVDatasheet},
	{GPUKey{"L4", ""}, 24, 72, srcNVDatasheet},
	{GPUKey{"T4", ""}, 16, 70, srcNVDatasheet},
	{GPUKey{"V100", "32GB"}, 32, 300, srcNVDatasheet + " (SXM2; PCIe 250 W)"},
	{GPUKey{"V100", "16GB"}, 16, 300, srcNVDatasheet + " (SXM2; PCIe 250 W)"},
	{GPUKey{"V100", ""}, 16, 300, srcNVDatasheet},
	{GPUKey{"P100", ""}, 16, 250, srcNVDatasheet},
	{GPUKey{"RTX PRO 6000", ""}, 96, 600, srcNVDatasheet + " (RTX PRO 6000 Blackwell)"},
	{GPUKey{"RTX 6000 Ada", ""}, 48, 300, srcNVDatasheet},
	{GPUKey{"RTX A6000", ""}, 48, 300, srcNVDatasheet},
	{GPUKey{"RTX A5000", ""}, 24, 230, srcNVDatasheet},
	{GPUKey{"RTX A4000", ""}, 16, 140, srcNVDatasheet},
	{GPUKey{"RTX A2000", ""}, 6, 70, srcNVDatasheet + " (12 GB edition exists)"},
	{GPUKey{"RTX 5090", ""}, 32, 575, srcNVGeForce},
	{GPUKey{"RTX 5080", ""}, 16, 360, srcNVGeForce},
	{GPUKey{"RTX 4090", ""}, 24, 450, srcNVGeForce},
	{GPUKey{"RTX 4080", ""}, 16, 320, srcNVGeForce},
	{GPUKey{"RTX 4070", ""}, 12, 200, srcNVGeForce},
	{GPUKey{"RTX 4070", "Ti"}, 12, 285, srcNVGeForce},
	{GPUKey{"RTX 4070", "Ti Super"}, 16, 285, srcNVGeForce},
	{GPUKey{"RTX 4060", ""}, 8, 115, srcNVGeForce},
	{GPUKey{"RTX 4060", "Ti"}, 8, 160, srcNVGeForce + " (16 GB edition exists)"},
	{GPUKey{"RTX 3090", ""}, 24, 350, srcNVGeForce},
	{GPUKey{"RTX 3080", ""}, 10, 320, srcNVGeForce},
	{GPUKey{"RTX 3070", ""}, 8, 220, srcNVGeForce},
	{GPUKey{"RTX 3060", ""}, 12, 170, srcNVGeForce},
	{GPUKey{"RTX 3060", "Ti"}, 8, 200, srcNVGeForce},
	{GPUKey{"MI300X", ""}, 192, 750, srcAMD},
	{GPUKey{"MI250X", ""}, 128, 560, srcAMD},
}

var gpuSpecIndex = func() map[GPUKey]GPUSpec {
	m := make(map[GPUKey]GPUSpec, len(gpuSpecs))
	for _, s := range gpuSpecs {
		m[s.Key] = s
	}
	return m
}()

// LookupGPU returns the spec for k, falling back to the family with an
// unknown variant, then to any variant of the family. ok is false for a GPU
// the table does not know.
func LookupGPU(k GPUKey) (GPUSpec, bool) {
	if s, ok := gpuSpecIndex[k]; ok {
		return s, true
	}
	if s, ok := gpuSpecIndex[GPUKey{k.Family, ""}]; ok {
		return s, true
	}
	for _, s := range gpuSpecs {
		if s.Key.Family == k.Family {
			return s, true
		}
	}
	return GPUSpec{}, false
}

// GPUSpecs returns a copy of the GPU table.
func GPUSpecs() []GPUSpec { return append([]GPUSpec(nil), gpuSpecs...) }
