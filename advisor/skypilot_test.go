package advisor_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
	"github.com/suanli/suanli/internal/testreq"
)

func importFile(t *testing.T, rel, provider string) ([]advisor.CatalogRow, []advisor.Skip) {
	t.Helper()
	f, err := os.Open(testreq.SharedData(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, skipped, err := advisor.ImportSkyPilot(f, provider)
	if err != nil {
		t.Fatalf("ImportSkyPilot(%s): %v", rel, err)
	}
	return rows, skipped
}

// TestImportSkyPilotVast reads the real Vast catalog (SkyPilot v8, commit
// 01b8cdda): 67 offers after the header (the data README says 66; the
// file has 68 lines), none skipped.
func TestImportSkyPilotVast(t *testing.T) {
	rows, skipped := importFile(t, "skypilot-catalog-v8/vast/vms.csv", "vast")
	if len(rows) != 67 || len(skipped) != 0 {
		t.Fatalf("imported %d rows, skipped %v; want 67 and none", len(rows), skipped)
	}
	byGPU := map[string]int{}
	for _, r := range rows {
		byGPU[r.GPU]++
		if r.Provider != "vast" || r.Price <= 0 || r.GPUCount < 1 || r.VCPUs != 32 || r.MemoryGiB != 64 || r.Source == "" {
			t.Errorf("row %+v: want provider vast, a price, 32 vCPUs, 64 GiB", r)
		}
		// Quirk: SpotPrice is 0.00 throughout: no spot market.
		if r.SpotPrice != 0 {
			t.Errorf("%s: spot price %s, the file has 0.00 (none)", r.InstanceType, r.SpotPrice)
		}
		if r.Country == "" || !utf8.ValidString(r.Region) {
			t.Errorf("%s: region %q gave no country", r.InstanceType, r.Region)
		}
	}
	for gpu, n := range map[string]int{"RTX 4090": 13, "RTX 5090": 11, "H200": 6, "H100 SXM": 5, "H100 NVL": 2, "A100-40GB": 4, "A100-80GB": 1, "RTX 4070 Ti Super": 1} {
		if byGPU[gpu] != n {
			t.Errorf("%d rows of %s, want %d (all: %v)", byGPU[gpu], gpu, n, byGPU)
		}
	}
	first := rows[0]
	// 1x-H200-32-65536,H200,1,32,64.0,"{'Gpus': [{'Name': 'H200', 'Count': 1,
	// 'MemoryInfo': {'SizeInMiB': 143771}}], ...}",2.65,0.00,"France, FR, EU"
	if first.InstanceType != "1x-H200-32-65536" || first.Price != 2_650_000 || first.GPUMemGiB != 140.4 || first.Region != "France, FR, EU" || first.Country != "FR" {
		t.Errorf("first row = %+v", first)
	}
	find := func(itype, region string) advisor.CatalogRow {
		for _, r := range rows {
			if r.InstanceType == itype && r.Region == region {
				return r
			}
		}
		t.Fatalf("no row %s in %q", itype, region)
		return advisor.CatalogRow{}
	}
	// Quirk: a region without its place part.
	if r := find("4x-H200-32-65536", ", US, NA"); r.Country != "US" || r.PerGPUHour() != 2_647_500 {
		t.Errorf("4x H200 in \", US, NA\": country %q per GPU %s, want US $2.6475", r.Country, r.PerGPUHour())
	}
	// Quirk: non-ASCII place names survive intact.
	if r := find("2x-RTX_5090-32-65536", "Hafnarfjarðarkaupstaður, IS, EU"); r.Country != "IS" {
		t.Errorf("Icelandic region: country %q", r.Country)
	}
	find("1x-RTX_5090-32-65536", "Bács-Kiskun, HU, EU")
	// Quirk: GpuInfo's SizeInMiB is per instance here; per GPU comes from
	// the total over the count (2 × 143771 MiB for 2x H200).
	if r := find("2x-H200-32-65536", "Michigan, US, NA"); r.GPUMemGiB != 140.4 {
		t.Errorf("2x H200 memory per GPU %v GiB, want 140.4", r.GPUMemGiB)
	}
	// The accelerator name "H100" hides the form; the instance type says it.
	if r := find("1x-H100_NVL-32-65536", "Bulgaria, BG, EU"); r.GPU != "H100 NVL" || r.Accelerator != "H100" {
		t.Errorf("H100 NVL row: GPU %q accelerator %q", r.GPU, r.Accelerator)
	}
	// Same instance type, different memory: the modded 48 GB RTX 4090.
	if r := find("1x-RTX_4090-32-65536", "Hong Kong, HK, AS"); r.GPU != "RTX 4090" || r.GPUMemGiB != 48 {
		t.Errorf("HK RTX 4090: %q %v GiB", r.GPU, r.GPUMemGiB)
	}
}

// TestImportSkyPilotNotAVMsFile: accelerators.csv is a different table;
// the importer says which columns it lacks instead of importing nothing.
func TestImportSkyPilotNotAVMsFile(t *testing.T) {
	f, err := os.Open(testreq.SharedData(t, "skypilot-catalog-v8/common/accelerators.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, _, err = advisor.ImportSkyPilot(f, "common")
	if suanli.ErrorCode(err) != suanli.EINVALID || !strings.Contains(err.Error(), "InstanceType") {
		t.Errorf("ImportSkyPilot(accelerators.csv) = %v, want EINVALID naming InstanceType", err)
	}
}

// TestImportSkyPilotColumnOrderAndSkips: clouds order their columns
// differently (GCP puts SpotPrice before Price and adds AvailabilityZone);
// CPU rows, missing prices and malformed fields are skipped with reasons.
func TestImportSkyPilotColumnOrderAndSkips(t *testing.T) {
	csv := "\ufeffInstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,SpotPrice,Price\n" +
		`a2-highgpu-1g,12,85,A100,1,"{'Gpus': [{'Name': 'A100', 'Manufacturer': 'NVIDIA', 'Count': 1.0, 'MemoryInfo': {'SizeInMiB': 40960}}], 'TotalGpuMemoryInMiB': 40960}",us-central1,us-central1-a,1.1,3.6732599999999997` + "\n" +
		"n2-standard-8,8,32,,,,us-central1,us-central1-a,0.1,0.39\n" +
		"a2-highgpu-2g,24,170,A100,2,,europe-west4,europe-west4-a,,\n" +
		"p4d.24xlarge,96,1152,A100,8,\"{\"\"Gpus\"\": [{\"\"Name\"\": \"\"A100\"\", \"\"Count\"\": 8, \"\"MemoryInfo\"\": {\"\"SizeInMiB\"\": 40960}}], \"\"TotalGpuMemoryInMiB\"\": 327680}\",us-east-1,us-east-1a,9.8,32.7726\n" +
		"bad-price,4,16,T4,1,,us-east-1,,0,abc\n" +
		"bad-info,4,16,T4,1,{'Gpus': [,us-east-1,,0,0.5\n" +
		"bad-count,4,16,T4,zero,,us-east-1,,0,0.5\n" +
		"NV6ads_A10_v5,6,55,A10,0.1667,\"{'Gpus': [{'Name': 'A10', 'Count': 0.1667, 'MemoryInfo': {'SizeInMiB': 4096}}], 'TotalGpuMemoryInMiB': 4096}\",eastus,,0,0.454\n" +
		"short,4\n"
	rows, skipped, err := advisor.ImportSkyPilot(strings.NewReader(csv), "GCP")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("imported %+v, want 3 rows", rows)
	}
	a2 := rows[0]
	if a2.Provider != "gcp" || a2.Price != 3_673_260 || a2.SpotPrice != 1_100_000 || a2.GPU != "A100-40GB" || a2.Country != "US" || a2.VCPUs != 12 {
		t.Errorf("a2-highgpu-1g = %+v", a2)
	}
	if p4d := rows[1]; p4d.GPUMemGiB != 40 || p4d.GPU != "A100-40GB" || p4d.PerGPUHour() != 4_096_575 {
		t.Errorf("p4d (JSON-style GpuInfo) = %+v, per GPU %s", p4d, p4d.PerGPUHour())
	}
	// A sixth of an A10: 4 GiB of its 24, priced per whole GPU.
	if nv := rows[2]; nv.GPUCount != 0.1667 || nv.GPUMemGiB < 23.9 || nv.GPUMemGiB > 24.1 || nv.PerGPUHour() != 2_723_455 {
		t.Errorf("fractional A10 = %+v, per GPU %s", nv, nv.PerGPUHour())
	}
	wantReasons := map[string]string{
		"n2-standard-8": "CPU-only", "a2-highgpu-2g": "no on-demand Price", "bad-price": "not an amount",
		"bad-info": "GpuInfo", "bad-count": "AcceleratorCount", "short": "too few",
	}
	if len(skipped) != len(wantReasons) {
		t.Errorf("skipped %+v, want %d", skipped, len(wantReasons))
	}
	for _, s := range skipped {
		if w, ok := wantReasons[s.InstanceType]; !ok || !strings.Contains(s.Reason, w) || s.Line < 2 {
			t.Errorf("skip %+v: want reason containing %q and a line number", s, w)
		}
	}
}

func TestImportSkyPilotErrors(t *testing.T) {
	for _, in := range []string{"", "Name,Price\nx,1\n", "InstanceType,Region\nx,y\n"} {
		if _, _, err := advisor.ImportSkyPilot(strings.NewReader(in), "x"); suanli.ErrorCode(err) != suanli.EINVALID {
			t.Errorf("ImportSkyPilot(%q) = %v, want EINVALID", in, err)
		}
	}
	// A broken quote is one skipped record, not a failed import.
	rows, skipped, err := advisor.ImportSkyPilot(strings.NewReader("InstanceType,AcceleratorName,Price,Region\nok,T4,1,us-east-1\nx\"y,T4,1,r\nok2,T4,2,us-east-1\n"), "aws")
	if err != nil || len(rows) != 2 || len(skipped) != 1 || skipped[0].Line != 3 {
		t.Errorf("bare quote: rows %v skipped %+v err %v; want 2 rows, line 3 skipped", rows, skipped, err)
	}
}

func TestProviderFromPath(t *testing.T) {
	for in, want := range map[string]string{
		"../shared/data/skypilot-catalog-v8/vast/vms.csv": "vast",
		"catalogs/v8/aws/vms.csv":                         "aws",
		`C:\catalogs\v8\Lambda\vms.csv`:                   "lambda",
		"vms.csv":                                         "",
		"catalogs/v8/vms.csv":                             "",
		"/vms.csv":                                        "",
		"skypilot-catalog-v8/common/accelerators.csv":     "",
	} {
		if got := advisor.ProviderFromPath(in); got != want {
			t.Errorf("ProviderFromPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzImportSkyPilot: any input either fails as a whole or yields rows
// that are priced, named, valid UTF-8, and accounted for (rows + skips
// never exceed the records read).
func FuzzImportSkyPilot(f *testing.F) {
	f.Add([]byte("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region\n" +
		`1x-H200-32-65536,H200,1,32,64.0,"{'Gpus': [{'Name': 'H200', 'Count': 1, 'MemoryInfo': {'SizeInMiB': 143771}}], 'TotalGpuMemoryInMiB': 143771}",2.65,0.00,"France, FR, EU"` + "\n"))
	f.Add([]byte("InstanceType,Price,Region,AcceleratorName,GpuInfo\nx,1e-5,\", US, NA\",T4,\"{'a': [1, (2, 3), None, True, 'q\\\\'s']}\"\n"))
	f.Add([]byte("InstanceType,Price,Region,AcceleratorName\n\"unterminated,1,r,T4\n"))
	if p := os.Getenv("SUANLI_SHARED_DATA"); p != "" {
		if b, err := os.ReadFile(p + "/skypilot-catalog-v8/vast/vms.csv"); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, skipped, err := advisor.ImportSkyPilot(bytes.NewReader(data), "Fuzz")
		if err != nil {
			if rows != nil || skipped != nil {
				if suanli.ErrorCode(err) == suanli.EINVALID {
					t.Fatalf("EINVALID with partial results")
				}
			}
			return
		}
		lines := bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) + 1
		if len(rows)+len(skipped) > lines {
			t.Fatalf("%d rows + %d skips from %d lines", len(rows), len(skipped), lines)
		}
		for _, r := range rows {
			if r.Price <= 0 || r.InstanceType == "" || r.Accelerator == "" || r.GPUCount <= 0 || r.Provider != "fuzz" {
				t.Fatalf("bad row %+v", r)
			}
			for _, s := range []string{r.InstanceType, r.Region, r.GPU, r.Accelerator} {
				if !utf8.ValidString(s) {
					t.Fatalf("invalid UTF-8 in %+v", r)
				}
			}
			if r.PerGPUHour() < 0 {
				t.Fatalf("negative per-GPU price in %+v", r)
			}
		}
	})
}
