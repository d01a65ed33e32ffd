package advisor

import "github.com/suanli/suanli"

// Sources of the built-in catalog: each provider's public on-demand price
// page. The prices are list prices (Linux, on demand, no commitment, no
// discounts) as published on the AsOf date; they change, sometimes by half
// (AWS cut P4 and P5 prices in mid-2025). `suanli catalog import` loads
// fresh prices from SkyPilot's catalog and they replace these rows.
const (
	srcAWS     = "https://aws.amazon.com/ec2/pricing/on-demand/"
	srcAzure   = "https://azure.microsoft.com/pricing/details/virtual-machines/linux/"
	srcGCP     = "https://cloud.google.com/compute/gpus-pricing"
	srcAlibaba = "https://www.alibabacloud.com/product/ecs-pricing-list/en"
	srcLambda  = "https://lambda.ai/service/gpu-cloud#pricing"
	srcRunPod  = "https://www.runpod.io/pricing"
	srcOCI     = "https://www.oracle.com/cloud/compute/pricing/"

	asOf2024 = "2024-10-01"

	noteApprox = "approximate list price; confirm with the provider's calculator"
	noteRunPod = "Secure Cloud, per pod; vCPUs and RAM vary by host"
)

type catalogSpec struct {
	provider, itype, gpu string
	count                float64
	mem, vcpus, ram      float64
	region, country      string
	price                string
	src, note            string
}

func mustMoney(s string) suanli.Money {
	m, err := suanli.ParseMoney(s)
	if err != nil {
		panic("advisor: built-in catalog price " + s + ": " + err.Error())
	}
	return m
}

var builtinCatalog = func() []CatalogRow {
	specs := []catalogSpec{
		// AWS, us-east-1 (N. Virginia) unless noted.
		{"aws", "p5.48xlarge", "H100 SXM", 8, 80, 192, 2048, "us-east-1", "US", "98.32", srcAWS, ""},
		{"aws", "p4de.24xlarge", "A100-80GB", 8, 80, 96, 1152, "us-east-1", "US", "40.9657", srcAWS, ""},
		{"aws", "p4d.24xlarge", "A100-40GB", 8, 40, 96, 1152, "us-east-1", "US", "32.7726", srcAWS, ""},
		{"aws", "p4d.24xlarge", "A100-40GB", 8, 40, 96, 1152, "us-west-2", "US", "32.7726", srcAWS, ""},
		{"aws", "p3.2xlarge", "V100-16GB", 1, 16, 8, 61, "us-east-1", "US", "3.06", srcAWS, ""},
		{"aws", "p3.8xlarge", "V100-16GB", 4, 16, 32, 244, "us-east-1", "US", "12.24", srcAWS, ""},
		{"aws", "p3.16xlarge", "V100-16GB", 8, 16, 64, 488, "us-east-1", "US", "24.48", srcAWS, ""},
		{"aws", "g6e.xlarge", "L40S", 1, 48, 4, 32, "us-east-1", "US", "1.861", srcAWS, ""},
		{"aws", "g6.xlarge", "L4", 1, 24, 4, 16, "us-east-1", "US", "0.8048", srcAWS, ""},
		{"aws", "g5.xlarge", "A10G", 1, 24, 4, 16, "us-east-1", "US", "1.006", srcAWS, ""},
		{"aws", "g5.xlarge", "A10G", 1, 24, 4, 16, "eu-west-1", "IE", "1.123", srcAWS, noteApprox},
		{"aws", "g5.12xlarge", "A10G", 4, 24, 48, 192, "us-east-1", "US", "5.672", srcAWS, ""},
		{"aws", "g5.48xlarge", "A10G", 8, 24, 192, 768, "us-east-1", "US", "16.288", srcAWS, ""},
		{"aws", "g4dn.xlarge", "T4", 1, 16, 4, 16, "us-east-1", "US", "0.526", srcAWS, ""},
		{"aws", "g4dn.xlarge", "T4", 1, 16, 4, 16, "eu-west-1", "IE", "0.587", srcAWS, ""},
		{"aws", "g4dn.xlarge", "T4", 1, 16, 4, 16, "eu-central-1", "DE", "0.658", srcAWS, ""},
		{"aws", "g4dn.xlarge", "T4", 1, 16, 4, 16, "ap-northeast-1", "JP", "0.71", srcAWS, ""},

		// Azure, East US.
		{"azure", "Standard_ND96isr_H100_v5", "H100 SXM", 8, 80, 96, 1900, "eastus", "US", "98.32", srcAzure, ""},
		{"azure", "Standard_NC40ads_H100_v5", "H100 NVL", 1, 94, 40, 320, "eastus", "US", "6.98", srcAzure, ""},
		{"azure", "Standard_ND96amsr_A100_v4", "A100-80GB", 8, 80, 96, 1900, "eastus", "US", "32.77", srcAzure, ""},
		{"azure", "Standard_ND96asr_v4", "A100-40GB", 8, 40, 96, 900, "eastus", "US", "27.197", srcAzure, ""},
		{"azure", "Standard_NC24ads_A100_v4", "A100-80GB", 1, 80, 24, 220, "eastus", "US", "3.673", srcAzure, ""},
		{"azure", "Standard_NC48ads_A100_v4", "A100-80GB", 2, 80, 48, 440, "eastus", "US", "7.346", srcAzure, ""},
		{"azure", "Standard_NC96ads_A100_v4", "A100-80GB", 4, 80, 96, 880, "eastus", "US", "14.692", srcAzure, ""},
		{"azure", "Standard_NC6s_v3", "V100-16GB", 1, 16, 6, 112, "eastus", "US", "3.06", srcAzure, ""},
		{"azure", "Standard_NC4as_T4_v3", "T4", 1, 16, 4, 28, "eastus", "US", "0.526", srcAzure, ""},
		{"azure", "Standard_NV36ads_A10_v5", "A10", 1, 24, 36, 440, "eastus", "US", "3.20", srcAzure, ""},

		// Google Cloud, us-central1 (Iowa); accelerator-optimised machine
		// types include their GPUs.
		{"gcp", "a3-highgpu-8g", "H100 SXM", 8, 80, 208, 1872, "us-central1", "US", "88.2488", srcGCP, ""},
		{"gcp", "a2-ultragpu-8g", "A100-80GB", 8, 80, 96, 1360, "us-central1", "US", "40.5496", srcGCP, ""},
		{"gcp", "a2-ultragpu-1g", "A100-80GB", 1, 80, 12, 170, "us-central1", "US", "5.0688", srcGCP, ""},
		{"gcp", "a2-highgpu-8g", "A100-40GB", 8, 40, 96, 680, "us-central1", "US", "29.3867", srcGCP, ""},
		{"gcp", "a2-highgpu-1g", "A100-40GB", 1, 40, 12, 85, "us-central1", "US", "3.6733", srcGCP, ""},
		{"gcp", "g2-standard-4", "L4", 1, 24, 4, 16, "us-central1", "US", "0.7068", srcGCP, ""},

		// Alibaba Cloud, Singapore (ap-southeast-1), pay-as-you-go.
		{"alibaba", "ecs.gn7i-c8g1.2xlarge", "A10", 1, 24, 8, 30, "ap-southeast-1", "SG", "1.88", srcAlibaba, noteApprox},
		{"alibaba", "ecs.gn6i-c4g1.xlarge", "T4", 1, 16, 4, 15, "ap-southeast-1", "SG", "1.06", srcAlibaba, noteApprox},
		{"alibaba", "ecs.gn6v-c8g1.2xlarge", "V100-16GB", 1, 16, 8, 32, "ap-southeast-1", "SG", "2.95", srcAlibaba, noteApprox},

		// Lambda, on-demand (same price in every region).
		{"lambda", "gpu_8x_h100_sxm5", "H100 SXM", 8, 80, 208, 1800, "us-east-1", "US", "23.92", srcLambda, ""},
		{"lambda", "gpu_1x_h100_pcie", "H100 PCIe", 1, 80, 26, 200, "us-east-1", "US", "2.49", srcLambda, ""},
		{"lambda", "gpu_8x_a100_80gb_sxm4", "A100-80GB", 8, 80, 240, 1800, "us-east-1", "US", "14.32", srcLambda, ""},
		{"lambda", "gpu_1x_a100_sxm4", "A100-40GB", 1, 40, 30, 200, "us-east-1", "US", "1.29", srcLambda, ""},
		{"lambda", "gpu_1x_a10", "A10", 1, 24, 30, 200, "us-east-1", "US", "0.75", srcLambda, ""},
		{"lambda", "gpu_1x_a6000", "RTX A6000", 1, 48, 14, 46, "us-east-1", "US", "0.80", srcLambda, ""},
		{"lambda", "gpu_8x_v100", "V100-16GB", 8, 16, 88, 448, "us-east-1", "US", "4.40", srcLambda, ""},
		{"lambda", "gpu_1x_gh200", "GH200", 1, 96, 64, 432, "us-east-1", "US", "1.49", srcLambda, ""},

		// RunPod Secure Cloud, on-demand per GPU.
		{"runpod", "1x_H100-SXM_SECURE", "H100 SXM", 1, 80, 16, 125, "any", "", "2.99", srcRunPod, noteRunPod},
		{"runpod", "1x_H100-PCIe_SECURE", "H100 PCIe", 1, 80, 16, 188, "any", "", "2.39", srcRunPod, noteRunPod},
		{"runpod", "1x_A100-80GB-SXM_SECURE", "A100-80GB", 1, 80, 16, 125, "any", "", "1.89", srcRunPod, noteRunPod},
		{"runpod", "1x_A100-80GB_SECURE", "A100-80GB", 1, 80, 8, 117, "any", "", "1.64", srcRunPod, noteRunPod},
		{"runpod", "1x_L40S_SECURE", "L40S", 1, 48, 12, 62, "any", "", "0.86", srcRunPod, noteRunPod},
		{"runpod", "1x_RTX4090_SECURE", "RTX 4090", 1, 24, 6, 41, "any", "", "0.69", srcRunPod, noteRunPod},
		{"runpod", "1x_RTXA6000_SECURE", "RTX A6000", 1, 48, 8, 50, "any", "", "0.76", srcRunPod, noteRunPod},
		{"runpod", "1x_RTX3090_SECURE", "RTX 3090", 1, 24, 4, 24, "any", "", "0.43", srcRunPod, noteRunPod},

		// Oracle Cloud (OCI), bare metal, per GPU-hour × 8.
		{"oci", "BM.GPU.H100.8", "H100 SXM", 8, 80, 224, 2048, "us-ashburn-1", "US", "80.00", srcOCI, ""},
		{"oci", "BM.GPU.A100-v2.8", "A100-80GB", 8, 80, 256, 2048, "us-ashburn-1", "US", "32.00", srcOCI, ""},
		{"oci", "BM.GPU4.8", "A100-40GB", 8, 40, 128, 2048, "us-ashburn-1", "US", "24.40", srcOCI, ""},
		{"oci", "VM.GPU.A10.1", "A10", 1, 24, 30, 240, "us-ashburn-1", "US", "2.00", srcOCI, ""},
	}
	rows := make([]CatalogRow, len(specs))
	for i, s := range specs {
		rows[i] = CatalogRow{
			Provider: s.provider, InstanceType: s.itype, GPU: s.gpu, Accelerator: s.gpu, GPUCount: s.count,
			GPUMemGiB: s.mem, VCPUs: s.vcpus, MemoryGiB: s.ram, Region: s.region, Country: s.country,
			Price: mustMoney(s.price), Source: s.src, AsOf: asOf2024, Note: s.note,
		}
	}
	return rows
}()
