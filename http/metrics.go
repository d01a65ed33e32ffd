package http

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/suanli/suanli"
)

// registerMetrics adds the control plane's gauges: offers listed and
// instances by status, read at scrape time.
func (s *Server) registerMetrics() {
	s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "suanli_offers", Help: "Offers in the index."},
		func() float64 { return float64(s.Service.Index.Len()) }))
	s.reg.MustRegister(&instanceCollector{s: s, desc: prometheus.NewDesc("suanli_instances", "Instances by status.", []string{"status"}, nil)})
	s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "suanli_spend_rate_dollars_per_hour",
		Help: "What all running meters cost per hour, marketplace-wide."}, func() float64 {
		st, err := s.Service.Store.Stats(context.Background())
		if err != nil {
			return 0
		}
		return float64(st.BurnRate) / 1e6 // a gauge for humans; the ledger stays integer
	}))
	s.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "suanli_ledger_postings_total",
		Help: "Ledger postings written."}, func() float64 {
		st, _ := s.Service.Store.Stats(context.Background())
		return float64(st.Postings)
	}))
}

type instanceCollector struct {
	s    *Server
	desc *prometheus.Desc
}

func (c *instanceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *instanceCollector) Collect(ch chan<- prometheus.Metric) {
	live := true
	ins, _, err := c.s.Service.Store.FindInstances(context.Background(), suanli.InstanceFilter{Live: &live, Limit: 1 << 30}, c.s.Service.Now())
	if err != nil {
		return
	}
	by := map[string]int{}
	for _, in := range ins {
		by[in.Status]++
	}
	for st, n := range by {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), st)
	}
}
