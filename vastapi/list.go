package vastapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

// v1 instance listing: pages of at most 25, filtered on a few columns,
// ordered by any column with id as the tie-breaker.
const (
	v1DefaultLimit = 25
	v1MaxLimit     = 25
)

// v1FilterCols are the columns select_filters may name (Vast's filterable,
// stored columns).
var v1FilterCols = map[string]bool{"id": true, "actual_status": true, "intended_status": true, "cur_state": true,
	"gpu_name": true, "label": true, "verification": true, "machine_id": true, "image_uuid": true}

// handleListV1 is GET /api/v1/instances/?select_filters={}&order_by=[…]
// &limit=25&after_token=T: {"instances": […], "next_token": T|null, …}.
func (h *Handler) handleListV1(w http.ResponseWriter, r *http.Request, _ args) error {
	q := r.URL.Query()
	limit := v1DefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return suanli.FieldErrorf("limit", "%q is not a number", v)
		}
		limit = n
		if n <= 0 {
			limit = 5
		}
		limit = min(limit, v1MaxLimit)
	}
	offset := 0
	if t := q.Get("after_token"); t != "" {
		n, err := decodeToken(t)
		if err != nil {
			return suanli.FieldErrorf("after_token", "not a token from next_token: start again without it")
		}
		offset = n
	}
	filters, err := parseObj("select_filters", []byte(q.Get("select_filters")))
	if err != nil {
		return err
	}
	order, err := parseOrderBy(q.Get("order_by"))
	if err != nil {
		return err
	}
	var cols []string
	if v := q.Get("select_cols"); v != "" {
		if err := json.Unmarshal([]byte(v), &cols); err != nil {
			return suanli.FieldErrorf("select_cols", "want a JSON list of column names")
		}
	}
	rows, err := h.liveInstances(r.Context())
	if err != nil {
		return err
	}
	rows, err = filterRows(rows, filters)
	if err != nil {
		return err
	}
	sortRows(rows, order)
	labels := map[string]int{}
	for _, row := range rows {
		l, _ := row["label"].(string)
		labels[l]++
	}
	total := len(rows)
	page := []map[string]any{}
	if offset < total {
		page = rows[offset:min(offset+limit, total)]
	}
	var next any
	if offset+len(page) < total {
		next = encodeToken(offset + len(page))
	}
	if len(cols) > 0 && !(len(cols) == 1 && cols[0] == "*") {
		for i, row := range page {
			sel := map[string]any{}
			for _, c := range cols {
				sel[c] = row[c] // unknown columns are null, as Vast does
			}
			page[i] = sel
		}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"success": true, "instances": page, "instances_found": len(page),
		"total_instances": total, "label_counts": labels, "next_token": next})
}

func encodeToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.Itoa(offset)))
}

func decodeToken(t string) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(t, "="))
	if err != nil {
		return 0, err
	}
	s, found := strings.CutPrefix(string(b), "o:")
	if !found {
		return 0, fmt.Errorf("bad token")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad token")
	}
	return n, nil
}

// orderKey is one column of order_by.
type orderKey struct {
	col  string
	desc bool
}

// parseOrderBy reads [{"col": "id", "dir": "asc"}, …] (or Vast's older
// [["id", "asc"]]).
func parseOrderBy(v string) ([]orderKey, error) {
	if v == "" {
		return nil, nil
	}
	var objs []struct {
		Col string `json:"col"`
		Dir string `json:"dir"`
	}
	var keys []orderKey
	if err := json.Unmarshal([]byte(v), &objs); err == nil {
		for _, o := range objs {
			keys = append(keys, orderKey{col: o.Col, desc: strings.EqualFold(o.Dir, "desc")})
		}
	} else {
		var pairs [][]string
		if err := json.Unmarshal([]byte(v), &pairs); err != nil {
			return nil, suanli.FieldErrorf("order_by", "want [{\"col\": \"id\", \"dir\": \"asc\"}, …]")
		}
		for _, p := range pairs {
			if len(p) == 0 {
				continue
			}
			k := orderKey{col: p[0]}
			if len(p) > 1 {
				k.desc = strings.EqualFold(p[1], "desc")
			}
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if k.col == "" {
			return nil, suanli.FieldErrorf("order_by", "a directive without a col")
		}
	}
	return keys, nil
}

// sortRows sorts by the keys, then by id ascending. A column the rows lack
// sorts as null (first).
func sortRows(rows []map[string]any, keys []orderKey) {
	keys = append(keys, orderKey{col: "id"})
	sort.SliceStable(rows, func(i, j int) bool {
		for _, k := range keys {
			c := compareAny(rows[i][k.col], rows[j][k.col])
			if c == 0 {
				continue
			}
			if k.desc {
				return c > 0
			}
			return c < 0
		}
		return false
	})
}

// compareAny orders nulls, then numbers, then text.
func compareAny(a, b any) int {
	na, aok := toFloat(a)
	nb, bok := toFloat(b)
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	case aok && bok:
		switch {
		case na < nb:
			return -1
		case na > nb:
			return 1
		}
		return 0
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// filterRows keeps the rows that meet every select_filters condition.
func filterRows(rows []map[string]any, filters obj) ([]map[string]any, error) {
	type cond struct {
		col  string
		op   string
		vals []any
	}
	var conds []cond
	for col, raw := range filters {
		if !v1FilterCols[col] {
			return nil, suanli.FieldErrorf("select_filters", "cannot filter on %q: filter on id, actual_status, intended_status, cur_state, gpu_name, label, verification, machine_id or image_uuid", col)
		}
		ops, err := parseObj("select_filters."+col, raw)
		if err != nil {
			return nil, err
		}
		for op, v := range ops {
			c := cond{col: col, op: op}
			switch op {
			case "eq", "neq", "lt", "lte", "gt", "gte":
				var x any
				if json.Unmarshal(v, &x) != nil {
					return nil, suanli.FieldErrorf("select_filters", "%s.%s: not a JSON value", col, op)
				}
				c.vals = []any{x}
			case "in", "notin":
				if json.Unmarshal(v, &c.vals) != nil {
					return nil, suanli.FieldErrorf("select_filters", "%s.%s wants a list", col, op)
				}
			default:
				return nil, suanli.FieldErrorf("select_filters", "%s: unknown operator %q: use eq, neq, lt, lte, gt, gte, in or notin", col, op)
			}
			conds = append(conds, c)
		}
	}
	out := rows[:0:0]
	for _, row := range rows {
		keep := true
		for _, c := range conds {
			v := row[c.col]
			in := false
			for _, want := range c.vals {
				in = in || compareAny(v, want) == 0
			}
			var cmp int
			if len(c.vals) == 1 {
				cmp = compareAny(v, c.vals[0])
			}
			switch c.op {
			case "eq", "in":
				keep = keep && in
			case "neq", "notin":
				keep = keep && !in
			case "lt":
				keep = keep && cmp < 0
			case "lte":
				keep = keep && cmp <= 0
			case "gt":
				keep = keep && cmp > 0
			case "gte":
				keep = keep && cmp >= 0
			}
		}
		if keep {
			out = append(out, row)
		}
	}
	return out, nil
}
