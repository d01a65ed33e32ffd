package suanli_test

import (
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/suanli/suanli"
)

func TestParseMoney(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want suanli.Money
		err  bool
	}{
		{"0.3", 300_000, false}, {"$0.30", 300_000, false}, {"1.25/h", 1_250_000, false}, {"$0.10/GB", 100_000, false},
		{"-2", -2_000_000, false}, {".5", 500_000, false}, {"0.000001", 1, false}, {"12", 12_000_000, false},
		{"0.0000001", 0, true}, {"abc", 0, true}, {"", 0, true}, {"1.2.3", 0, true}, {"$", 0, true}, {"1e3", 0, true},
	} {
		got, err := suanli.ParseMoney(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseMoney(%q) = %d, %v; want %d, err %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	for _, m := range []suanli.Money{0, 1, 300_000, -1_050_000, 123_456_789} {
		back, err := suanli.ParseMoney(m.String())
		if err != nil || back != m {
			t.Errorf("ParseMoney(%q) = %d, %v; want %d", m.String(), back, err, m)
		}
	}
}

// TestAccrueCarriesRemainder checks the DESIGN §4 rule: a million one-second
// charges sum exactly to the one-hour charge's share, and random splits of
// an interval sum to the charge for the whole, against math/big.
func TestAccrueCarriesRemainder(t *testing.T) {
	rate := suanli.Money(333_333) // $0.333333/h: does not divide evenly
	var sum suanli.Money
	var rem int64
	for i := 0; i < 3600; i++ {
		var a suanli.Money
		a, rem = suanli.Accrue(rate, suanli.MicrosPerSecond, suanli.MicrosPerHour, rem)
		sum += a
	}
	if sum != rate {
		t.Fatalf("3600 one-second accruals = %d, want exactly %d", sum, rate)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		rate := suanli.Money(rng.Int64N(50_000_000))
		var total int64
		var sum suanli.Money
		var rem int64
		for i := 0; i < 500; i++ {
			d := rng.Int64N(10 * suanli.MicrosPerSecond)
			total += d
			a, r := suanli.Accrue(rate, d, suanli.MicrosPerHour, rem)
			sum, rem = sum+a, r
		}
		want := new(big.Int).Mul(big.NewInt(int64(rate)), big.NewInt(total))
		want.Quo(want, big.NewInt(suanli.MicrosPerHour))
		if want.Int64() != int64(sum) {
			t.Fatalf("rate %d over %d µs in pieces = %d, big oracle %s", rate, total, sum, want)
		}
	}
}

func TestMulDiv(t *testing.T) {
	if got := suanli.MulDiv(suanli.Dollars(1_000_000_000), 1<<40, 1<<40); got != suanli.Dollars(1_000_000_000) {
		t.Errorf("MulDiv overflowed: %d", got)
	}
	if got := suanli.MulDiv(-1_000_000, 1, 3); got != -333_333 {
		t.Errorf("MulDiv(-1, 1, 3) = %d", got)
	}
}
