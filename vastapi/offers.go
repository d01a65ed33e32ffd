package vastapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/market"
)

// Units: Vast sends and shows RAM in MB (the CLI multiplies the GB a user
// types by 1000) and durations in seconds; Suanli's offers hold GiB (MB/1024)
// and days. Comparing Vast's MB with Suanli's GiB × 1024 compares MB with MB,
// as Vast does.
const (
	mbPerGB       = 1024
	secondsIn1Day = 86400
)

// fieldKind is how a Vast search value is read.
type fieldKind uint8

const (
	kindInt fieldKind = iota
	kindFloat
	kindMoney // dollars
	kindBool
	kindString
)

// searchField is how one Vast search field translates: the Suanli query
// field, the value's kind, and the factor that divides a Vast value into
// Suanli's unit (0 means 1).
type searchField struct {
	native string
	kind   fieldKind
	div    float64
}

// searchFields are the Vast search fields with a Suanli counterpart. Names
// that are Suanli's own (region, country, tier, green, …) pass through in
// Suanli's units.
var searchFields = map[string]searchField{
	"id":                  {"id", kindInt, 0},
	"ask_contract_id":     {"id", kindInt, 0},
	"bundle_id":           {"id", kindInt, 0},
	"machine_id":          {"machine_id", kindInt, 0},
	"host_id":             {"host_id", kindInt, 0},
	"gpu_name":            {"gpu_name", kindString, 0},
	"num_gpus":            {"num_gpus", kindInt, 0},
	"gpu_ram":             {"gpu_ram", kindFloat, mbPerGB},
	"gpu_total_ram":       {"gpu_total_ram", kindFloat, mbPerGB},
	"gpu_totalram":        {"gpu_total_ram", kindFloat, mbPerGB},
	"compute_cap":         {"compute_cap", kindInt, 0},
	"cuda_max_good":       {"cuda_vers", kindFloat, 0},
	"cuda_vers":           {"cuda_vers", kindFloat, 0},
	"driver_version":      {"driver_version", kindString, 0},
	"gpu_arch":            {"gpu_arch", kindString, 0},
	"cpu_arch":            {"cpu_arch", kindString, 0},
	"cpu_name":            {"cpu_name", kindString, 0},
	"cpu_cores":           {"cpu_cores", kindInt, 0},
	"cpu_cores_effective": {"cpu_cores", kindInt, 0},
	"cpu_ram":             {"cpu_ram", kindFloat, mbPerGB},
	"disk_space":          {"disk_space", kindFloat, 0},
	"disk_bw":             {"disk_bw", kindFloat, 0},
	"inet_up":             {"inet_up", kindFloat, 0},
	"inet_down":           {"inet_down", kindFloat, 0},
	"inet_up_cost":        {"inet_up_cost", kindMoney, 0},
	"inet_down_cost":      {"inet_down_cost", kindMoney, 0},
	"dph_total":           {"dph_total", kindMoney, 0},
	"dph":                 {"dph_total", kindMoney, 0},
	"dph_base":            {"dph_base", kindMoney, 0},
	"min_bid":             {"min_bid", kindMoney, 0},
	"storage_cost":        {"storage_cost", kindMoney, 0},
	"reliability":         {"reliability", kindFloat, 0},
	"reliability2":        {"reliability", kindFloat, 0},
	"verified":            {"verified", kindBool, 0},
	"rentable":            {"rentable", kindBool, 0},
	"datacenter":          {"datacenter", kindBool, 0},
	"geolocation":         {"geolocation", kindString, 0},
	"dlperf":              {"dlperf", kindFloat, 0},
	"dlperf_per_dphtotal": {"dlperf_per_dphtotal", kindFloat, 0},
	"dlperf_usd":          {"dlperf_per_dphtotal", kindFloat, 0},
	"score":               {"score", kindFloat, 0},
	"total_flops":         {"total_flops", kindFloat, 0},
	"flops_per_dphtotal":  {"flops_per_dphtotal", kindFloat, 0},
	"flops_usd":           {"flops_per_dphtotal", kindFloat, 0},
	"duration":            {"duration", kindFloat, secondsIn1Day},
	"static_ip":           {"static_ip", kindBool, 0},
	"direct_port_count":   {"direct_port_count", kindInt, 0},
}

// searchKeys are the body keys that are not filters.
var searchKeys = map[string]bool{"order": true, "type": true, "limit": true, "allocated_storage": true,
	"disable_bundling": true, "select_cols": true, "q": true, "offset": true}

// vastOnly are Vast filters with no Suanli counterpart: a condition on one
// is a 400 that says so (external and rented are handled apart).
var vastOnly = []string{"bw_nvlink", "cpu_ghz", "gpu_display_active", "gpu_frac", "gpu_mem_bw", "gpu_max_power",
	"gpu_max_temp", "has_avx", "mobo_name", "pci_gen", "pcie_bw", "ubuntu_version", "verification", "vms_enabled"}

var vastOps = map[string]market.Op{
	"eq": market.OpEQ, "neq": market.OpNE, "lt": market.OpLT, "lte": market.OpLE,
	"gt": market.OpGT, "gte": market.OpGE, "in": market.OpIn, "notin": market.OpNotIn, "nin": market.OpNotIn,
}

// Search types Vast clients ask for.
const (
	typeOnDemand = "on-demand"
	typeBid      = "bid"
	typeReserved = "reserved"
)

// offerSearch is a translated Vast search.
type offerSearch struct {
	q   suanli.OfferQuery
	typ string
}

// translateSearch turns Vast's search body into a Suanli query. Errors name
// the Vast field.
func (h *Handler) translateSearch(body obj) (*offerSearch, error) {
	if q, ok := body["q"]; ok && !isNull(q) {
		inner, err := parseObj("q", q)
		if err != nil {
			return nil, err
		}
		for k, v := range inner {
			if _, dup := body[k]; !dup {
				body[k] = v
			}
		}
	}
	s := &offerSearch{typ: typeOnDemand}
	if t, ok, err := body.str("type"); err != nil {
		return nil, err
	} else if ok {
		switch t {
		case typeOnDemand, typeReserved:
			s.typ = t
		case typeBid, "interruptible":
			s.typ = typeBid
		default:
			return nil, suanli.FieldErrorf("type", "%q: use on-demand, bid or reserved", t)
		}
	}
	if n, ok, err := body.num("limit"); err != nil {
		return nil, err
	} else if ok {
		l, err := n.int("limit")
		if err != nil {
			return nil, err
		}
		if l < 0 {
			return nil, suanli.FieldErrorf("limit", "%d is negative", l)
		}
		s.q.Limit = int(min(l, market.MaxLimit))
	}
	if n, ok, err := body.num("offset"); err != nil {
		return nil, err
	} else if ok {
		o, err := n.int("offset")
		if err != nil {
			return nil, err
		}
		s.q.Offset = int(o)
	}
	if n, ok, err := body.num("allocated_storage"); err != nil {
		return nil, err
	} else if ok {
		s.q.StorageGB = n.float()
	}
	var conds []string
	fields := make([]string, 0, len(body))
	for k := range body {
		fields = append(fields, k)
	}
	sort.Strings(fields) // a stable query text, and a stable first error
	for _, f := range fields {
		if searchKeys[f] {
			continue
		}
		c, err := h.translateCond(f, body[f], s.typ)
		if err != nil {
			return nil, err
		}
		conds = append(conds, c...)
	}
	s.q.Query = strings.Join(conds, " ")
	order, err := translateOrder(body["order"], s.typ)
	if err != nil {
		return nil, err
	}
	s.q.Order = order
	return s, nil
}

// nothing is a condition no offer meets.
const nothing = "id<0"

// translateCond translates one Vast filter {"op": value, …} into query
// language conditions.
func (h *Handler) translateCond(field string, raw json.RawMessage, typ string) ([]string, error) {
	ops, err := parseObj(field, raw)
	if err != nil {
		return nil, suanli.FieldErrorf(field, "want an object of operators such as {\"gte\": \"24\"}, got %s", abbrev(raw))
	}
	names := make([]string, 0, len(ops))
	for op := range ops {
		names = append(names, op)
	}
	sort.Strings(names)
	var out []string
	for _, opName := range names {
		op, known := vastOps[opName]
		if !known {
			return nil, suanli.FieldErrorf(field, "unknown operator %q: use eq, neq, lt, lte, gt, gte, in or notin", opName)
		}
		c, err := h.translateOp(field, op, ops[opName], typ)
		if err != nil {
			return nil, err
		}
		if c != "" {
			out = append(out, c)
		}
	}
	return out, nil
}

var countryCode = regexp.MustCompile(`^[A-Za-z]{2}$`)

func (h *Handler) translateOp(field string, op market.Op, raw json.RawMessage, typ string) (string, error) {
	list := op == market.OpIn || op == market.OpNotIn
	var items []json.RawMessage
	if list {
		if err := json.Unmarshal(raw, &items); err != nil {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return "", suanli.FieldErrorf(field, "%s wants a list, got %s", op, abbrev(raw))
			}
			for _, part := range strings.Split(s, ",") {
				b, _ := json.Marshal(strings.TrimSpace(part))
				items = append(items, b)
			}
		}
		if len(items) == 0 {
			return "", suanli.FieldErrorf(field, "%s needs at least one value", op)
		}
	} else {
		if isNull(raw) {
			return "", suanli.FieldErrorf(field, "null is not a value to compare with")
		}
		items = []json.RawMessage{raw}
	}

	// Filters that are Vast's alone.
	switch field {
	case "external", "rented":
		// Suanli has no external (third-party cloud) offers, and an offer is
		// never "rented" by the caller in Vast's sense (a conflict with one's
		// own stopped instance): both are false for every offer.
		holds, err := boolCondHolds(field, op, items, false)
		if err != nil {
			return "", err
		}
		if holds {
			return "", nil
		}
		return nothing, nil
	case "verified":
		if !h.cfg.HonorVerified && !list {
			if b, err := toBool(field, items[0]); err == nil && b == (op == market.OpEQ) {
				return "", nil // see Config.HonorVerified
			}
		}
	}
	for _, v := range vastOnly {
		if field == v {
			return "", suanli.FieldErrorf(field, "this marketplace does not record %s; drop the condition (Suanli's fields: %s)", field, strings.Join(market.Fields(), " "))
		}
	}

	sf, known := searchFields[field]
	if !known {
		if !isNativeField(field) {
			return "", suanli.FieldErrorf(field, "unknown search field; Vast fields served here: %s; Suanli's own: %s", strings.Join(knownVastFields(), " "), strings.Join(market.Fields(), " "))
		}
		sf = searchField{native: field, kind: nativeKind(field)}
	}
	if typ == typeBid && sf.native == "dph_total" {
		sf.native = "min_bid" // an interruptible rental pays its bid, at least the minimum
	}
	if field == "geolocation" {
		codes := true
		for _, it := range items {
			var s string
			codes = codes && json.Unmarshal(it, &s) == nil && countryCode.MatchString(strings.TrimSpace(s))
		}
		if codes {
			sf.native = "country" // Vast filters geolocation by ISO country code
		}
	}
	vals := make([]string, 0, len(items))
	for _, it := range items {
		vop, v, err := formatValue(field, sf, op, it)
		if err != nil {
			return "", err
		}
		if v == "" {
			if list {
				continue // a fraction is never in a list of whole numbers
			}
			return nothing, nil // nor equal to one
		}
		if !list {
			return sf.native + string(vop) + v, nil
		}
		vals = append(vals, v)
	}
	if len(vals) == 0 {
		if op == market.OpNotIn {
			return "", nil
		}
		return nothing, nil
	}
	return sf.native + " " + string(op) + " [" + strings.Join(vals, ",") + "]", nil
}

// boolCondHolds reports whether value v satisfies "field op items".
func boolCondHolds(field string, op market.Op, items []json.RawMessage, v bool) (bool, error) {
	in := false
	for _, it := range items {
		b, err := toBool(field, it)
		if err != nil {
			return false, err
		}
		in = in || b == v
	}
	switch op {
	case market.OpEQ, market.OpIn:
		return in, nil
	case market.OpNE, market.OpNotIn:
		return !in, nil
	}
	return false, suanli.FieldErrorf(field, "a true/false field takes eq, neq, in or notin, not %s", op)
}

// formatValue writes one Vast value in the query language, with the
// operator to use: a whole-number field compared with a fraction moves the
// operator to the next whole number (cpu_cores>=3.5 is cpu_cores>=4). The
// value is "" when equality with a fraction is asked, which never holds.
func formatValue(field string, sf searchField, op market.Op, raw json.RawMessage) (market.Op, string, error) {
	switch sf.kind {
	case kindBool:
		b, err := toBool(field, raw)
		if err != nil {
			return op, "", err
		}
		return op, strconv.FormatBool(b), nil
	case kindString:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			var n json.Number
			if json.Unmarshal(raw, &n) != nil {
				return op, "", suanli.FieldErrorf(field, "want text, got %s", abbrev(raw))
			}
			s = n.String()
		}
		if field == "driver_version" {
			s = dottedDriver(s)
		}
		v, err := quote(field, s)
		return op, v, err
	case kindMoney:
		n, err := toNumber(field, raw)
		if err != nil {
			return op, "", err
		}
		m, err := n.money(field)
		if err != nil {
			return op, "", err
		}
		return op, m.Decimal(), nil
	}
	n, err := toNumber(field, raw)
	if err != nil {
		return op, "", err
	}
	f := n.float()
	if sf.div != 0 {
		f /= sf.div
	}
	if sf.kind == kindFloat {
		return op, strconv.FormatFloat(f, 'f', -1, 64), nil
	}
	if f == math.Trunc(f) {
		return op, strconv.FormatInt(int64(f), 10), nil
	}
	switch op {
	case market.OpGE, market.OpGT:
		return market.OpGE, strconv.FormatInt(int64(math.Ceil(f)), 10), nil
	case market.OpLE, market.OpLT:
		return market.OpLE, strconv.FormatInt(int64(math.Floor(f)), 10), nil
	case market.OpNE:
		return market.OpGE, "0", nil // every count differs from a fraction
	}
	return op, "", nil
}

// dottedDriver turns the CLI's numeric driver version (535086005, from
// "535.86.05") back into the dotted form Suanli stores.
func dottedDriver(s string) string {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1_000_000 {
		return s
	}
	return fmt.Sprintf("%d.%d.%02d", n/1_000_000, n/1000%1000, n%1000)
}

func quote(field, s string) (string, error) {
	switch {
	case !strings.Contains(s, `"`):
		return `"` + s + `"`, nil
	case !strings.Contains(s, `'`):
		return `'` + s + `'`, nil
	}
	return "", suanli.FieldErrorf(field, "a value cannot hold both ' and \"")
}

func isNativeField(name string) bool {
	for _, f := range market.Fields() {
		if f == name {
			return true
		}
	}
	return false
}

// nativeKind is the kind of a Suanli field named in a Vast body.
func nativeKind(name string) fieldKind {
	switch name {
	case "simulated", "green":
		return kindBool
	case "hostname", "tier", "country", "region", "host_status", "end_date":
		return kindString
	case "gpu_price", "cpu_price", "ram_price":
		return kindMoney
	case "total_gpus", "preempt_grace_s":
		return kindInt
	}
	return kindFloat
}

func knownVastFields() []string {
	out := make([]string, 0, len(searchFields)+2)
	for k := range searchFields {
		out = append(out, k)
	}
	out = append(out, "external", "rented")
	sort.Strings(out)
	return out
}

// translateOrder turns [["dph_total","asc"], …] into "dph_total,…".
func translateOrder(raw json.RawMessage, typ string) (string, error) {
	if raw == nil || isNull(raw) {
		return "", nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		var one string
		if json.Unmarshal(raw, &one) != nil {
			return "", suanli.FieldErrorf("order", "want a list of [field, \"asc\"|\"desc\"] pairs, got %s", abbrev(raw))
		}
		pairs = [][]string{{one}}
	}
	var keys []string
	for _, p := range pairs {
		if len(p) == 0 || len(p) > 2 {
			return "", suanli.FieldErrorf("order", "want [field, \"asc\"|\"desc\"], got %v", p)
		}
		name := strings.TrimRight(strings.TrimLeft(p[0], "+-"), "+-")
		desc := strings.HasSuffix(p[0], "-") || strings.HasPrefix(p[0], "-")
		if len(p) == 2 {
			switch strings.ToLower(p[1]) {
			case "asc", "":
				desc = false
			case "desc":
				desc = true
			default:
				return "", suanli.FieldErrorf("order", "%q: the direction is asc or desc", p[1])
			}
		}
		native := name
		if sf, ok := searchFields[name]; ok {
			native = sf.native
		} else if !isNativeField(name) {
			return "", suanli.FieldErrorf("order", "cannot sort by %q: sort by one of %s", name, strings.Join(knownVastFields(), " "))
		}
		if typ == typeBid && native == "dph_total" {
			native = "min_bid"
		}
		if desc {
			native += "-"
		}
		keys = append(keys, native)
	}
	return strings.Join(keys, ","), nil
}

func (h *Handler) registerOfferRoutes() {
	h.handle(http.MethodGet, "/api/v0/gpu_names/unique", "", h.handleGPUNames)
	h.handle(http.MethodPost, "/api/v0/bundles", catMisc, h.handleSearch, asRead)
	h.handle(http.MethodPut, "/api/v0/bundles", catMisc, h.handleSearch, asRead)
	h.handle(http.MethodPut, "/api/v0/search/asks", catMisc, h.handleSearch, asRead)
	h.handle(http.MethodGet, "/api/v0/bundles", catMisc, h.handleSearchGET)
}

// handleGPUNames answers the CLI's start-up call (no credential): the GPU
// models listed on this marketplace.
func (h *Handler) handleGPUNames(w http.ResponseWriter, r *http.Request, _ args) error {
	names := map[string]bool{}
	for off := 0; ; off += market.MaxLimit {
		res, err := h.svc.Index.Search(suanli.OfferQuery{Query: "rentable=any", Limit: market.MaxLimit, Offset: off}, h.svc.ViewerAll())
		if err != nil {
			return err
		}
		for _, o := range res.Offers {
			if o.GPUName != "" {
				names[o.GPUName] = true
			}
		}
		if off+len(res.Offers) >= res.Total || len(res.Offers) == 0 {
			break
		}
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	return writeJSON(w, http.StatusOK, map[string]any{"gpu_names": list})
}

func (h *Handler) handleSearch(w http.ResponseWriter, r *http.Request, _ args) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return h.search(w, r, body)
}

// handleSearchGET serves the oldest clients: GET /bundles?q={…}.
func (h *Handler) handleSearchGET(w http.ResponseWriter, r *http.Request, _ args) error {
	body, err := parseObj("q", []byte(r.URL.Query().Get("q")))
	if err != nil {
		return err
	}
	return h.search(w, r, body)
}

func (h *Handler) search(w http.ResponseWriter, r *http.Request, body obj) error {
	s, err := h.translateSearch(body)
	if err != nil {
		return err
	}
	res, err := h.svc.SearchOffers(r.Context(), s.q)
	if err != nil {
		return renameFields(err, map[string]string{"storage_gb": "allocated_storage"})
	}
	offers := make([]map[string]any, len(res.Offers))
	for i, o := range res.Offers {
		offers[i] = offerJSON(o, s.typ)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"offers": offers})
}

// offerJSON is an offer in Vast's names and units: RAM in MB, duration in
// seconds, money in dollars. For type bid, dph_total is what an
// interruptible rental at the minimum bid costs.
func offerJSON(o *suanli.Offer, typ string) map[string]any {
	storageHour := o.DPHTotal - o.DPHBase
	base, total := o.DPHBase, o.DPHTotal
	if typ == typeBid {
		base, total = o.MinBid, o.MinBid+storageHour
	}
	verification := "unverified"
	if o.Verified {
		verification = "verified"
	}
	var frac float64
	if o.TotalGPUs > 0 {
		frac = float64(o.NumGPUs) / float64(o.TotalGPUs)
	}
	return map[string]any{
		"id": o.ID, "ask_contract_id": o.ID, "bundle_id": o.ID, "machine_id": o.MachineID, "host_id": o.HostID,
		"hostname": o.Hostname, "num_gpus": o.NumGPUs, "total_gpus": o.TotalGPUs, "gpu_frac": frac,
		"gpu_name": o.GPUName, "gpu_arch": nullIfEmpty(o.GPUArch),
		"gpu_ram": o.GPURAM * mbPerGB, "gpu_total_ram": o.GPUTotalRAM * mbPerGB, "gpu_totalram": o.GPUTotalRAM * mbPerGB,
		"compute_cap": o.ComputeCap, "cuda_max_good": o.CUDAVersion, "driver_version": o.DriverVersion,
		"cpu_name": o.CPUName, "cpu_arch": o.CPUArch, "cpu_cores": o.CPUCores, "cpu_cores_effective": float64(o.CPUCores),
		"cpu_ram": o.CPURAM * mbPerGB, "cpu_ghz": nil, "pcie_bw": nil, "gpu_mem_bw": nil, "bw_nvlink": nil,
		"disk_space": o.DiskSpace, "disk_bw": o.DiskBW, "inet_up": o.InetUp, "inet_down": o.InetDown,
		"inet_up_cost": dollars(o.InetUpCost), "inet_down_cost": dollars(o.InetDownCost),
		"dph_base": dollars(base), "dph_total": dollars(total), "discounted_dph_total": dollars(total),
		"min_bid": dollars(o.MinBid), "storage_cost": dollars(o.StorageCost), "storage_total_cost": dollars(storageHour),
		"is_bid": typ == typeBid, "reliability": o.Reliability, "reliability2": o.Reliability,
		"verified": o.Verified, "verification": verification, "rentable": o.Rentable, "rented": false, "external": false,
		"datacenter": o.Datacenter, "hosting_type": boolInt(o.Datacenter), "geolocation": geolocation(o.Geolocation, o.Country),
		"country": o.Country, "region": o.Region, "tier": o.Tier, "simulated": o.Simulated,
		"dlperf": o.DLPerf, "dlperf_per_dphtotal": o.DLPerfPerDPH, "score": o.Score,
		"total_flops": o.TotalFlops, "flops_per_dphtotal": o.FlopsPerDPH,
		"duration": o.Duration * secondsIn1Day, "end_date": epochPtr(o.EndDate),
		"static_ip": o.StaticIP, "direct_port_count": o.DirectPortCount,
		"carbon_intensity": o.CarbonIntensity, "green": o.Green, "host_status": o.HostStatus,
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// geolocation is what Vast shows: the place, else the country code.
func geolocation(place, country string) any {
	if place != "" {
		return place
	}
	return nullIfEmpty(country)
}
