package sched

import (
	"fmt"
	"slices"
	"strings"

	"github.com/suanli/suanli"
)

// residencyAllows reports whether a machine in country/region is in the
// list (countries as ISO 3166 alpha-2 codes, regions by name). An empty
// list allows anywhere; a machine whose country is unknown matches no
// country.
func residencyAllows(list []string, country, region string) bool {
	if len(list) == 0 {
		return true
	}
	return slices.ContainsFunc(list, func(v string) bool {
		return (country != "" && strings.EqualFold(v, country)) || (region != "" && strings.EqualFold(v, region))
	})
}

// CheckResidency refuses machine m when it lies outside the account's
// allowed countries/regions or the rental's own list (data residency,
// DESIGN §7), with a reason that names where the offer is and what is
// allowed: "offer 3 is in US; your account allows only DE, FR".
func CheckResidency(m *suanli.Machine, account, rental []string) error {
	if why := residencyWhy(m.ID, m.Country, m.Region, account, rental); why != "" {
		return suanli.Errorf(suanli.EFORBIDDEN, "%s", why)
	}
	return nil
}

// residencyWhy is CheckResidency's reason for an offer in country/region,
// or "" when both lists allow it; Schedule's residency step uses it too.
func residencyWhy(id int64, country, region string, account, rental []string) string {
	where := func() string {
		switch {
		case country != "" && region != "":
			return country + " (" + region + ")"
		case country != "":
			return country
		case region != "":
			return "region " + region
		}
		return "an unknown country"
	}
	hint := func(list []string) string {
		for _, v := range list {
			if len(v) != 2 {
				return "pick an offer there"
			}
		}
		return "pick an offer there: suanli search 'country in [" + strings.Join(list, ",") + "]'"
	}
	if !residencyAllows(account, country, region) {
		return fmt.Sprintf("offer %d is in %s; your account allows only %s: %s", id, where(), strings.Join(account, ", "), hint(account))
	}
	if !residencyAllows(rental, country, region) {
		return fmt.Sprintf("offer %d is in %s; this rental allows only %s: %s", id, where(), strings.Join(rental, ", "), hint(rental))
	}
	return ""
}
