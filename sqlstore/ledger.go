package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/billing"
)

// txn is one ledger transaction before it is written.
type txn struct {
	Kind       string // a meter kind, "credit"
	AccountID  int64  // the renter it concerns (0 for platform-only moves)
	InstanceID int64
	Amount     suanli.Money // what the renter paid (charges) or received (credits)
	From, To   time.Time
	Quantity   string
	Memo       string
	At         time.Time
}

// post writes a transaction and its postings and moves the balances. The
// postings must sum to zero: a ledger that does not balance is a bug, and the
// transaction is refused.
func (tx *Tx) post(ctx context.Context, t txn, postings []suanli.Posting) error {
	var sum suanli.Money
	for _, p := range postings {
		sum += p.Amount
	}
	if sum != 0 {
		return fmt.Errorf("ledger: postings of %s txn sum to %d, not zero", t.Kind, sum)
	}
	id, err := tx.insert(ctx, `INSERT INTO ledger_txns (kind, account_id, instance_id, amount, from_us, to_us, quantity, memo, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, t.Kind, t.AccountID, t.InstanceID, int64(t.Amount), us(t.From), us(t.To), t.Quantity, t.Memo, us(t.At))
	if err != nil {
		return err
	}
	for _, p := range postings {
		if p.Amount == 0 {
			continue
		}
		if _, err := tx.exec(ctx, `INSERT INTO postings (txn_id, account, amount) VALUES (?, ?, ?)`, id, p.Account, int64(p.Amount)); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `INSERT INTO ledger_balances (account, balance) VALUES (?, ?)
			ON CONFLICT (account) DO UPDATE SET balance = ledger_balances.balance + excluded.balance`, p.Account, int64(p.Amount)); err != nil {
			return err
		}
	}
	return nil
}

// chargePostings splits a renter's charge: the renter's balance pays, the
// provider earns the rest after the platform fee (basis points).
func chargePostings(renter, host int64, amount suanli.Money, feeBP int64) []suanli.Posting {
	fee := billing.Fee(amount, feeBP)
	return []suanli.Posting{
		{Account: suanli.LedgerBalance(renter), Amount: -amount},
		{Account: suanli.LedgerEarnings(host), Amount: amount - fee},
		{Account: suanli.LedgerPlatformFees, Amount: fee},
	}
}

// Credit adds amount to an account's balance (negative amounts debit it).
func (s *DB) Credit(ctx context.Context, accountID int64, amount suanli.Money, memo string, now time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error {
		var n int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM accounts WHERE id = ?`, accountID).Scan(&n); err != nil {
			return err
		} else if n == 0 {
			return notFound("account", accountID)
		}
		return tx.post(ctx, txn{Kind: "credit", AccountID: accountID, Amount: -amount, Memo: memo, At: now, From: now, To: now},
			[]suanli.Posting{{Account: suanli.LedgerPlatformCredit, Amount: -amount}, {Account: suanli.LedgerBalance(accountID), Amount: amount}})
	})
}

// LedgerBalance returns one ledger account's balance.
func (s *DB) LedgerBalance(ctx context.Context, account string) (suanli.Money, error) {
	var b int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT balance FROM ledger_balances WHERE account = ?`), account).Scan(&b)
	if isNoRows(err) {
		return 0, nil
	}
	return suanli.Money(b), err
}

func (tx *Tx) ledgerBalance(ctx context.Context, account string) (suanli.Money, error) {
	var b int64
	err := tx.queryRow(ctx, `SELECT balance FROM ledger_balances WHERE account = ?`, account).Scan(&b)
	if isNoRows(err) {
		return 0, nil
	}
	return suanli.Money(b), err
}

// LedgerCheck is the ledger's self-audit.
type LedgerCheck struct {
	PostingSum suanli.Money // must be 0
	BalanceSum suanli.Money // must be 0
	Mismatched []string     // accounts whose cached balance differs from their postings
	// Postings counts postings as a row-per-charge ledger writes them: an
	// hour close counts the legs of its lines, not its aggregated postings.
	Postings      int
	ChargeTotal   suanli.Money // all charges renters paid
	UnbalancedTxn []int64      // transactions whose postings do not sum to 0
	// SubLedger lists every difference between what hour closes recorded
	// and posted and the lines the sub-ledger derives for them today
	// (must be empty).
	SubLedger []string
}

// CheckLedger recomputes every balance from the postings and reports any
// difference, and re-derives every hour close's lines from the sub-ledger.
// A healthy ledger has zero sums and no mismatches. It reads everything: an
// audit, not a hot path.
func (s *DB) CheckLedger(ctx context.Context) (*LedgerCheck, error) {
	c := &LedgerCheck{}
	err := s.read(ctx, func(tx *Tx) error {
		rows, err := tx.query(ctx, `SELECT p.account, SUM(p.amount), COUNT(*) FROM postings p GROUP BY p.account`)
		if err != nil {
			return err
		}
		sums := map[string]int64{}
		for rows.Next() {
			var a string
			var sum int64
			var n int
			if err := rows.Scan(&a, &sum, &n); err != nil {
				rows.Close()
				return err
			}
			sums[a] = sum
			c.PostingSum += suanli.Money(sum)
			c.Postings += n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.query(ctx, `SELECT account, balance FROM ledger_balances`)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for rows.Next() {
			var a string
			var b int64
			if err := rows.Scan(&a, &b); err != nil {
				rows.Close()
				return err
			}
			seen[a] = true
			c.BalanceSum += suanli.Money(b)
			if sums[a] != b {
				c.Mismatched = append(c.Mismatched, a)
			}
		}
		rows.Close()
		for a, sum := range sums {
			if !seen[a] && sum != 0 {
				c.Mismatched = append(c.Mismatched, a)
			}
		}
		if c.UnbalancedTxn, err = tx.int64s(ctx, `SELECT txn_id FROM postings GROUP BY txn_id HAVING SUM(amount) <> 0`); err != nil {
			return err
		}
		var total int64
		if err := tx.queryRow(ctx, `SELECT COALESCE(SUM(amount), 0) FROM ledger_txns WHERE kind <> 'credit'`).Scan(&total); err != nil {
			return err
		}
		c.ChargeTotal = suanli.Money(total)
		// A close writes one posting per account; count its lines' legs.
		var legs int64
		if err := tx.queryRow(ctx, `SELECT COALESCE(SUM(legs - written), 0) FROM bill_closes`).Scan(&legs); err != nil {
			return err
		}
		c.Postings += int(legs)
		c.SubLedger, err = tx.auditCloses(ctx)
		return err
	})
	return c, err
}

// LedgerStats are cheap ledger gauges for metrics.
type LedgerStats struct {
	// Postings so far, an hour close's lines counted as a row-per-charge
	// ledger writes them. Read from the highest posting id: exact on SQLite,
	// an upper bound on PostgreSQL (a rolled-back insert leaves a gap in the
	// sequence).
	Postings int64
	BurnRate suanli.Money // all active meters per hour
}

// Stats returns ledger gauges.
func (s *DB) Stats(ctx context.Context) (LedgerStats, error) {
	var st LedgerStats
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) + (SELECT COALESCE(SUM(legs - written), 0) FROM bill_closes) FROM postings`).Scan(&st.Postings); err != nil {
		return st, err
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT rate, period_us FROM meters WHERE active = ?`), true)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var rate, period int64
		if err := rows.Scan(&rate, &period); err != nil {
			return st, err
		}
		st.BurnRate += suanli.MulDiv(suanli.Money(rate), suanli.MicrosPerHour, period)
	}
	return st, rows.Err()
}
