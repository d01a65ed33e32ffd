package heartbeat

import "github.com/prometheus/client_golang/prometheus"

// Collector returns the table's counters as Prometheus metrics
// (suanli_heartbeat_*), read at scrape time. Register it with the server's
// registry, next to the API's metrics.
func (t *Table) Collector() prometheus.Collector { return &collector{t: t} }

type collector struct{ t *Table }

var (
	descBeats    = prometheus.NewDesc("suanli_heartbeat_beats_total", "Beats accepted over the light heartbeat channel (UDP).", nil, nil)
	descAnswers  = prometheus.NewDesc("suanli_heartbeat_answers_total", "Answers to beats: ack, or sync (the agent must do a full sync).", []string{"kind"}, nil)
	descPokes    = prometheus.NewDesc("suanli_heartbeat_pokes_total", "Pokes sent to agents whose desired state changed.", nil, nil)
	descRejected = prometheus.NewDesc("suanli_heartbeat_rejected_total", "Datagrams dropped, by reason (truncated, malformed, bad_mac, old_key, replay, skew, unknown_machine).", []string{"reason"}, nil)
	descFlushes  = prometheus.NewDesc("suanli_heartbeat_flushes_total", "Batches of last-heartbeat times written to the store.", nil, nil)
	descFlushed  = prometheus.NewDesc("suanli_heartbeat_flushed_total", "Machines' last-heartbeat times written to the store (one per machine per batch).", nil, nil)
	descFlushErr = prometheus.NewDesc("suanli_heartbeat_flush_errors_total", "Batches that failed (their beats are written by the next).", nil, nil)
	descMachines = prometheus.NewDesc("suanli_heartbeat_machines", "Machines in the in-memory heartbeat table.", nil, nil)
	descPending  = prometheus.NewDesc("suanli_heartbeat_pending", "Machines whose last beat is not yet in the store.", nil, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBeats, descAnswers, descPokes, descRejected, descFlushes, descFlushed, descFlushErr, descMachines, descPending} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := &c.t.stats
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descBeats, s.Beats.Load())
	counter(descAnswers, s.Acks.Load(), "ack")
	counter(descAnswers, s.Syncs.Load(), "sync")
	counter(descPokes, s.Pokes.Load())
	for r := range numReasons {
		counter(descRejected, s.Rejected[r].Load(), r.String())
	}
	counter(descFlushes, s.Flushes.Load())
	counter(descFlushed, s.Flushed.Load())
	counter(descFlushErr, s.FlushErrs.Load())
	ch <- prometheus.MustNewConstMetric(descMachines, prometheus.GaugeValue, float64(c.t.Len()))
	ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(c.t.Pending()))
}
