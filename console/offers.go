package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/market"
)

// offersPageSize is how many offers one page of the table shows.
const offersPageSize = 50

func (c *Console) registerOfferRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", c.page(c.handleOffers))
	mux.HandleFunc("GET /offers/{id}", c.page(c.handleOffer))
	mux.HandleFunc("GET /offers/{id}/rent", c.page(c.handleRentForm))
	mux.HandleFunc("POST /offers/{id}/rent", c.form(c.handleRent))
}

// offerFilters are the offers page's inputs, as typed. They become query
// language conditions appended to the free-text query, so the page teaches
// the language the CLI and API speak.
type offerFilters struct {
	Q           string // free query text
	GPU         string // GPU model
	VRAM        string // least GB per GPU
	GPUs        string // least free GPUs
	Price       string // most per hour (dph, or min_bid when interruptible)
	Region      string
	Reliability string // least, in percent
	Type        string // on-demand | interruptible
	Storage     string // GB priced into dph_total
	Order       string
	Offset      int
}

func readFilters(v url.Values) offerFilters {
	f := offerFilters{Q: v.Get("q"), GPU: v.Get("gpu"), VRAM: v.Get("vram"), GPUs: v.Get("gpus"), Price: v.Get("price"),
		Region: v.Get("region"), Reliability: v.Get("reliability"), Type: v.Get("type"), Storage: v.Get("storage"), Order: v.Get("order")}
	f.Offset, _ = strconv.Atoi(v.Get("offset"))
	f.Offset = max(f.Offset, 0)
	return f
}

// values returns f as URL parameters (empty ones left out).
func (f offerFilters) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"q": f.Q, "gpu": f.GPU, "vram": f.VRAM, "gpus": f.GPUs, "price": f.Price,
		"region": f.Region, "reliability": f.Reliability, "type": f.Type, "storage": f.Storage, "order": f.Order} {
		if strings.TrimSpace(s) != "" {
			v.Set(k, s)
		}
	}
	if f.Offset > 0 {
		v.Set("offset", strconv.Itoa(f.Offset))
	}
	return v
}

// quoteText writes a text value for the query language, quoted so that
// spaces and underscores mean themselves.
func quoteText(field, s string) (string, error) {
	switch {
	case !strings.Contains(s, `"`):
		return `"` + s + `"`, nil
	case !strings.Contains(s, `'`):
		return `'` + s + `'`, nil
	}
	return "", suanli.FieldErrorf(field, "%q has both kinds of quote: remove them", s)
}

// query turns the filters into an OfferQuery. Errors are EINVALID naming
// the filter input at fault.
func (f offerFilters) query() (suanli.OfferQuery, error) {
	q := suanli.OfferQuery{Order: strings.TrimSpace(f.Order), Offset: f.Offset, Limit: offersPageSize}
	conds := []string{}
	if s := strings.TrimSpace(f.Q); s != "" {
		conds = append(conds, s)
	}
	if s := strings.TrimSpace(f.GPU); s != "" {
		v, err := quoteText("gpu", s)
		if err != nil {
			return q, err
		}
		conds = append(conds, "gpu_name="+v)
	}
	if s := strings.TrimSpace(f.VRAM); s != "" {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || x < 0 || x != x {
			return q, suanli.FieldErrorf("vram", "%q is not a size: give GB per GPU, such as 24", s)
		}
		conds = append(conds, "gpu_ram>="+formatNum(x))
	}
	if s := strings.TrimSpace(f.GPUs); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return q, suanli.FieldErrorf("gpus", "%q is not a GPU count: give a whole number such as 2", s)
		}
		conds = append(conds, "num_gpus>="+strconv.Itoa(n))
	}
	switch f.Type {
	case "", suanli.RentalOnDemand, suanli.RentalInterruptible:
	default:
		return q, suanli.FieldErrorf("type", "%q is not a rental type: choose on-demand or interruptible", f.Type)
	}
	if s := strings.TrimSpace(f.Price); s != "" {
		m, err := suanli.ParseMoney(s)
		if err != nil || m < 0 {
			return q, suanli.FieldErrorf("price", "%q is not a price per hour: write it like 0.50", s)
		}
		field := "dph"
		if f.Type == suanli.RentalInterruptible {
			field = "min_bid"
		}
		conds = append(conds, field+"<="+m.Decimal())
	}
	if s := strings.TrimSpace(f.Region); s != "" {
		v, err := quoteText("region", s)
		if err != nil {
			return q, err
		}
		conds = append(conds, "region="+v)
	}
	if s := strings.TrimSpace(f.Reliability); s != "" {
		x, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err != nil || x < 0 || x > 100 {
			return q, suanli.FieldErrorf("reliability", "%q is not a percentage from 0 to 100", s)
		}
		conds = append(conds, "reliability>="+strconv.FormatFloat(x/100, 'f', -1, 64))
	}
	if s := strings.TrimSpace(f.Storage); s != "" {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || x <= 0 || x != x {
			return q, suanli.FieldErrorf("storage", "%q is not a disk size: give GB, such as 50", s)
		}
		q.StorageGB = x
	}
	q.Query = strings.Join(conds, " ")
	return q, nil
}

// column is a sortable header of the offers table.
type column struct {
	Label string
	Key   string // the order field
	URL   string // the page sorted by this column (the other way when it already is)
	Sort  string // aria-sort: ascending, descending, or ""
	Num   bool   // right-aligned
	Opt   bool   // hidden on narrow screens
}

var offerColumns = []struct {
	label, key string
	num, opt   bool
}{
	{"ID", "id", true, false}, {"GPU", "gpu_name", false, false}, {"VRAM", "gpu_ram", true, false}, {"CPU", "cpu_cores", true, true},
	{"RAM", "cpu_ram", true, true}, {"Disk", "disk_space", true, true}, {"Net ↓/↑", "inet_down", true, true},
	{"Reliability", "reliability", true, true}, {"Region", "region", false, true}, {"DLPerf/$", "dlperf_per_dphtotal", true, true},
	{"Min bid", "min_bid", true, true}, {"Price", "dph", true, false},
}

func (f offerFilters) columns() []column {
	first, desc := "", false
	order := f.Order
	if strings.TrimSpace(order) == "" {
		order = market.DefaultOrder
	}
	if k, _, _ := strings.Cut(order, ","); k != "" {
		k = strings.TrimSpace(k)
		desc = strings.HasSuffix(k, "-")
		first = strings.TrimRight(k, "+-")
		if first == "dph_total" {
			first = "dph"
		}
	}
	var cols []column
	for _, oc := range offerColumns {
		col := column{Label: oc.label, Key: oc.key, Num: oc.num, Opt: oc.opt}
		next := oc.key
		if oc.key == first {
			col.Sort = "ascending"
			if desc {
				col.Sort = "descending"
			} else {
				next += "-"
			}
		}
		g := f
		g.Order, g.Offset = next, 0
		col.URL = "/?" + g.values().Encode()
		cols = append(cols, col)
	}
	return cols
}

// offersPage is the offers template's data.
type offersPage struct {
	F             offerFilters
	Query         string // the query the filters built, as the CLI would take it
	Offers        []*suanli.Offer
	Total         int
	From, To      int
	PrevURL       string
	NextURL       string
	Columns       []column
	Explain       *suanli.Explain
	Error         *fieldError
	GPUNames      []string
	Regions       []string
	Interruptible bool
	RentQuery     string // parameters carried to offer pages (rental type, storage)
}

// handleOffers is the home page: the market as a sortable table, filter
// controls over the query language, and, when nothing matches, which
// condition removed the offers.
func (c *Console) handleOffers(w http.ResponseWriter, r *http.Request, s *session) error {
	f := readFilters(r.URL.Query())
	p := offersPage{F: f, Columns: f.columns(), Interruptible: f.Type == suanli.RentalInterruptible}
	rent := url.Values{}
	if f.Type != "" {
		rent.Set("rental_type", f.Type)
	}
	if f.Storage != "" {
		rent.Set("disk_gb", f.Storage)
	}
	p.RentQuery = rent.Encode()
	p.GPUNames, p.Regions = c.marketNames(r)
	status := http.StatusOK
	q, err := f.query()
	if err == nil {
		p.Query = q.Query
		var res *suanli.OfferResult
		res, err = c.svc.SearchOffers(r.Context(), q)
		if err == nil {
			p.Offers, p.Total = res.Offers, res.Total
			if res.Total == 0 {
				q.Explain, q.Offset = true, 0
				if ex, err := c.svc.SearchOffers(r.Context(), q); err == nil {
					p.Explain = ex.Explain
				}
			}
		}
	}
	if err != nil {
		fe := formError(err)
		if fe == nil {
			return err
		}
		p.Error, status = fe, http.StatusBadRequest
	}
	if len(p.Offers) > 0 {
		p.From, p.To = f.Offset+1, f.Offset+len(p.Offers)
	}
	if f.Offset > 0 {
		g := f
		g.Offset = max(0, f.Offset-offersPageSize)
		p.PrevURL = "/?" + g.values().Encode()
	}
	if f.Offset+len(p.Offers) < p.Total {
		g := f
		g.Offset = f.Offset + offersPageSize
		p.NextURL = "/?" + g.values().Encode()
	}
	c.render(w, r, status, "offers.html", &view{Title: "Offers", Nav: "offers", sess: s, Notice: notice(r), Page: p})
	return nil
}

// marketNames returns the GPU models and regions on the market, for the
// filter inputs' suggestions.
func (c *Console) marketNames(r *http.Request) (gpus, regions []string) {
	res, err := c.svc.SearchOffers(r.Context(), suanli.OfferQuery{Query: "rentable=any", Limit: 1000})
	if err != nil {
		return nil, nil
	}
	for _, o := range res.Offers {
		if o.GPUName != "" && !slices.Contains(gpus, o.GPUName) {
			gpus = append(gpus, o.GPUName)
		}
		if o.Region != "" && !slices.Contains(regions, o.Region) {
			regions = append(regions, o.Region)
		}
	}
	slices.Sort(gpus)
	slices.Sort(regions)
	return gpus, regions
}

// quoteInputs are the quote form's inputs, as typed; names follow the
// API's QuoteRequest so that an error's field marks the input.
type quoteInputs struct {
	GPUs, Disk, Hours, Egress, Ingress, Type, Bid string
}

func readQuoteInputs(v url.Values) quoteInputs {
	return quoteInputs{GPUs: v.Get("num_gpus"), Disk: v.Get("disk_gb"), Hours: v.Get("hours"), Egress: v.Get("egress_gb"),
		Ingress: v.Get("ingress_gb"), Type: v.Get("rental_type"), Bid: v.Get("bid")}
}

// parseInt reads a whole number input; empty is def.
func parseInt(field, s string, def int64) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, suanli.FieldErrorf(field, "%q is not a whole number", s)
	}
	return n, nil
}

// parseFloat reads a decimal input (hours, GB); empty is def.
func parseFloat(field, s string, def float64) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return def, nil
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || x != x {
		return 0, suanli.FieldErrorf(field, "%q is not a number", s)
	}
	return x, nil
}

// request turns the inputs into the control plane's quote request for an
// offer. Errors are EINVALID naming the input.
func (in quoteInputs) request(offerID int64) (suanli.QuoteRequest, error) {
	q := suanli.QuoteRequest{InstanceCreate: suanli.InstanceCreate{OfferID: offerID, RentalType: in.Type}}
	gpus, err := parseInt("num_gpus", in.GPUs, 0)
	if err != nil {
		return q, err
	}
	q.GPUCount = int(max(min(gpus, 1<<20), -1))
	if q.DiskGB, err = parseInt("disk_gb", in.Disk, 0); err != nil {
		return q, err
	}
	if q.Hours, err = parseFloat("hours", in.Hours, 24); err != nil {
		return q, err
	}
	if q.EgressGB, err = parseFloat("egress_gb", in.Egress, 0); err != nil {
		return q, err
	}
	if q.IngressGB, err = parseFloat("ingress_gb", in.Ingress, 0); err != nil {
		return q, err
	}
	if in.Type == suanli.RentalInterruptible {
		b, err := suanli.ParseMoney(in.Bid)
		if err != nil {
			return q, suanli.FieldErrorf("bid", "%v", err)
		}
		q.Bid = &b
	}
	return q, nil
}

// findOffer returns offer id as the caller sees it (rentable for them,
// dph_total for diskGB), or ENOTFOUND.
func (c *Console) findOffer(r *http.Request, id, diskGB int64) (*suanli.Offer, error) {
	q := suanli.OfferQuery{Query: "id=" + strconv.FormatInt(id, 10) + " rentable=any", Limit: 1}
	if diskGB > 0 && diskGB <= maxDiskGB {
		q.StorageGB = float64(diskGB)
	}
	res, err := c.svc.SearchOffers(r.Context(), q)
	if err != nil {
		return nil, err
	}
	if len(res.Offers) == 0 {
		return c.svc.FindOfferByID(r.Context(), id) // its ENOTFOUND says what to do
	}
	return res.Offers[0], nil
}

// maxDiskGB bounds the disk size priced into an offer's dph_total (1 PB).
const maxDiskGB = 1_000_000

// offerPage is the offer detail template's data.
type offerPage struct {
	Offer     *suanli.Offer
	In        quoteInputs
	Quote     *suanli.Quote
	Error     *fieldError
	GPUChoice []int
	RentQuery string
	Disk      int64 // GB priced into the offer's dph_total
}

func gpuChoices(o *suanli.Offer) []int {
	var out []int
	for i := 1; i <= o.NumGPUs; i++ {
		out = append(out, i)
	}
	return out
}

// handleOffer shows one offer with the control plane's itemized quote for
// the chosen GPUs, disk, hours and traffic, and its pre-flight checks.
func (c *Console) handleOffer(w http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "offer")
	if err != nil {
		return err
	}
	in := readQuoteInputs(r.URL.Query())
	disk, _ := strconv.ParseInt(in.Disk, 10, 64)
	o, err := c.findOffer(r, id, disk)
	if err != nil {
		return err
	}
	p := offerPage{Offer: o, In: in, GPUChoice: gpuChoices(o), Disk: suanli.DefaultStorageGB}
	if disk > 0 && disk <= maxDiskGB {
		p.Disk = disk
	}
	status := http.StatusOK
	req, err := in.request(id)
	if err == nil {
		p.Quote, err = c.svc.Quote(r.Context(), req)
	}
	if err != nil {
		if p.Error = formError(err); p.Error == nil {
			return err
		}
		status = http.StatusBadRequest
	}
	rent := url.Values{}
	for k, v := range map[string]string{"num_gpus": in.GPUs, "disk_gb": in.Disk, "rental_type": in.Type, "bid": in.Bid} {
		if v != "" {
			rent.Set(k, v)
		}
	}
	p.RentQuery = rent.Encode()
	c.render(w, r, status, "offer.html", &view{Title: "Offer " + strconv.FormatInt(id, 10), Nav: "offers", sess: s, Page: p})
	return nil
}
