package http

import (
	"context"
	"html/template"
	"net/http"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/suanli/suanli"
)

var homeTmpl = template.Must(template.New("home").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Suanli</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;color:#1d2330}
h1{font-size:1.4rem} h2{font-size:1.1rem;margin-top:2rem} table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #e3e6ec} th{background:#f5f6f8}
.sim{color:#a15c00} code{background:#f5f6f8;padding:0 .25rem}
</style></head><body>
<h1>Suanli 算力 — compute marketplace</h1>
<p>API under <code>/v1</code> (<a href="/v1/openapi.json">OpenAPI</a>), <a href="/healthz">health</a>, <a href="/metrics">metrics</a>.
Try <code>suanli search</code>, then <code>suanli create OFFER --image IMAGE -- CMD</code>.</p>
<h2>Offers ({{len .Offers}})</h2>
<table><thead><tr><th>id</th><th>GPU</th><th>GPUs free</th><th>VRAM</th><th>CPU cores</th><th>RAM GB</th><th>$/h</th><th>host</th></tr></thead><tbody>
{{range .Offers}}<tr><td>{{.ID}}</td><td>{{if .GPUName}}{{.GPUName}}{{else}}CPU only{{end}}{{if .Simulated}} <span class="sim">(simulated)</span>{{end}}</td>
<td>{{.NumGPUs}}/{{.TotalGPUs}}</td><td>{{printf "%.0f" .GPURAM}}</td><td>{{.CPUCores}}</td><td>{{printf "%.0f" .CPURAM}}</td><td>{{.DPHTotal.Decimal}}</td><td>{{.HostStatus}}</td></tr>
{{else}}<tr><td colspan="8">No offers listed yet.</td></tr>{{end}}
</tbody></table>
{{if .ShowInstances}}<h2>Instances ({{len .Instances}})</h2>
<table><thead><tr><th>id</th><th>status</th><th>image</th><th>machine</th><th>GPUs</th><th>cost so far</th><th>$/h</th></tr></thead><tbody>
{{range .Instances}}<tr><td>{{.ID}}</td><td>{{.Status}}</td><td>{{.Image}}</td><td>{{.MachineID}}</td><td>{{.GPUCount}}</td><td>{{.CostSoFar.Decimal}}</td><td>{{.BurnRate.Decimal}}</td></tr>
{{else}}<tr><td colspan="7">No live instances.</td></tr>{{end}}
</tbody></table>{{else}}<p>Instances are shown here to local visitors; use the CLI or API elsewhere.</p>{{end}}
</body></html>`))

// handleHome renders the overview: every listed offer, and, for visitors on
// this machine (the `suanli up` user), the live instances.
func (s *Server) handleHome(w http.ResponseWriter, r *http.Request) {
	ctx := suanli.NewContextWithPrincipal(r.Context(), &suanli.Principal{Role: suanli.RoleOperator, Scopes: []string{suanli.ScopeAll}})
	data := struct {
		Offers        []*suanli.Offer
		Instances     []*suanli.Instance
		ShowInstances bool
	}{}
	res, err := s.Service.Index.Search(suanli.OfferQuery{Query: "rentable=any", Limit: 500}, s.Service.ViewerAll())
	if err == nil {
		data.Offers = res.Offers
	}
	if ip, err := netip.ParseAddr(clientIP(r)); err == nil && ip.IsLoopback() {
		data.ShowInstances = true
		live := true
		data.Instances, _, _ = s.Service.Store.FindInstances(ctx, suanli.InstanceFilter{Live: &live, Limit: 500}, s.Service.Now())
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	if err := homeTmpl.Execute(w, data); err != nil {
		s.Logger.Error("render home", "err", err)
	}
}

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
