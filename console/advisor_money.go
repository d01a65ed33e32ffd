package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
)

// rentBuyInputs are the rent-or-buy form's inputs, as typed; names are
// the CLI's flags (advise rent-vs-buy), which the advisor's errors name.
type rentBuyInputs struct {
	Hourly, Hours, Instances, HardwarePrice, Months, Utilization, PowerWatts, KWhPrice string
}

func readRentBuyInputs(q url.Values) rentBuyInputs {
	return rentBuyInputs{Hourly: q.Get("hourly"), Hours: q.Get("hours"), Instances: q.Get("instances"), HardwarePrice: q.Get("hardware-price"),
		Months: q.Get("months"), Utilization: q.Get("utilization"), PowerWatts: q.Get("power-watts"), KWhPrice: q.Get("kwh-price")}
}

// rentBuyView is the rent-or-buy tool: the inputs and both answers.
type rentBuyView struct {
	In     rentBuyInputs
	Result *advisor.RentVsBuyResult
}

// PowerOverLife is the electricity over the device life: the own side's
// total less the purchase.
func (v *rentBuyView) PowerOverLife() suanli.Money {
	return v.Result.TCO.OwnOverLife - v.Result.Input.HardwarePrice
}

// advise reads the inputs (money exactly, as suanli.Money; the share of
// the month as basis points) and asks the advisor.
func (in rentBuyInputs) advise() (*advisor.RentVsBuyResult, error) {
	var a advisor.RentVsBuyInput
	for _, m := range []struct {
		field, text string
		dst         *suanli.Money
		required    bool
	}{{"hourly", in.Hourly, &a.Hourly, true}, {"hardware-price", in.HardwarePrice, &a.HardwarePrice, true}, {"kwh-price", in.KWhPrice, &a.KWhPrice, false}} {
		if strings.TrimSpace(m.text) == "" {
			if m.required {
				return nil, suanli.FieldErrorf(m.field, "give the rent per instance-hour, the hours per month and the hardware's price, e.g. 2.50, 300 and 30000")
			}
			continue
		}
		v, err := suanli.ParseMoney(m.text)
		if err != nil {
			return nil, suanli.FieldErrorf(m.field, "%v", err)
		}
		*m.dst = v
	}
	for _, n := range []struct {
		field, text string
		dst         *int64
	}{{"hours", in.Hours, &a.Hours}, {"instances", in.Instances, &a.Instances}, {"months", in.Months, &a.Months}, {"power-watts", in.PowerWatts, &a.PowerWatts}} {
		v, err := parseInt(n.field, n.text, 0)
		if err != nil {
			return nil, err
		}
		*n.dst = v
	}
	if a.Hours == 0 {
		return nil, suanli.FieldErrorf("hours", "give the hours each instance runs per month, 1 to 744")
	}
	if u := strings.TrimSpace(in.Utilization); u != "" {
		bp, err := advisor.ParseBP(u)
		if err != nil {
			return nil, suanli.FieldErrorf("utilization", "%v", err)
		}
		if bp == 0 {
			return nil, suanli.FieldErrorf("utilization", "0 means the hardware never runs: give a share above 0, e.g. 0.5")
		}
		a.UtilizationBP = bp
	}
	return advisor.RentVsBuy(a)
}

// compareInputs are the comparison form's inputs; names are the offers
// page's (q, order) and the CLI's (limit).
type compareInputs struct {
	Q, Limit, Order string
}

// compareView is the public-cloud comparison: each offer next to the
// cheapest instance of each provider with its GPU.
type compareView struct {
	In      compareInputs
	Result  *advisor.Comparison
	Catalog []advisor.CatalogRow // every price compared against, as `suanli catalog ls` lists them
}

// compare searches the offers and compares them with the catalog.
func (c *Console) compare(r *http.Request, v *compareView) error {
	limit, err := parseInt("limit", v.In.Limit, 10)
	if err != nil {
		return err
	}
	if limit < 1 || limit > 100 {
		return suanli.FieldErrorf("limit", "%d: compare 1 to 100 offers", limit)
	}
	res, err := c.svc.SearchOffers(r.Context(), suanli.OfferQuery{Query: v.In.Q, Order: strings.TrimSpace(v.In.Order), Limit: int(limit)})
	if err != nil {
		return queryError(err)
	}
	v.Result = advisor.Compare(res.Offers, v.Catalog, c.now().UTC())
	return nil
}

// catalog is the public-cloud price list: Config.Catalog's, else the
// built-in one.
func (c *Console) catalog() ([]advisor.CatalogRow, error) {
	if c.cfg.Catalog != nil {
		return c.cfg.Catalog()
	}
	return advisor.BuiltinCatalog(), nil
}
