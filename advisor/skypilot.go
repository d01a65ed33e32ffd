package advisor

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/suanli/suanli"
)

// Skip is a catalog row the importer left out, and why. Line is the CSV
// line the record starts on (the header is line 1).
type Skip struct {
	Line         int    `json:"line"`
	InstanceType string `json:"instance_type,omitempty"`
	Reason       string `json:"reason"`
}

// SkyPilotSource is the Source of imported rows.
const SkyPilotSource = "SkyPilot catalog v8 (github.com/skypilot-org/skypilot-catalog)"

// skyPilotRequired are the columns without which no row can be priced.
var skyPilotRequired = []string{"InstanceType", "Price", "Region"}

// ImportSkyPilot reads a SkyPilot v8 catalog CSV (catalogs/v8/CLOUD/vms.csv)
// into catalog rows for provider. Columns are found by header name, since
// their order differs between clouds; InstanceType, Price and Region are
// required, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, GpuInfo and
// SpotPrice are read when present. GpuInfo is a Python-literal dict
// ({'Gpus': [{'Name': 'H200', 'Count': 1, 'MemoryInfo': {'SizeInMiB':
// 143771}}], 'TotalGpuMemoryInMiB': 143771}); a SpotPrice of 0 means none;
// a Region "Place, CC, Continent" (or ", CC, Continent") gives the country.
//
// Rows without an accelerator (CPU instances), without a positive price, or
// with a malformed field are skipped, each with its line and reason; err is
// only for input that is not a catalog at all (unreadable, no header, a
// required column missing). Rows keep AsOf empty: the caller knows when
// the file was fetched.
func ImportSkyPilot(r io.Reader, provider string) (rows []CatalogRow, skipped []Skip, err error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err == io.EOF {
		return nil, nil, suanli.Errorf(suanli.EINVALID, "empty file: a SkyPilot catalog starts with a header line (InstanceType,AcceleratorName,...)")
	}
	if err != nil {
		return nil, nil, suanli.Errorf(suanli.EINVALID, "reading the header: %v", err)
	}
	col := make(map[string]int, len(header))
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if _, dup := col[h]; !dup {
			col[h] = i
		}
	}
	var missing []string
	for _, h := range skyPilotRequired {
		if _, ok := col[h]; !ok {
			missing = append(missing, h)
		}
	}
	if len(missing) > 0 {
		return nil, nil, suanli.Errorf(suanli.EINVALID, "not a SkyPilot vms catalog: no %s column (header: %s)",
			strings.Join(missing, ", "), clip(strings.Join(header, ","), 120))
	}
	provider = strings.ToLower(strings.TrimSpace(provider))
	for {
		rec, rerr := cr.Read()
		if rerr == io.EOF {
			break
		}
		var pe *csv.ParseError
		if errors.As(rerr, &pe) {
			skipped = append(skipped, Skip{Line: pe.StartLine, Reason: "malformed CSV: " + pe.Err.Error()})
			continue
		}
		if rerr != nil {
			return rows, skipped, fmt.Errorf("reading the catalog: %w", rerr)
		}
		line, _ := cr.FieldPos(0)
		row, reason := skyPilotRow(rec, col, provider)
		if reason != "" {
			skipped = append(skipped, Skip{Line: line, InstanceType: row.InstanceType, Reason: reason})
			continue
		}
		rows = append(rows, row)
	}
	return rows, skipped, nil
}

// skyPilotRow converts one record; a non-empty reason means skip it.
func skyPilotRow(rec []string, col map[string]int, provider string) (CatalogRow, string) {
	get := func(name string) string {
		i, ok := col[name]
		if !ok || i >= len(rec) {
			return ""
		}
		s := strings.TrimSpace(rec[i])
		if !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		return s
	}
	row := CatalogRow{Provider: provider, InstanceType: clip(get("InstanceType"), 200), Source: SkyPilotSource}
	for _, h := range skyPilotRequired {
		if col[h] >= len(rec) {
			return row, fmt.Sprintf("%d fields, too few for the %s column", len(rec), h)
		}
	}
	if row.InstanceType == "" {
		return row, "no InstanceType"
	}
	row.Accelerator = clip(get("AcceleratorName"), 100)
	if row.Accelerator == "" {
		return row, "no accelerator (a CPU-only instance)"
	}
	price := get("Price")
	if price == "" {
		return row, "no on-demand Price"
	}
	var ok bool
	if row.Price, ok = parseCatalogMoney(price); !ok {
		return row, fmt.Sprintf("Price %q is not an amount", clip(price, 40))
	}
	if row.Price <= 0 {
		return row, "Price is 0: not sold on demand"
	}
	if row.Price > MaxHourly {
		return row, fmt.Sprintf("Price %s an hour is implausible (over %s)", row.Price, MaxHourly)
	}
	if spot := get("SpotPrice"); spot != "" {
		if row.SpotPrice, ok = parseCatalogMoney(spot); !ok {
			return row, fmt.Sprintf("SpotPrice %q is not an amount", clip(spot, 40))
		}
	}
	row.GPUCount = 1
	if c := get("AcceleratorCount"); c != "" {
		n, err := strconv.ParseFloat(c, 64)
		if err != nil || math.IsNaN(n) || n <= 0 || n > 1024 {
			return row, fmt.Sprintf("AcceleratorCount %q is not a count of GPUs", clip(c, 40))
		}
		row.GPUCount = n
	}
	for _, f := range []struct {
		name string
		dst  *float64
	}{{"vCPUs", &row.VCPUs}, {"MemoryGiB", &row.MemoryGiB}} {
		if s := get(f.name); s != "" {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return row, fmt.Sprintf("%s %q is not a number", f.name, clip(s, 40))
			}
			*f.dst = v
		}
	}
	if gi := get("GpuInfo"); gi != "" {
		mib, err := gpuInfoMemMiB(gi, row.GPUCount)
		if err != nil {
			return row, "GpuInfo: " + err.Error()
		}
		row.GPUMemGiB = math.Round(mib/1024*10) / 10
	}
	row.Region = clip(get("Region"), 200)
	row.Country = regionCountry(row.Region)
	key := NormalizeGPU(row.Accelerator, row.GPUMemGiB)
	if key.Variant == "" {
		// The instance type often says what the accelerator name does not:
		// Vast's "1x-H100_NVL-32-65536" for AcceleratorName "H100".
		if k2 := NormalizeGPU(row.InstanceType, row.GPUMemGiB); k2.Family == key.Family {
			key.Variant = k2.Variant
		}
	}
	row.GPU = key.String()
	return row, ""
}

// gpuInfoMemMiB reads the memory per GPU from a GpuInfo literal: the total
// over the instance divided by the accelerator count or, without a total,
// the first GPU entry's size (clouds differ on whether that entry is per
// GPU or per instance; every v8 cloud writes the total).
func gpuInfoMemMiB(s string, count float64) (float64, error) {
	v, err := parsePyLiteral(s)
	if err != nil {
		return 0, err
	}
	d, ok := v.(map[string]any)
	if !ok {
		return 0, errors.New("not a dict")
	}
	if t, ok := d["TotalGpuMemoryInMiB"].(float64); ok && t > 0 && count > 0 {
		return t / count, nil
	}
	if gs, ok := d["Gpus"].([]any); ok && len(gs) > 0 {
		if g, ok := gs[0].(map[string]any); ok {
			if mi, ok := g["MemoryInfo"].(map[string]any); ok {
				if size, ok := mi["SizeInMiB"].(float64); ok && size > 0 {
					return size, nil
				}
			}
		}
	}
	return 0, nil
}

// parseCatalogMoney reads a catalog price exactly ("2.65", "0.00",
// "3.6732599999999997", "1e-05"), rounding beyond six decimals half up to
// the micro-unit. ok is false for anything else, negatives included.
func parseCatalogMoney(s string) (suanli.Money, bool) {
	if len(s) > 40 {
		return 0, false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(s[i+1:])
		if err != nil || exp < -30 || exp > 30 {
			return 0, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() < 0 || strings.ContainsAny(s, "/xXpP_") {
		return 0, false
	}
	r.Mul(r, big.NewRat(1_000_000, 1))
	// round half up: floor(r + 1/2)
	r.Add(r, big.NewRat(1, 2))
	q := new(big.Int).Quo(r.Num(), r.Denom())
	if !q.IsInt64() {
		return 0, false
	}
	return suanli.Money(q.Int64()), true
}

// regionCountry returns the ISO country of a catalog region: the code in
// "Place, CC, Continent", or the country of a known cloud region name.
func regionCountry(region string) string {
	if cc := countryFromRegion(region); cc != "" {
		return cc
	}
	r := strings.ToLower(region)
	if cc, ok := cloudRegions[r]; ok {
		return cc
	}
	for _, p := range []struct{ prefix, cc string }{
		{"us-", "US"}, {"eastus", "US"}, {"westus", "US"}, {"centralus", "US"}, {"northcentralus", "US"}, {"southcentralus", "US"},
		{"ca-", "CA"}, {"northamerica-northeast", "CA"}, {"sa-east", "BR"}, {"southamerica-east", "BR"},
	} {
		if strings.HasPrefix(r, p.prefix) {
			return p.cc
		}
	}
	return ""
}

// cloudRegions maps the major cloud region names to their countries.
var cloudRegions = map[string]string{
	// AWS
	"eu-west-1": "IE", "eu-west-2": "GB", "eu-west-3": "FR", "eu-central-1": "DE", "eu-central-2": "CH",
	"eu-north-1": "SE", "eu-south-1": "IT", "eu-south-2": "ES", "ap-northeast-1": "JP", "ap-northeast-2": "KR",
	"ap-northeast-3": "JP", "ap-southeast-1": "SG", "ap-southeast-2": "AU", "ap-southeast-3": "ID",
	"ap-south-1": "IN", "ap-east-1": "HK", "me-central-1": "AE", "il-central-1": "IL", "af-south-1": "ZA",
	// GCP
	"europe-west1": "BE", "europe-west2": "GB", "europe-west3": "DE", "europe-west4": "NL", "europe-west6": "CH",
	"europe-west9": "FR", "europe-north1": "FI", "europe-central2": "PL", "asia-east1": "TW", "asia-east2": "HK",
	"asia-northeast1": "JP", "asia-northeast3": "KR", "asia-south1": "IN", "asia-southeast1": "SG",
	"australia-southeast1": "AU", "me-west1": "IL",
	// Azure
	"westeurope": "NL", "northeurope": "IE", "uksouth": "GB", "ukwest": "GB", "francecentral": "FR",
	"germanywestcentral": "DE", "swedencentral": "SE", "switzerlandnorth": "CH", "norwayeast": "NO",
	"japaneast": "JP", "koreacentral": "KR", "southeastasia": "SG", "eastasia": "HK", "australiaeast": "AU",
	"centralindia": "IN", "canadacentral": "CA", "brazilsouth": "BR",
	// OCI, Lambda
	"us-ashburn-1": "US", "eu-frankfurt-1": "DE", "uk-london-1": "GB", "ap-tokyo-1": "JP",
}

// ProviderFromPath takes the provider from a catalog path laid out as
// SkyPilot's repository lays it out: ".../vast/vms.csv" → "vast",
// "catalogs/v8/aws/vms.csv" → "aws". It returns "" when the parent folder
// names no provider (a bare "vms.csv", "v8/vms.csv", "common/...").
func ProviderFromPath(p string) string {
	p = strings.ReplaceAll(p, "\\", "/")
	dir := path.Base(path.Dir(p))
	switch d := strings.ToLower(dir); {
	case d == "." || d == "/" || d == "" || d == "..":
		return ""
	case d == "common" || d == "catalogs" || (len(d) >= 2 && d[0] == 'v' && isDigits(d[1:])):
		return ""
	default:
		return d
	}
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
