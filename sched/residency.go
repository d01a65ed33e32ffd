package sched

import (
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
	where := func() string {
		switch {
		case m.Country != "" && m.Region != "":
			return m.Country + " (" + m.Region + ")"
		case m.Country != "":
			return m.Country
		case m.Region != "":
			return "region " + m.Region
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
	if !residencyAllows(account, m.Country, m.Region) {
		return suanli.Errorf(suanli.EFORBIDDEN, "offer %d is in %s; your account allows only %s: %s", m.ID, where(), strings.Join(account, ", "), hint(account))
	}
	if !residencyAllows(rental, m.Country, m.Region) {
		return suanli.Errorf(suanli.EFORBIDDEN, "offer %d is in %s; this rental allows only %s: %s", m.ID, where(), strings.Join(rental, ", "), hint(rental))
	}
	return nil
}
