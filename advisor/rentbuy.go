package advisor

import (
	"fmt"
	"math/big"
	"math/bits"

	"github.com/suanli/suanli"
)

// RuleMonths is the device life in the issue's rule of thumb: "device cost =
// purchase price / (36 months × monthly utilisation)".
const RuleMonths = 36

// HoursPerMonth is the average month (8760 h / 12), the cloud convention
// suanli.MicrosPerMonth also uses.
const HoursPerMonth = 730

// RentVsBuyInput is a rent-or-buy question. Money is exact; utilisation is
// in basis points (5000 = 50%).
//
// Hourly is the rent per instance-hour and Hours the hours each instance
// runs per month. HardwarePrice is the purchase price of all the hardware
// that would replace the rented instances, and PowerWatts its draw under
// load (both for the whole purchase, not per instance). Months is the
// device life (36 when 0). UtilizationBP is the share of the month the
// owned hardware would be busy; 0 derives it from Hours/730. KWhPrice and
// PowerWatts may be 0 (no power cost).
type RentVsBuyInput struct {
	Hourly        suanli.Money `json:"hourly"`
	Hours         int64        `json:"hours"`
	Instances     int64        `json:"instances"`
	HardwarePrice suanli.Money `json:"hardware_price"`
	Months        int64        `json:"months"`
	UtilizationBP int64        `json:"utilization_bp"`
	PowerWatts    int64        `json:"power_watts"`
	KWhPrice      suanli.Money `json:"kwh_price"`
}

// RuleOfThumb is the rule, computed as written:
//
//	rent total  = hourly price × hours × instances
//	device cost = purchase price / (months × monthly utilisation)
//	consider buying when rent total > 2 × device cost
//
// Our reading: Hours are per month, so rent total is a monthly bill; device
// cost is the purchase spread over its life (36 months unless Months says
// otherwise) and divided by the utilisation, i.e. what each month of busy
// time costs when the hardware is busy only that share of the month. Both
// sides are per month. "Purchase price" is the price of everything bought,
// so the instance count appears on the rent side only. The comparison is
// strict and exact (cross-multiplied in integers), so at exactly 2× the
// rule does not yet suggest buying; DeviceCost is shown rounded down to
// the micro-unit.
type RuleOfThumb struct {
	RentTotal      suanli.Money `json:"rent_total"`
	DeviceCost     suanli.Money `json:"device_cost"`
	Threshold      suanli.Money `json:"threshold"` // 2 × DeviceCost
	ConsiderBuying bool         `json:"consider_buying"`
	Explanation    string       `json:"explanation"`
}

// TCO is the fuller total cost of ownership over the device life: straight
// depreciation to zero and electricity, against renting the same hours.
// BreakEvenMonth is the first month by whose end the rent paid has covered
// the purchase and the power so far (m × rent ≥ price + m × power); 0 means
// never (power alone costs as much as the rent).
type TCO struct {
	Months          int64        `json:"months"`
	RentMonthly     suanli.Money `json:"rent_monthly"`
	Depreciation    suanli.Money `json:"depreciation_monthly"`
	PowerMonthly    suanli.Money `json:"power_monthly"`
	OwnMonthly      suanli.Money `json:"own_monthly"` // Depreciation + PowerMonthly
	KWhMonthly      float64      `json:"kwh_monthly"`
	RentOverLife    suanli.Money `json:"rent_over_life"`
	OwnOverLife     suanli.Money `json:"own_over_life"` // price + power × months
	Savings         suanli.Money `json:"savings"`       // RentOverLife − OwnOverLife: > 0 means buying saves
	BreakEvenMonth  int64        `json:"break_even_month"`
	PaysBackInLife  bool         `json:"pays_back_in_life"`
	Verdict         string       `json:"verdict"`
	NotIncluded     string       `json:"not_included"`
	UtilizationBP   int64        `json:"utilization_bp"`
	UtilizationNote string       `json:"utilization_note,omitempty"`
}

// Input limits that keep every product far inside int64 micro-units.
const (
	maxKWhPrice      = suanli.Money(1000) * suanli.Micro
	maxHardwarePrice = suanli.Money(100_000_000) * suanli.Micro
)

// RentVsBuyResult holds both answers.
type RentVsBuyResult struct {
	Input RentVsBuyInput `json:"input"` // with defaults filled in
	Rule  RuleOfThumb    `json:"rule_of_thumb"`
	TCO   TCO            `json:"tco"`
}

// RentVsBuy answers a rent-or-buy question with the rule of thumb
// and a fuller TCO. It returns EINVALID naming the field when an input is
// out of range (Hours 1..744, Instances ≥ 1, Months 1..240, utilisation
// 1..10000 bp, no negative money or watts) or when the amounts overflow.
func RentVsBuy(in RentVsBuyInput) (*RentVsBuyResult, error) {
	var utilNote string
	if in.Months == 0 {
		in.Months = RuleMonths
	}
	if in.Instances == 0 {
		in.Instances = 1
	}
	switch {
	case in.Hourly <= 0:
		return nil, suanli.FieldErrorf("hourly", "the rent per instance-hour must be above zero, e.g. --hourly 2.50")
	case in.Hours < 1 || in.Hours > 744:
		return nil, suanli.FieldErrorf("hours", "%d: give the hours each instance runs per month, 1 to 744", in.Hours)
	case in.Instances < 1 || in.Instances > 1_000_000:
		return nil, suanli.FieldErrorf("instances", "%d: give 1 to 1,000,000 instances", in.Instances)
	case in.HardwarePrice <= 0:
		return nil, suanli.FieldErrorf("hardware-price", "the purchase price must be above zero, e.g. --hardware-price 30000")
	case in.Months < 1 || in.Months > 240:
		return nil, suanli.FieldErrorf("months", "%d: give the device life in months, 1 to 240", in.Months)
	case in.UtilizationBP < 0 || in.UtilizationBP > 10000:
		return nil, suanli.FieldErrorf("utilization", "%s: give a share of the month between 0 and 1 (or 0%% to 100%%)", FormatBP(in.UtilizationBP))
	case in.PowerWatts < 0 || in.PowerWatts > 10_000_000:
		return nil, suanli.FieldErrorf("power-watts", "%d: give the draw in watts, 0 to 10,000,000", in.PowerWatts)
	case in.KWhPrice < 0 || in.KWhPrice > maxKWhPrice:
		return nil, suanli.FieldErrorf("kwh-price", "%s: give the electricity price per kWh, 0 to %s", in.KWhPrice, maxKWhPrice)
	case in.Hourly > MaxHourly:
		return nil, suanli.FieldErrorf("hourly", "%s an hour is over the %s limit", in.Hourly, MaxHourly)
	case in.HardwarePrice > maxHardwarePrice:
		return nil, suanli.FieldErrorf("hardware-price", "%s is over the %s limit", in.HardwarePrice, maxHardwarePrice)
	}
	if in.UtilizationBP == 0 {
		in.UtilizationBP = min(10000, in.Hours*10000/HoursPerMonth)
		utilNote = fmt.Sprintf("utilisation not given: %d h of %d h in a month = %s", in.Hours, HoursPerMonth, FormatBP(in.UtilizationBP))
		if in.UtilizationBP == 0 {
			in.UtilizationBP = 1
		}
	}

	r := &RentVsBuyResult{Input: in}
	rent, ok := mulMoney(in.Hourly, in.Hours, in.Instances)
	if !ok {
		return nil, suanli.FieldErrorf("hourly", "hourly × hours × instances is too large")
	}
	rule := RuleOfThumb{RentTotal: rent}
	rule.DeviceCost = suanli.MulDiv(in.HardwarePrice, 10000, in.Months*in.UtilizationBP)
	rule.Threshold = suanli.MulDiv(in.HardwarePrice, 2*10000, in.Months*in.UtilizationBP) // not 2 × the rounded device cost
	// rent > 2 × price / (months × util/10000)
	//   ⟺ rent × months × util > 2 × price × 10000, exactly.
	lhs := new(big.Int).Mul(big.NewInt(int64(rent)), big.NewInt(in.Months*in.UtilizationBP))
	rhs := new(big.Int).Mul(big.NewInt(int64(in.HardwarePrice)), big.NewInt(2*10000))
	rule.ConsiderBuying = lhs.Cmp(rhs) > 0
	cmp := "≤"
	if rule.ConsiderBuying {
		cmp = ">"
	}
	rule.Explanation = fmt.Sprintf("rent total %s/month (%s × %d h × %d) %s 2 × device cost %s (%s / (%d months × %s utilisation) = %s): %s",
		rent, in.Hourly, in.Hours, in.Instances, cmp, rule.Threshold, in.HardwarePrice, in.Months, FormatBP(in.UtilizationBP), rule.DeviceCost,
		map[bool]string{true: "consider buying", false: "keep renting"}[rule.ConsiderBuying])
	r.Rule = rule

	t := TCO{Months: in.Months, RentMonthly: rent, UtilizationBP: in.UtilizationBP, UtilizationNote: utilNote}
	t.Depreciation = suanli.MulDiv(in.HardwarePrice, 1, in.Months)
	// kWh price × watts × hours / 1000, rounded down to the micro-unit.
	t.PowerMonthly = suanli.MulDiv(in.KWhPrice, in.PowerWatts*in.Hours, 1000)
	t.KWhMonthly = float64(in.PowerWatts*in.Hours) / 1000
	t.OwnMonthly = t.Depreciation + t.PowerMonthly
	var ok1, ok2 bool
	t.RentOverLife, ok1 = mulMoney(rent, in.Months, 1)
	powerLife, ok2 := mulMoney(t.PowerMonthly, in.Months, 1)
	if !ok1 || !ok2 {
		return nil, suanli.FieldErrorf("months", "the amounts over %d months are too large", in.Months)
	}
	t.OwnOverLife = in.HardwarePrice + powerLife
	t.Savings = t.RentOverLife - t.OwnOverLife
	if margin := rent - t.PowerMonthly; margin > 0 {
		// smallest m with m × margin ≥ price
		t.BreakEvenMonth = max(1, int64((in.HardwarePrice+margin-1)/margin))
		t.PaysBackInLife = t.BreakEvenMonth <= in.Months
	}
	t.NotIncluded = "not included: hosting or colocation, networking, cooling beyond the power draw, repairs, staff time, financing and resale value"
	t.Verdict = verdict(t, rule)
	r.TCO = t
	return r, nil
}

func verdict(t TCO, rule RuleOfThumb) string {
	var v string
	tcoRents := t.BreakEvenMonth == 0 || !t.PaysBackInLife
	switch {
	case t.BreakEvenMonth == 0:
		v = fmt.Sprintf("Rent. Power alone (%s/month) costs as much as renting (%s/month), so the purchase never pays back.", t.PowerMonthly, t.RentMonthly)
	case !t.PaysBackInLife:
		v = fmt.Sprintf("Rent. Renting costs %s/month; the purchase would pay for itself only in month %d, after its %d-month life.", t.RentMonthly, t.BreakEvenMonth, t.Months)
	case t.BreakEvenMonth*3 > t.Months*2:
		v = fmt.Sprintf("Close call. The purchase pays for itself in month %d of %d, which leaves little margin for idle months, repairs or a cheaper next generation; over %d months owning costs %s against %s renting.", t.BreakEvenMonth, t.Months, t.Months, t.OwnOverLife, t.RentOverLife)
	default:
		v = fmt.Sprintf("Buy. The purchase pays for itself in month %d of %d; over %d months owning costs %s (%s/month with power) against %s renting, saving %s.", t.BreakEvenMonth, t.Months, t.Months, t.OwnOverLife, t.OwnMonthly, t.RentOverLife, t.Savings)
	}
	switch {
	case tcoRents && !rule.ConsiderBuying:
		return v + " The rule of thumb agrees: keep renting."
	case !tcoRents && rule.ConsiderBuying && t.BreakEvenMonth*3 <= t.Months*2:
		return v + " The rule of thumb agrees: consider buying."
	case rule.ConsiderBuying:
		return v + " The rule of thumb would consider buying."
	default:
		return v + " The rule of thumb, which wants rent above twice the utilisation-adjusted device cost, says keep renting."
	}
}

// mulMoney returns m × a × b, and false when it does not fit in a Money.
// m, a and b must not be negative.
func mulMoney(m suanli.Money, a, b int64) (suanli.Money, bool) {
	hi, lo := bits.Mul64(uint64(m), uint64(a))
	if hi != 0 || lo > 1<<63-1 {
		return 0, false
	}
	hi, lo = bits.Mul64(lo, uint64(b))
	if hi != 0 || lo > 1<<63-1 {
		return 0, false
	}
	return suanli.Money(lo), true
}

// ParseBP reads a ratio as a fraction ("0.5", "0.125") or a percentage
// ("50%", "12.5%") into basis points (5000, 1250). Finer than a basis point
// is an error, not a rounding.
func ParseBP(s string) (int64, error) {
	t := s
	pct := false
	if n := len(t); n > 0 && t[n-1] == '%' {
		pct, t = true, t[:n-1]
	}
	// Reuse the exact decimal parser: "0.5" → 500000 micro-units.
	m, err := suanli.ParseMoney(t)
	if err != nil || m < 0 || len(t) > 0 && (t[0] == '$' || t[0] == '+') {
		return 0, fmt.Errorf("%q is not a ratio: write it like 0.5 or 50%%", s)
	}
	scale := int64(100) // fraction: 1.0 = 1e6 micro = 10000 bp
	if pct {
		scale = 10000 // percent: 100% = 1e8 micro = 10000 bp
	}
	if int64(m)%scale != 0 {
		return 0, fmt.Errorf("%q is finer than a basis point (0.0001)", s)
	}
	return int64(m) / scale, nil
}

// FormatBP writes basis points as a percentage: 5000 → "50%", 1250 → "12.5%".
func FormatBP(bp int64) string {
	sign := ""
	if bp < 0 {
		sign, bp = "-", -bp
	}
	s := fmt.Sprintf("%s%d", sign, bp/100)
	if f := bp % 100; f != 0 {
		s += fmt.Sprintf(".%02d", f)
		s = trimZeros(s)
	}
	return s + "%"
}

func trimZeros(s string) string {
	for len(s) > 0 && s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	return s
}
