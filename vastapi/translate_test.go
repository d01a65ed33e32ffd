package vastapi

import (
	"encoding/json"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/market"
)

func translate(t testing.TB, h *Handler, body string) (*offerSearch, error) {
	t.Helper()
	o, err := parseObj("body", []byte(body))
	if err != nil {
		return nil, err
	}
	return h.translateSearch(o)
}

// TestTranslateSearch pins the query text each Vast body becomes.
func TestTranslateSearch(t *testing.T) {
	h := &Handler{}
	for _, c := range []struct{ body, query, order string }{
		{`{}`, ``, ``},
		{`{"verified": {"eq": true}, "external": {"eq": false}, "rentable": {"eq": true}, "rented": {"eq": false}}`, `rentable=true`, ``},
		{`{"gpu_ram": {"gte": 24576.0}}`, `gpu_ram>=24`, ``},
		{`{"gpu_ram": {"gte": "24000"}, "gpu_total_ram": {"lt": 49152}}`, `gpu_ram>=23.4375 gpu_total_ram<48`, ``},
		{`{"cpu_ram": {"gt": "65536"}}`, `cpu_ram>64`, ``},
		{`{"duration": {"gte": 172800.0}}`, `duration>=2`, ``},
		{`{"dph_total": {"lt": "1"}, "dph": {"gte": "0.05"}}`, `dph_total>=0.05 dph_total<1.00`, ``},
		{`{"num_gpus": {"eq": "2"}}`, `num_gpus=2`, ``},
		{`{"num_gpus": {"in": ["1", 2, "4"]}}`, `num_gpus in [1,2,4]`, ``},
		{`{"cpu_cores_effective": {"gte": 3.5}}`, `cpu_cores>=4`, ``},
		{`{"cpu_cores_effective": {"lt": 3.5}}`, `cpu_cores<=3`, ``},
		{`{"cpu_cores": {"eq": 3.5}}`, nothing, ``},
		{`{"gpu_name": {"eq": "RTX 4090"}}`, `gpu_name="RTX 4090"`, ``},
		{`{"gpu_name": {"in": ["RTX 4090", "RTX 3090"]}}`, `gpu_name in ["RTX 4090","RTX 3090"]`, ``},
		{`{"geolocation": {"notin": ["CN", "vn"]}}`, `country notin ["CN","vn"]`, ``},
		{`{"geolocation": {"eq": "California, US"}}`, `geolocation="California, US"`, ``},
		{`{"driver_version": {"gte": 535086005}}`, `driver_version>="535.86.05"`, ``},
		{`{"cuda_max_good": {"gte": "12.1"}, "reliability2": {"gt": 0.98}}`, `cuda_vers>=12.1 reliability>0.98`, ``},
		{`{"verified": {"eq": false}}`, `verified=false`, ``},
		{`{"rented": {"eq": true}}`, nothing, ``},
		{`{"external": {"neq": false}}`, nothing, ``},
		{`{"region": {"eq": "eu-west"}, "green": {"eq": true}}`, `green=true region="eu-west"`, ``},
		{`{"order": [["dph_total", "asc"], ["score", "desc"]]}`, ``, `dph_total,score-`},
		{`{"order": [["num_gpus-"]]}`, ``, `num_gpus-`},
		{`{"type": "bid", "dph_total": {"lt": "0.5"}, "order": [["dph", "asc"]]}`, `min_bid<0.50`, `min_bid`},
		{`{"q": {"num_gpus": {"eq": 1}}, "limit": 5}`, `num_gpus=1`, ``},
	} {
		s, err := translate(t, h, c.body)
		if err != nil {
			t.Errorf("translate(%s): %v", c.body, err)
			continue
		}
		if s.q.Query != c.query || s.q.Order != c.order {
			t.Errorf("translate(%s) = %q order %q, want %q order %q", c.body, s.q.Query, s.q.Order, c.query, c.order)
		}
		if _, err := market.Parse(s.q.Query); err != nil {
			t.Errorf("translate(%s) = %q, which does not parse: %v", c.body, s.q.Query, err)
		}
	}
	h.cfg.HonorVerified = true
	if s, err := translate(t, h, `{"verified": {"eq": true}}`); err != nil || s.q.Query != `verified=true` {
		t.Errorf("with HonorVerified: %v, %v", s, err)
	}
}

func TestTranslateSearchLimits(t *testing.T) {
	s, err := translate(t, &Handler{}, `{"limit": "100000", "allocated_storage": "7.5", "type": "interruptible"}`)
	if err != nil {
		t.Fatal(err)
	}
	if s.q.Limit != market.MaxLimit || s.q.StorageGB != 7.5 || s.typ != typeBid {
		t.Errorf("got %+v type %s", s.q, s.typ)
	}
}

// TestNumberMoney checks the exact conversion of dollars as clients write
// them.
func TestNumberMoney(t *testing.T) {
	for _, c := range []struct {
		in   string
		want suanli.Money
		ok   bool
	}{
		{`0.3`, 300_000, true}, {`"0.30"`, 300_000, true}, {`1e-05`, 10, true}, {`"2"`, 2_000_000, true},
		{`0.1234567`, 0, false}, {`"abc"`, 0, false}, {`true`, 0, false},
	} {
		n, err := toNumber("price", json.RawMessage(c.in))
		var m suanli.Money
		if err == nil {
			m, err = n.money("price")
		}
		if (err == nil) != c.ok || m != c.want {
			t.Errorf("money(%s) = %s, %v; want %s ok=%v", c.in, m, err, c.want, c.ok)
		}
	}
}

// FuzzTranslateSearch feeds arbitrary bodies: the translation never panics,
// and what it accepts is query text the market parses.
func FuzzTranslateSearch(f *testing.F) {
	for _, s := range []string{`{}`, `{"gpu_ram": {"gte": "24000"}}`, `{"gpu_name": {"in": ["A \"b\"", "c'd"]}}`,
		`{"order": [["dph", "desc"]], "type": "bid"}`, `{"num_gpus": {"eq": 1.5}}`, `{"geolocation": {"in": "TW,SE"}}`} {
		f.Add(s)
	}
	h := &Handler{}
	f.Fuzz(func(t *testing.T, body string) {
		s, err := translate(t, h, body)
		if err != nil {
			if suanli.ErrorCode(err) != suanli.EINVALID {
				t.Fatalf("translate(%q): %v is not EINVALID", body, err)
			}
			return
		}
		if _, err := market.Parse(s.q.Query); err != nil {
			t.Fatalf("translate(%q) = %q, which does not parse: %v", body, s.q.Query, err)
		}
		if _, err := market.ParseOrder(s.q.Order); err != nil {
			t.Fatalf("translate(%q) order %q does not parse: %v", body, s.q.Order, err)
		}
	})
}
