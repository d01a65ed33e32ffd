package vastapi

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

func (h *Handler) registerBillingRoutes() {
	h.handle(http.MethodGet, "/api/v1/invoices", catBillingRead, h.handleInvoicesV1)
	h.handle(http.MethodGet, "/api/v0/users/{user}/invoices", catBillingRead, h.handleInvoicesV0)
	h.handle(http.MethodGet, "/api/v0/users/{user}/machine-earnings", catBillingRead, h.handleEarnings)
}

// Charges are read page by page; a range holding more than maxChargeRows
// settled charges is refused (narrow it) rather than read without bound.
const (
	chargePage    = 1000
	maxChargeRows = 200_000
)

// invoiceLine is one row of an invoice: an instance's charges of one kind
// on one UTC day, or one credit.
type invoiceLine struct {
	instanceID int64
	kind       string
	day        time.Time
	from, to   time.Time
	amount     suanli.Money // positive: the renter paid it; credits are negative
	seconds    float64
	memo       string
	creditID   int64
}

func (l *invoiceLine) isCredit() bool { return l.kind == "credit" }

// userMatches checks a /users/{user}/ path segment: "me" or the caller's id.
func userMatches(r *http.Request, a args) error {
	u := a["user"]
	p := suanli.PrincipalFromContext(r.Context())
	if u == "me" || u == strconv.FormatInt(p.AccountID, 10) {
		return nil
	}
	return suanli.Errorf(suanli.ENOTFOUND, "user %s not found: use me", u)
}

// invoiceLines reads the caller's charges created in [from, to) and groups
// them into lines, newest first.
func (h *Handler) invoiceLines(ctx context.Context, from, to time.Time) ([]*invoiceLine, error) {
	seen := map[int64]bool{}
	type key struct {
		instance int64
		kind     string
		day      time.Time
	}
	byKey := map[key]*invoiceLine{}
	var lines []*invoiceLine
	for off := 0; ; off += chargePage {
		sum, err := h.svc.FindCharges(ctx, suanli.ChargeFilter{Since: &from, Limit: chargePage, Offset: off})
		if err != nil {
			return nil, err
		}
		for _, c := range sum.Charges {
			if seen[c.ID] || !c.CreatedAt.Before(to) {
				continue
			}
			seen[c.ID] = true
			if c.Kind == "credit" {
				lines = append(lines, &invoiceLine{kind: c.Kind, day: c.CreatedAt, from: c.CreatedAt, to: c.CreatedAt,
					amount: c.Amount, memo: c.Memo, creditID: c.ID})
				continue
			}
			k := key{c.InstanceID, c.Kind, c.From.UTC().Truncate(24 * time.Hour)}
			l := byKey[k]
			if l == nil {
				l = &invoiceLine{instanceID: c.InstanceID, kind: c.Kind, day: k.day, from: c.From, to: c.To}
				byKey[k] = l
				lines = append(lines, l)
			}
			l.amount += c.Amount
			l.seconds += c.To.Sub(c.From).Seconds()
			if c.From.Before(l.from) {
				l.from = c.From
			}
			if c.To.After(l.to) {
				l.to = c.To
			}
		}
		if len(seen) > maxChargeRows {
			return nil, suanli.Errorf(suanli.EINVALID, "more than %d charges between %s and %s: ask for a shorter range", maxChargeRows,
				from.Format(time.RFC3339), to.Format(time.RFC3339))
		}
		if len(sum.Charges) < chargePage {
			break
		}
	}
	sort.SliceStable(lines, func(i, j int) bool {
		if !lines[i].to.Equal(lines[j].to) {
			return lines[i].to.After(lines[j].to)
		}
		return lines[i].instanceID < lines[j].instanceID || (lines[i].instanceID == lines[j].instanceID && lines[i].kind < lines[j].kind)
	})
	return lines, nil
}

// meterNames say what each meter kind is, for invoice descriptions.
var meterNames = map[string]string{suanli.MeterCompute: "compute", suanli.MeterStorage: "storage",
	suanli.MeterInetUp: "upload", suanli.MeterInetDown: "download"}

// describer writes a line's description, rate and quantity from the
// instance's locked rates (looked up once per instance).
type describer struct {
	h     *Handler
	ctx   context.Context
	cache map[int64]*suanli.Instance
}

func (d *describer) instance(id int64) *suanli.Instance {
	if in, ok := d.cache[id]; ok {
		return in
	}
	in, _ := d.h.svc.FindInstanceByID(d.ctx, id)
	d.cache[id] = in
	return in
}

// describe returns description, rate (dollars per unit, nil when unknown)
// and quantity (in the rate's unit).
func (d *describer) describe(l *invoiceLine) (string, any, any) {
	if l.isCredit() {
		memo := l.memo
		if memo == "" {
			memo = "credit"
		}
		return memo, nil, 1
	}
	what := meterNames[l.kind]
	if what == "" {
		what = l.kind
	}
	desc := fmt.Sprintf("instance %d %s", l.instanceID, what)
	in := d.instance(l.instanceID)
	if in == nil {
		return desc, nil, nil
	}
	if in.Label != "" {
		desc += " (" + in.Label + ")"
	}
	hours := math.Round(l.seconds/3600*1e6) / 1e6
	switch l.kind {
	case suanli.MeterCompute:
		desc += fmt.Sprintf(", %d× %s", in.GPUCount, in.GPUName)
		return desc, dollars(in.Rates.ComputePerHour), hours // $/hour × hours
	case suanli.MeterStorage:
		desc += fmt.Sprintf(", %d GB", in.DiskGB)
		return desc, dollars(in.Rates.StoragePerHour(in.DiskGB)), hours
	case suanli.MeterInetUp:
		if r := in.Rates.InetUpPerGB; r > 0 {
			return desc, dollars(r), math.Round(float64(l.amount)/float64(r)*1e6) / 1e6 // GB
		}
	case suanli.MeterInetDown:
		if r := in.Rates.InetDownPerGB; r > 0 {
			return desc, dollars(r), math.Round(float64(l.amount)/float64(r)*1e6) / 1e6
		}
	}
	return desc, nil, nil
}

func (h *Handler) describer(ctx context.Context) *describer {
	return &describer{h: h, ctx: ctx, cache: map[int64]*suanli.Instance{}}
}

// handleInvoicesV0 is the older GET /api/v0/users/me/invoices?sdate=&edate=
// &inc_charges=: {"invoices": [{description, quantity, rate, amount,
// timestamp, type}], "current": {…}}. Charges are grouped per instance,
// meter and UTC day (type "charge"); credits are type "payment".
func (h *Handler) handleInvoicesV0(w http.ResponseWriter, r *http.Request, a args) error {
	if err := userMatches(r, a); err != nil {
		return err
	}
	q := r.URL.Query()
	from, to := time.Unix(0, 0).UTC(), h.now().Add(time.Second)
	for name, dst := range map[string]*time.Time{"sdate": &from, "edate": &to} {
		if v := q.Get(name); v != "" && v != "None" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return suanli.FieldErrorf(name, "%q: give Unix seconds", v)
			}
			*dst = fromEpoch(f)
		}
	}
	incCharges := true
	if v := q.Get("inc_charges"); v != "" {
		incCharges = !strings.EqualFold(v, "false") && v != "0"
	}
	lines, err := h.invoiceLines(r.Context(), from, to)
	if err != nil {
		return err
	}
	d := h.describer(r.Context())
	rows := []map[string]any{}
	for _, l := range lines {
		if !l.isCredit() && !incCharges {
			continue
		}
		desc, rate, qty := d.describe(l)
		typ := "charge"
		if l.isCredit() {
			typ = "payment"
		}
		rows = append(rows, map[string]any{"description": desc, "quantity": qty, "rate": rate, "amount": dollars(l.amount),
			"timestamp": epoch(l.to), "start": epoch(l.from), "end": epoch(l.to), "type": typ, "service": l.kind,
			"instance_id": nullIfZero(l.instanceID), "is_credit": l.isCredit()})
	}
	current := map[string]any{}
	if inv, err := h.svc.Invoice(r.Context(), ""); err == nil {
		current["month"], current["charges"], current["credits"] = inv.Month, dollars(inv.Total), dollars(-inv.Credits)
		current["total"] = dollars(inv.Total)
	} else {
		return err
	}
	if b, err := h.svc.Balance(r.Context()); err == nil {
		current["balance"], current["credit"], current["burn_rate"] = dollars(b.Balance), dollars(b.Balance), dollars(b.BurnRate)
	} else {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"invoices": rows, "current": current})
}

func nullIfZero(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

// handleInvoicesV1 is GET /api/v1/invoices/?select_filters={"when": {"gte":
// T0, "lte": T1}, "service": {…}}&limit=N&after_token=T: {"results": […],
// "count", "total", "next_token"}. The filters may also come as a JSON
// body.
func (h *Handler) handleInvoicesV1(w http.ResponseWriter, r *http.Request, _ args) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	for _, k := range []string{"select_filters", "limit", "after_token", "latest_first"} {
		if v := q.Get(k); v != "" {
			if k == "select_filters" {
				body[k] = json.RawMessage(v)
			} else {
				b, _ := json.Marshal(v)
				body[k] = b
			}
		}
	}
	filters, err := parseObj("select_filters", body["select_filters"])
	if err != nil {
		return err
	}
	from, to := time.Unix(0, 0).UTC(), h.now().Add(time.Second)
	if raw, found := filters["when"]; found {
		when, err := parseObj("select_filters.when", raw)
		if err != nil {
			return err
		}
		for op, dst := range map[string]*time.Time{"gte": &from, "gt": &from, "lte": &to, "lt": &to} {
			n, has, err := when.num(op)
			if err != nil {
				return renameFields(err, map[string]string{op: "select_filters.when." + op})
			}
			if has {
				*dst = fromEpoch(n.float())
				if op == "lte" {
					*dst = dst.Add(time.Second)
				}
			}
		}
	}
	services, err := serviceFilter(filters)
	if err != nil {
		return err
	}
	limit := 60
	if n, has, err := body.num("limit"); err != nil {
		return err
	} else if has {
		l, err := n.int("limit")
		if err != nil || l <= 0 {
			return suanli.FieldErrorf("limit", "%s: give a positive number", n)
		}
		limit = int(min(l, 1000))
	}
	offset := 0
	if t, has, err := body.str("after_token"); err != nil {
		return err
	} else if has && t != "" {
		if offset, err = decodeToken(t); err != nil {
			return suanli.FieldErrorf("after_token", "not a token from next_token: start again without it")
		}
	}
	latestFirst := true
	if b, has, err := body.boolean("latest_first"); err != nil {
		return err
	} else if has {
		latestFirst = b
	}
	lines, err := h.invoiceLines(r.Context(), from, to)
	if err != nil {
		return err
	}
	var kept []*invoiceLine
	for _, l := range lines {
		if services(l.kind) {
			kept = append(kept, l)
		}
	}
	if !latestFirst {
		slicesReverse(kept)
	}
	total := len(kept)
	page := []*invoiceLine{}
	if offset < total {
		page = kept[offset:min(offset+limit, total)]
	}
	d := h.describer(r.Context())
	results := make([]map[string]any, len(page))
	for i, l := range page {
		desc, rate, qty := d.describe(l)
		typ, source := "charge", "instance"
		if l.isCredit() {
			typ, source = "credit", "suanli"
		}
		meta := map[string]any{"service": l.kind, "instance_id": nullIfZero(l.instanceID), "rate": rate, "quantity": qty}
		if l.isCredit() {
			meta["invoice_id"] = l.creditID
		}
		results[i] = map[string]any{"start": epoch(l.from), "end": epoch(l.to), "type": typ, "source": source,
			"description": desc, "amount": dollars(l.amount), "metadata": meta, "items": []any{}}
	}
	var next any
	if offset+len(page) < total {
		next = encodeToken(offset + len(page))
	}
	return writeJSON(w, http.StatusOK, map[string]any{"success": true, "results": results, "count": len(results),
		"total": total, "next_token": next})
}

func slicesReverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// serviceFilter reads select_filters.service ({"eq": k} / {"in": […]} /
// {"notin": […]}) over the line kinds (compute, storage, inet_up,
// inet_down, credit).
func serviceFilter(filters obj) (func(kind string) bool, error) {
	raw, found := filters["service"]
	if !found {
		return func(string) bool { return true }, nil
	}
	ops, err := parseObj("select_filters.service", raw)
	if err != nil {
		return nil, err
	}
	type test struct {
		neg  bool
		vals []string
	}
	var tests []test
	for op, v := range ops {
		var vals []string
		switch op {
		case "eq", "neq":
			var s string
			if json.Unmarshal(v, &s) != nil {
				return nil, suanli.FieldErrorf("select_filters", "service.%s wants text", op)
			}
			vals = []string{s}
		case "in", "notin":
			if json.Unmarshal(v, &vals) != nil {
				return nil, suanli.FieldErrorf("select_filters", "service.%s wants a list", op)
			}
		default:
			return nil, suanli.FieldErrorf("select_filters", "service: unknown operator %q: use eq, in or notin", op)
		}
		tests = append(tests, test{neg: op == "neq" || op == "notin", vals: vals})
	}
	return func(kind string) bool {
		for _, t := range tests {
			in := false
			for _, v := range t.vals {
				in = in || v == kind
			}
			if in == t.neg {
				return false
			}
		}
		return true
	}, nil
}

// handleEarnings is GET /api/v0/users/me/machine-earnings?sday=&eday=
// &machid=: a provider's earnings over whole UTC days [sday, eday] (days
// since the Unix epoch; the CLI's default is yesterday), or the last
// last_days days. Suanli accounts earnings per machine, net of the platform
// fee, not per meter: total_gpu and friends are null, and per_machine holds
// gross, fees and net.
func (h *Handler) handleEarnings(w http.ResponseWriter, r *http.Request, a args) error {
	if err := userMatches(r, a); err != nil {
		return err
	}
	q := r.URL.Query()
	now := h.now()
	today := now.Truncate(24 * time.Hour)
	from, to := today.AddDate(0, 0, -1), today
	day := func(name string) (time.Time, bool, error) {
		v := q.Get(name)
		if v == "" || v == "None" {
			return time.Time{}, false, nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return time.Time{}, false, suanli.FieldErrorf(name, "%q: give days since 1970-01-01", v)
		}
		return time.Unix(int64(math.Floor(f))*secondsIn1Day, 0).UTC(), true, nil
	}
	if t, has, err := day("sday"); err != nil {
		return err
	} else if has {
		from = t
	}
	if t, has, err := day("eday"); err != nil {
		return err
	} else if has {
		to = t.AddDate(0, 0, 1)
	}
	if v := q.Get("last_days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return suanli.FieldErrorf("last_days", "%q: give a positive number of days", v)
		}
		from, to = now.AddDate(0, 0, -n), now.Add(time.Second)
	}
	var machid int64
	if v := q.Get("machid"); v != "" && v != "None" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return suanli.FieldErrorf("machid", "%q is not a machine id", v)
		}
		machid = n
	}
	if !to.After(from) {
		return suanli.FieldErrorf("eday", "the range ends before it starts")
	}
	e, err := h.svc.Earnings(r.Context(), from, to)
	if err != nil {
		return err
	}
	per := []map[string]any{}
	var gross, fees, net suanli.Money
	for _, m := range e.Machines {
		if machid != 0 && m.MachineID != machid {
			continue
		}
		gross, fees, net = gross+m.Gross, fees+m.Fees, net+m.Net
		per = append(per, map[string]any{"machine_id": m.MachineID, "earn": dollars(m.Net), "gross": dollars(m.Gross),
			"fees": dollars(m.Fees), "gpu_earn": nil, "sto_earn": nil, "bwu_earn": nil, "bwd_earn": nil})
	}
	acct, err := h.svc.Me(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{
		"summary": map[string]any{"total_gpu": nil, "total_stor": nil, "total_bwu": nil, "total_bwd": nil,
			"total": dollars(net), "gross": dollars(gross), "fees": dollars(fees)},
		"username": acct.Name, "email": nullIfEmpty(acct.Email), "fullname": acct.Name,
		"current": map[string]any{"balance": dollars(e.Available), "service_fee": dollars(e.Fees), "total": dollars(e.Net),
			"credit": nil, "paid_out": dollars(e.PaidOut)},
		"per_machine": per, "per_day": []any{},
		"from": epoch(from), "to": epoch(to),
	})
}
