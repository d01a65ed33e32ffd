package suanli_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/suanli/suanli"
)

func TestListingForRenters(t *testing.T) {
	l := suanli.Listing{PriceGPU: 400_001, PriceCPU: 20_000, PriceRAM: 5_001, PriceDisk: 100_000, PriceInetUp: 10_000, MinBid: 100_000, GreenDiscountBP: 1000}
	for _, tc := range []struct {
		name  string
		in    suanli.Listing
		green bool
		want  suanli.Listing
	}{
		{"green", l, true, suanli.Listing{PriceGPU: 360_000, PriceCPU: 18_000, PriceRAM: 4_500, PriceDisk: 100_000, PriceInetUp: 10_000, MinBid: 90_000, GreenDiscountBP: 1000}},
		{"not green", l, false, suanli.Listing{PriceGPU: 400_001, PriceCPU: 20_000, PriceRAM: 5_001, PriceDisk: 100_000, PriceInetUp: 10_000, MinBid: 100_000}},
		{"none", suanli.Listing{PriceGPU: 400_001}, true, suanli.Listing{PriceGPU: 400_001}},
		{"capped", suanli.Listing{PriceGPU: 400_000, GreenDiscountBP: 9000}, true, suanli.Listing{PriceGPU: 200_000, GreenDiscountBP: suanli.MaxGreenDiscountBP}},
	} {
		if diff := cmp.Diff(tc.want, tc.in.ForRenters(tc.green)); diff != "" {
			t.Errorf("%s: ForRenters(%v) (-want +got):\n%s", tc.name, tc.green, diff)
		}
	}
}
