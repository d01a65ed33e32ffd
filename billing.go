package suanli

import "time"

// Meter kinds: what a charge is for.
const (
	MeterCompute  = "compute" // per second while running, at Rates.ComputePerHour
	MeterStorage  = "storage" // per second from creation to destroy, at Rates.StoragePerMonth × disk
	MeterInetUp   = "inet_up" // per byte sent
	MeterInetDown = "inet_down"
)

// Ledger account names. Every posting moves money between two or more of
// these and sums to zero (DESIGN §4).
const (
	LedgerPlatformCredit = "platform:credit" // source of credit grants and top-ups; goes negative
	LedgerPlatformFees   = "platform:fees"
)

// LedgerBalance names account id's spendable balance in the ledger.
func LedgerBalance(accountID int64) string { return "acct:" + itoa(accountID) + ":balance" }

// LedgerEarnings names account id's provider earnings in the ledger.
func LedgerEarnings(accountID int64) string { return "acct:" + itoa(accountID) + ":earnings" }

// Posting is one line of a ledger transaction.
type Posting struct {
	Account string `json:"account"`
	Amount  Money  `json:"amount"` // positive: the account gains
}

// Charge is one settled piece of a renter's spend (one meter over one
// interval), or a credit, as a renter sees it.
type Charge struct {
	ID         int64     `json:"id"`
	AccountID  int64     `json:"account_id"`
	InstanceID int64     `json:"instance_id,omitempty"`
	Kind       string    `json:"kind"`   // a meter kind, or "credit"
	Amount     Money     `json:"amount"` // positive: the renter paid it
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
	Quantity   string    `json:"quantity,omitempty"` // "3600 s", "10 GB × 3600 s"
	Memo       string    `json:"memo,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// ChargeFilter selects charges; nil fields mean "any".
type ChargeFilter struct {
	AccountID  *int64
	InstanceID *int64
	Since      *time.Time
	Limit      int
	Offset     int
}

// ChargeSummary is a list of charges with totals per kind.
type ChargeSummary struct {
	Charges []*Charge        `json:"charges"`
	ByKind  map[string]Money `json:"by_kind"`
	Total   Money            `json:"total"`
	Count   int              `json:"count"`
}

// Balance is an account's money position now.
//
// Balance and Spent are the ledger's: settled by the periodic close (hourly
// by default) and by status changes. Accrued is what running meters
// accrued since then; what the account really owes now is Spent+Accrued,
// and what it can spend is Balance−Accrued.
type Balance struct {
	AccountID int64 `json:"account_id"`
	Balance   Money `json:"balance"`   // spendable, as settled
	Earnings  Money `json:"earnings"`  // as a provider, after fees
	BurnRate  Money `json:"burn_rate"` // per hour, across live instances
	Spent     Money `json:"spent"`     // all charges settled so far
	Accrued   Money `json:"accrued"`   // accrued since the last settlement, not yet in the ledger
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
