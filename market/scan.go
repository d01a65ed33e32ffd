package market

import (
	"slices"

	"github.com/suanli/suanli"
)

// Scan runs a search over a plain slice of offers by checking every offer
// and sorting all matches: the simple reference that Index must agree with,
// and the naive baseline of the benchmark. It never modifies offers; the
// returned offers are copies carrying the derived fields. Errors are
// EINVALID, as for Index.Search.
func Scan(offers []*suanli.Offer, q suanli.OfferQuery, v Viewer) (*suanli.OfferResult, error) {
	s, err := prepare(q, v)
	if err != nil {
		return nil, err
	}
	var ex *explainer
	if s.explain {
		ex = newExplainer(s, len(offers))
	}
	var matched []*suanli.Offer
	for _, o := range offers {
		if ex != nil {
			if ex.add(o) {
				matched = append(matched, o)
			}
		} else if s.matches(o) {
			matched = append(matched, o)
		}
	}
	slices.SortFunc(matched, s.compare)
	res := &suanli.OfferResult{Offers: s.page(matched), Total: len(matched)}
	if ex != nil {
		res.Explain = ex.result(len(matched))
	}
	return res, nil
}
