package main_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/suanli/suanli"
	main "github.com/suanli/suanli/cmd/suanli"
)

func TestTelemetryRows(t *testing.T) {
	gpu := &suanli.Telemetry{CPUPercent: 153.25, MemoryMB: 2048, DiskReadBytes: 1_200_000_000, DiskWriteBytes: 34_000_000,
		NetRxBytes: 5_600, NetTxBytes: 999, GPUUtilPercent: 48.5, GPUMemoryMB: 71234, GPUTempC: 69, GPUPowerW: 721.05}
	prev := &suanli.Telemetry{DiskReadBytes: 1_000_000_000, DiskWriteBytes: 34_000_000, NetRxBytes: 600, NetTxBytes: 2_000}
	for _, tt := range []struct {
		name       string
		t, prev    *suanli.Telemetry
		interval   time.Duration
		gpus, bars bool
		want       [][2]string
	}{
		{"show, process runtime", &suanli.Telemetry{CPUPercent: 12, MemoryMB: 30, DiskWriteBytes: 4 << 20}, nil, 0, false, false, [][2]string{
			{"cpu", "12.0%"}, {"memory", "30 MB"}, {"disk i/o", "read 0 B, written 4.2 MB"}, {"network", "not reported"},
		}},
		{"show, GPU instance", gpu, nil, 0, true, false, [][2]string{
			{"cpu", "153.2%"}, {"memory", "2048 MB"}, {"disk i/o", "read 1.2 GB, written 34 MB"}, {"network", "in 5.6 kB, out 999 B"},
			{"gpu util", "48.5%"}, {"gpu memory", "71234 MB"}, {"gpu temp", "69 °C (hottest GPU)"}, {"gpu power", "721 W (all its GPUs)"},
		}},
		{"top, rates; tx went down (a restart): no rate", gpu, prev, 10 * time.Second, false, true, [][2]string{
			{"cpu", "153.2%  [##########]"}, {"memory", "2048 MB"},
			{"disk i/o", "read 1.2 GB (20 MB/s), written 34 MB (0 B/s)"}, {"network", "in 5.6 kB (500 B/s), out 999 B"},
		}},
		{"GPU without sensors", &suanli.Telemetry{GPUUtilPercent: 3}, nil, 0, true, true, [][2]string{
			{"cpu", "  0.0%  [..........]"}, {"memory", "0 MB"}, {"disk i/o", "not reported"}, {"network", "not reported"},
			{"gpu util", "  3.0%  [..........]"}, {"gpu memory", "0 MB"}, {"gpu temp", "not reported"}, {"gpu power", "not reported"},
		}},
	} {
		got := main.TelemetryRows(tt.t, tt.prev, tt.interval, tt.gpus, tt.bars)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: rows mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestTopRates: top sees the same sample several times between agent syncs;
// rates are over the time between distinct samples.
func TestTopRates(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a := &suanli.Telemetry{NetTxBytes: 1_000_000, DiskWriteBytes: 1}
	a2 := *a
	b := &suanli.Telemetry{NetTxBytes: 3_000_000, DiskWriteBytes: 1}
	b2 := *b
	got := main.TopRows([]*suanli.Telemetry{a, &a2, b, &b2}, []time.Time{t0, t0.Add(2 * time.Second), t0.Add(4 * time.Second), t0.Add(6 * time.Second)})
	want := [2]string{"network", "in 0 B (0 B/s), out 3.0 MB (500 kB/s)"}
	if got[3] != want {
		t.Errorf("network row after samples 1 MB then 3 MB sent 4 s apart = %q, want %q", got[3], want)
	}
	if got := main.TopRows([]*suanli.Telemetry{a, &a2}, []time.Time{t0, t0.Add(2 * time.Second)}); got[3][1] != "in 0 B, out 1.0 MB" {
		t.Errorf("network row with one distinct sample = %q, want no rate", got[3][1])
	}
}
