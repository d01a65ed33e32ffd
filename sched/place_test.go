package sched_test

import (
	"strings"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sched"
)

func gpuMachine(n int) *suanli.Machine {
	m := &suanli.Machine{ID: 7, Hardware: suanli.Hardware{CPUCores: 16, RAMMB: 64 << 10, DiskFreeGB: 100},
		Listing: suanli.Listing{Listed: true, PriceGPU: 500_000, PriceDisk: 73_000, MinBid: 200_000}}
	for i := 0; i < n; i++ {
		m.Hardware.GPUs = append(m.Hardware.GPUs, suanli.GPU{Index: i, UUID: string(rune('a' + i)), Name: "A100"})
	}
	return m
}

func TestPlaceGPU(t *testing.T) {
	m := gpuMachine(4)
	p, err := sched.Place(m, sched.Usage{GPUs: []int{1}}, sched.Request{GPUCount: 2, DiskGB: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.GPUIndexes) != 2 || p.GPUIndexes[0] != 0 || p.GPUIndexes[1] != 2 {
		t.Errorf("GPUIndexes = %v, want [0 2] (lowest free)", p.GPUIndexes)
	}
	if p.CPUCores != 8 || p.RAMMB != 32<<10 {
		t.Errorf("cores %d ram %d, want half the machine for half its GPUs", p.CPUCores, p.RAMMB)
	}
	if p.Rates.ComputePerHour != 1_000_000 {
		t.Errorf("compute %s, want $1.00 for 2 GPUs at $0.50", p.Rates.ComputePerHour)
	}
	// 10 GB × $0.073/GB-month = $0.73/month = $0.001/h.
	if p.HourlyCost != 1_001_000 {
		t.Errorf("hourly %d, want 1001000", p.HourlyCost)
	}
	// 0 means every free GPU.
	p, _ = sched.Place(m, sched.Usage{GPUs: []int{1}}, sched.Request{})
	if len(p.GPUIndexes) != 3 {
		t.Errorf("GPUCount 0 placed %v, want the 3 free", p.GPUIndexes)
	}
	_, err = sched.Place(m, sched.Usage{GPUs: []int{0, 1, 2}}, sched.Request{GPUCount: 2})
	if suanli.ErrorCode(err) != suanli.ECONFLICT || suanli.ErrorMessage(err) != "offer 7 has 1 free GPUs, you asked for 2" {
		t.Errorf("over-ask: %v", err)
	}
	_, err = sched.Place(m, sched.Usage{}, sched.Request{GPUCount: 1, DiskGB: 500})
	if suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Errorf("disk over-ask: %v", err)
	}
}

func TestPlaceBids(t *testing.T) {
	m := gpuMachine(2)
	_, err := sched.Place(m, sched.Usage{}, sched.Request{GPUCount: 2, RentalType: suanli.RentalInterruptible, Bid: 399_999})
	if suanli.ErrorCode(err) != suanli.EINVALID || suanli.ErrorMessage(err) != "bid: $0.399999/h is below this offer's minimum bid of $0.40/h" {
		t.Errorf("low bid: %v", err)
	}
	p, err := sched.Place(m, sched.Usage{}, sched.Request{GPUCount: 2, RentalType: suanli.RentalInterruptible, Bid: 450_000})
	if err != nil || p.Rates.ComputePerHour != 450_000 {
		t.Errorf("bid plan: %+v %v, want compute at the bid", p, err)
	}
}

func TestPlaceCPU(t *testing.T) {
	m := &suanli.Machine{ID: 3, Hardware: suanli.Hardware{CPUCores: 32, RAMMB: 128 << 10},
		Listing: suanli.Listing{Listed: true, PriceCPU: 20_000, PriceRAM: 5_000}}
	p, err := sched.Place(m, sched.Usage{CPUCores: 16, RAMMB: 64 << 10}, sched.Request{CPUCores: 8})
	if err != nil {
		t.Fatal(err)
	}
	// 8 cores × $0.02 + 32 GB × $0.005 = $0.16 + $0.16.
	if p.CPUCores != 8 || p.RAMMB != 32<<10 || p.Rates.ComputePerHour != 320_000 {
		t.Errorf("cpu plan: %d cores, %d MB, %s/h", p.CPUCores, p.RAMMB, p.Rates.ComputePerHour)
	}
	if _, err := sched.Place(m, sched.Usage{CPUCores: 30}, sched.Request{CPUCores: 4}); suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Errorf("cpu over-ask: %v", err)
	}
}

func TestCheckResidency(t *testing.T) {
	us := &suanli.Machine{ID: 3, Country: "US", Region: "us-east"}
	de := &suanli.Machine{ID: 4, Country: "DE", Region: "eu-central"}
	unknown := &suanli.Machine{ID: 5}
	cases := []struct {
		m                *suanli.Machine
		account, rental  []string
		wantErrSubstring string
	}{
		{us, nil, nil, ""},
		{us, []string{"DE", "FR"}, nil, "offer 3 is in US (us-east); your account allows only DE, FR"},
		{de, []string{"DE", "FR"}, nil, ""},
		{de, []string{"eu-central"}, nil, ""},
		{de, []string{"DE", "FR"}, []string{"FR"}, "offer 4 is in DE (eu-central); this rental allows only FR"},
		{unknown, []string{"DE"}, nil, "offer 5 is in an unknown country"},
		{unknown, nil, nil, ""},
	}
	for _, c := range cases {
		err := sched.CheckResidency(c.m, c.account, c.rental)
		if c.wantErrSubstring == "" {
			if err != nil {
				t.Errorf("CheckResidency(%d, %v, %v) = %v, want nil", c.m.ID, c.account, c.rental, err)
			}
			continue
		}
		if err == nil || suanli.ErrorCode(err) != suanli.EFORBIDDEN || !strings.Contains(err.Error(), c.wantErrSubstring) {
			t.Errorf("CheckResidency(%d, %v, %v) = %v, want forbidden containing %q", c.m.ID, c.account, c.rental, err, c.wantErrSubstring)
		}
	}
}
