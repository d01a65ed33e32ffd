package http

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/suanli/suanli/control"
)

// registerClusterRoutes serves what a replica knows of the replicas
// sharing its database (operators), and the cluster's gauges.
func (s *Server) registerClusterRoutes() {
	s.route("GET /v1/cluster", false, func(w http.ResponseWriter, r *http.Request) error {
		st, err := s.Service.Cluster(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, 200, st)
	})
	state := func(f func(control.ClusterStatus) float64) func() float64 {
		return func() float64 { return f(s.Service.ClusterState()) }
	}
	s.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "suanli_lease_held",
			Help: "1 while this replica holds the singleton lease and runs the singleton loops (hour close, host leases, bookings), else 0."},
			state(func(c control.ClusterStatus) float64 { return b2f(c.Leader) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "suanli_lease_term",
			Help: "The singleton lease's term as this replica last saw it: it grows by one at every change of holder."},
			state(func(c control.ClusterStatus) float64 { return float64(c.Lease.Term) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "suanli_lease_takeovers_total",
			Help: "Times this replica took the singleton lease."},
			state(func(c control.ClusterStatus) float64 { return float64(c.Lease.Takeovers) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "suanli_change_feed_lag_seconds",
			Help: "From the newest change read from the change feed being written to its being read here."},
			state(func(c control.ClusterStatus) float64 { return c.Feed.LagMS / 1000 })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "suanli_change_feed_seq",
			Help: "The newest change feed sequence number this replica read."},
			state(func(c control.ClusterStatus) float64 { return float64(c.Feed.Seq) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "suanli_change_feed_changes_total",
			Help: "Changes this replica read from the change feed."},
			state(func(c control.ClusterStatus) float64 { return float64(c.Feed.Seen) })),
	)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Cluster returns the answering replica's view of the cluster (operators).
func (c *Client) Cluster(ctx context.Context) (*control.ClusterStatus, error) {
	var st control.ClusterStatus
	return &st, c.get(ctx, "/v1/cluster", &st)
}
