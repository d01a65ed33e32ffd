package agent

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports the agent's view for Prometheus: instances by status
// (from the runtime) and, on machines with real NVIDIA GPUs, per-GPU
// utilisation, memory, temperature and power (sampled at scrape time).
type Collector struct {
	Runtime Runtime
	// Sampler reads the GPUs; nil on machines without real GPUs.
	Sampler func(ctx context.Context) ([]GPUSample, error)

	instances, gpuUtil, gpuMem, gpuTemp, gpuPower *prometheus.Desc
}

// NewCollector returns a collector over rt and sampler (which may be nil).
func NewCollector(rt Runtime, sampler func(ctx context.Context) ([]GPUSample, error)) *Collector {
	gpu := []string{"gpu"}
	return &Collector{Runtime: rt, Sampler: sampler,
		instances: prometheus.NewDesc("suanli_agent_instances", "Instances held by this agent's runtime, by status.", []string{"status"}, nil),
		gpuUtil:   prometheus.NewDesc("suanli_agent_gpu_utilization_percent", "GPU utilisation.", gpu, nil),
		gpuMem:    prometheus.NewDesc("suanli_agent_gpu_memory_used_bytes", "GPU memory in use.", gpu, nil),
		gpuTemp:   prometheus.NewDesc("suanli_agent_gpu_temperature_celsius", "GPU temperature.", gpu, nil),
		gpuPower:  prometheus.NewDesc("suanli_agent_gpu_power_watts", "GPU power draw.", gpu, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.instances, c.gpuUtil, c.gpuMem, c.gpuTemp, c.gpuPower} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if reps, err := c.Runtime.Status(ctx); err == nil {
		by := map[string]int{}
		for _, r := range reps {
			by[r.Status]++
		}
		for st, n := range by {
			ch <- prometheus.MustNewConstMetric(c.instances, prometheus.GaugeValue, float64(n), st)
		}
	}
	if c.Sampler == nil {
		return
	}
	samples, err := c.Sampler(ctx)
	if err != nil {
		return
	}
	for _, s := range samples {
		g := strconv.Itoa(s.Index)
		ch <- prometheus.MustNewConstMetric(c.gpuUtil, prometheus.GaugeValue, s.UtilPercent, g)
		ch <- prometheus.MustNewConstMetric(c.gpuMem, prometheus.GaugeValue, float64(s.MemoryUsedMB)*1024*1024, g)
		ch <- prometheus.MustNewConstMetric(c.gpuTemp, prometheus.GaugeValue, float64(s.TemperatureC), g)
		ch <- prometheus.MustNewConstMetric(c.gpuPower, prometheus.GaugeValue, s.PowerW, g)
	}
}
