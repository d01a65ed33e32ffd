package market_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/market"
)

func TestParse(t *testing.T) {
	c := func(field string, op market.Op, pos int, text string, vals ...string) market.Cond {
		return market.Cond{Field: field, Op: op, Values: vals, Pos: pos, Text: text}
	}
	tests := []struct {
		in   string
		want *market.Query
	}{
		{"", &market.Query{}},
		{"   ", &market.Query{}},
		{"num_gpus<2", &market.Query{Conds: []market.Cond{c("num_gpus", market.OpLT, 1, "num_gpus<2", "2")}}},
		{"num_gpus<=2", &market.Query{Conds: []market.Cond{c("num_gpus", market.OpLE, 1, "num_gpus<=2", "2")}}},
		{"num_gpus=2", &market.Query{Conds: []market.Cond{c("num_gpus", market.OpEQ, 1, "num_gpus=2", "2")}}},
		{"num_gpus==2", &market.Query{Conds: []market.Cond{c("num_gpus", market.OpEQ, 1, "num_gpus==2", "2")}}},
		{"num_gpus!=2", &market.Query{Conds: []market.Cond{c("num_gpus", market.OpNE, 1, "num_gpus!=2", "2")}}},
		{"num_gpus>=2", &market.Query{Conds: []market.Cond{c("num_gpus", market.OpGE, 1, "num_gpus>=2", "2")}}},
		{"num_gpus>2", &market.Query{Conds: []market.Cond{c("num_gpus", market.OpGT, 1, "num_gpus>2", "2")}}},
		{"num_gpus in [1,2]", &market.Query{Conds: []market.Cond{c("num_gpus", market.OpIn, 1, "num_gpus in [1,2]", "1", "2")}}},
		{"num_gpus in[1, 2 ]", &market.Query{Conds: []market.Cond{c("num_gpus", market.OpIn, 1, "num_gpus in[1, 2 ]", "1", "2")}}},
		{"num_gpus notin [4,8]", &market.Query{Conds: []market.Cond{c("num_gpus", market.OpNotIn, 1, "num_gpus notin [4,8]", "4", "8")}}},
		{"num_gpus nin [4]", &market.Query{Conds: []market.Cond{c("num_gpus", market.OpNotIn, 1, "num_gpus nin [4]", "4")}}},
		{"num_gpus in 4", &market.Query{Conds: []market.Cond{c("num_gpus", market.OpIn, 1, "num_gpus in 4", "4")}}},
		{"gpu_ram >= 24", &market.Query{Conds: []market.Cond{c("gpu_ram", market.OpGE, 1, "gpu_ram >= 24", "24")}}},
		{"gpu_ram>=24GB", &market.Query{Conds: []market.Cond{c("gpu_ram", market.OpGE, 1, "gpu_ram>=24GB", "24GB")}}},
		{"gpu_name=RTX_4090", &market.Query{Conds: []market.Cond{c("gpu_name", market.OpEQ, 1, "gpu_name=RTX_4090", "RTX 4090")}}},
		{`hostname="rig_01 a"`, &market.Query{Conds: []market.Cond{c("hostname", market.OpEQ, 1, `hostname="rig_01 a"`, "rig_01 a")}}},
		{"gpu_name in ['RTX 4090', A100_SXM4]", &market.Query{Conds: []market.Cond{c("gpu_name", market.OpIn, 1, "gpu_name in ['RTX 4090', A100_SXM4]", "RTX 4090", "A100 SXM4")}}},
		{"dph<1.5 verified=true", &market.Query{Conds: []market.Cond{
			c("dph_total", market.OpLT, 1, "dph<1.5", "1.5"),
			c("verified", market.OpEQ, 9, "verified=true", "true"),
		}}},
		{"DPH_TOTAL<$0.30/h", &market.Query{Conds: []market.Cond{c("dph_total", market.OpLT, 1, "DPH_TOTAL<$0.30/h", "$0.30/h")}}},
		{"rentable=any", &market.Query{Any: []string{"rentable"}}},
		{"rentable=ANY verified=any rentable=any", &market.Query{Any: []string{"rentable", "verified"}}},
		{"compute_cap>=8.9", &market.Query{Conds: []market.Cond{c("compute_cap", market.OpGE, 1, "compute_cap>=8.9", "8.9")}}},
		{"cuda_max_good>=12.1", &market.Query{Conds: []market.Cond{c("cuda_vers", market.OpGE, 1, "cuda_max_good>=12.1", "12.1")}}},
		{"end_date>2026-05-01", &market.Query{Conds: []market.Cond{c("end_date", market.OpGT, 1, "end_date>2026-05-01", "2026-05-01")}}},
		{"région=1", nil}, // error, see TestParseErrors
	}
	for _, tt := range tests {
		got, err := market.Parse(tt.in)
		if tt.want == nil {
			if err == nil {
				t.Errorf("Parse(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreUnexported(market.Cond{}), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in    string
		field string
		want  []string // substrings of the message
	}{
		{"gpu_rma>=24", "gpu_rma", []string{`unknown field "gpu_rma" at position 1`, "did you mean gpu_ram", "valid fields: id machine_id", "latency_ms"}},
		{"num_gpus=1 fooo=2", "fooo", []string{"position 12", "valid fields"}},
		{"gpu_ram=>24", "gpu_ram", []string{`unknown operator "=>" at position 8`, "< <= = == != >= > in notin"}},
		{"gpu_ram 24", "gpu_ram", []string{"expected an operator at position 9"}},
		{"gpu_ram", "gpu_ram", []string{"expected an operator at position 8", "end of the query"}},
		{"gpu_ram like 24", "gpu_ram", []string{`unknown operator "like" at position 9`}},
		{"gpu_ram>=", "gpu_ram", []string{"missing value after >= at position 10"}},
		{"gpu_ram>=abc", "gpu_ram", []string{`"abc" at position 10 is not a number`}},
		{"num_gpus>=1.5", "num_gpus", []string{`"1.5" at position 11 is not a whole number`}},
		{"dph<1.1234567", "dph_total", []string{"position 5", "more than 6 decimals"}},
		{"dph<cheap", "dph_total", []string{`"cheap" at position 5 is not an amount`}},
		{"verified=maybe", "verified", []string{"position 10 is not true or false"}},
		{"verified>true", "verified", []string{"operator > at position 9 does not apply to a true/false field"}},
		{"gpu_ram<any", "gpu_ram", []string{"any at position 9 works only with ="}},
		{"num_gpus=[1,2]", "num_gpus", []string{"a list at position 10 needs in or notin"}},
		{"num_gpus in [1,2", "num_gpus", []string{"list opened at position 13 has no closing ]"}},
		{"num_gpus in [1 2]", "num_gpus", []string{"expected , or ] at position 16"}},
		{"num_gpus in []", "num_gpus", []string{"empty list at position 13"}},
		{"num_gpus in [1,,2]", "num_gpus", []string{"empty list item at position 16"}},
		{`gpu_name="RTX 4090`, "gpu_name", []string{"quote at position 10 is not closed"}},
		{">=5", ">=5", []string{"position 1: expected a field name"}},
		{"région=1", "r", []string{`unknown field "r" at position 1`}},
		{"cuda>=12", "cuda", []string{"did you mean cuda_vers?"}},
		{"gpu_name=x é>2", "é>2", []string{"position 12"}},
		{"end_date>tomorrow", "end_date", []string{"is not a date"}},
	}
	for _, tt := range tests {
		q, err := market.Parse(tt.in)
		var e *suanli.Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, %v; want a *suanli.Error", tt.in, q, err)
			continue
		}
		if e.Code != suanli.EINVALID || e.Field != tt.field {
			t.Errorf("Parse(%q) error code %q field %q, want %q %q", tt.in, e.Code, e.Field, suanli.EINVALID, tt.field)
		}
		for _, w := range tt.want {
			if !strings.Contains(e.Message, w) {
				t.Errorf("Parse(%q) error %q, want it to contain %q", tt.in, e.Message, w)
			}
		}
	}
}

func TestParseOrder(t *testing.T) {
	tests := []struct {
		in   string
		want []market.OrderKey
	}{
		{"", nil},
		{"dph", []market.OrderKey{{Field: "dph_total"}}},
		{"dph,reliability-", []market.OrderKey{{Field: "dph_total"}, {Field: "reliability", Desc: true}}},
		{" dph_total+ , -dlperf ,gpu_name", []market.OrderKey{{Field: "dph_total"}, {Field: "dlperf", Desc: true}, {Field: "gpu_name"}}},
	}
	for _, tt := range tests {
		got, err := market.ParseOrder(tt.in)
		if err != nil {
			t.Errorf("ParseOrder(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreUnexported(market.OrderKey{})); diff != "" {
			t.Errorf("ParseOrder(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
	for _, tt := range []struct{ in, field, want string }{
		{"dph,relability-", "relability", `unknown field "relability" at position 5`},
		{"dph,,reliability", "order", "position 5: empty sort key"},
	} {
		_, err := market.ParseOrder(tt.in)
		var e *suanli.Error
		if !errors.As(err, &e) || e.Code != suanli.EINVALID || e.Field != tt.field || !strings.Contains(e.Message, tt.want) {
			t.Errorf("ParseOrder(%q) = %v, want EINVALID on %q containing %q", tt.in, err, tt.field, tt.want)
		}
	}
}

func TestEffective(t *testing.T) {
	tests := []struct {
		in   string
		want []string // Text of each effective condition
	}{
		{"", []string{"rentable=true (default)"}},
		{"num_gpus=1", []string{"rentable=true (default)", "num_gpus=1"}},
		{"rentable=false", []string{"rentable=false"}},
		{"rentable=any", nil},
		{"rentable=any num_gpus>1", []string{"num_gpus>1"}},
	}
	for _, tt := range tests {
		q, err := market.Parse(tt.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.in, err)
		}
		var got []string
		for _, c := range q.Effective() {
			got = append(got, c.Text)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Parse(%q).Effective() mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestQueryStringRoundTrip(t *testing.T) {
	for _, in := range []string{
		"gpu_name=RTX_4090 num_gpus>=2 dph<1.5",
		`hostname="rig_01" gpu_name in [A100,"H100 SXM"] rentable=any`,
		"cuda_max_good>=12 cuda_vers<=12.4 verified!=false",
	} {
		q, err := market.Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		q2, err := market.Parse(q.String())
		if err != nil {
			t.Fatalf("Parse(%q) (String of %q): %v", q.String(), in, err)
		}
		if diff := cmp.Diff(q, q2, cmpopts.IgnoreFields(market.Cond{}, "Pos", "Text"), cmpopts.IgnoreUnexported(market.Cond{})); diff != "" {
			t.Errorf("Parse(String(Parse(%q))) mismatch (-want +got):\n%s", in, diff)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"gpu_name=RTX_4090 num_gpus>=2 verified=true reliability>0.98",
		"gpu_ram>=24 dph<0.5 rentable=any",
		"gpu_name in [A100, 'H100 SXM'] cuda_vers>=12.1 disk_space>=500GB",
		`hostname="x_y" end_date>2026-01-01 compute_cap>=8.9`,
		"num_gpus notin [1,2] dph_total<$1.20/h",
		"a=b=c [ ] ' \"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		q, err := market.Parse(in)
		if err != nil {
			var e *suanli.Error
			if !errors.As(err, &e) || e.Code != suanli.EINVALID || e.Message == "" {
				t.Fatalf("Parse(%q) error %#v, want a *suanli.Error with code invalid", in, err)
			}
			return
		}
		s := q.String()
		q2, err := market.Parse(s)
		if err != nil {
			for _, c := range q.Conds {
				for _, v := range c.Values {
					if strings.Contains(v, `"`) && strings.Contains(v, "'") {
						return // a value with both quotes has no written form
					}
				}
			}
			t.Fatalf("Parse(%q) ok, but Parse of its String %q: %v", in, s, err)
		}
		if diff := cmp.Diff(q, q2, cmpopts.IgnoreFields(market.Cond{}, "Pos", "Text"), cmpopts.IgnoreUnexported(market.Cond{})); diff != "" {
			t.Fatalf("Parse(%q) then String %q reads back differently (-want +got):\n%s", in, s, diff)
		}
	})
}
