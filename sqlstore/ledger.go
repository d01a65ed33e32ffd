package sqlstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
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
	fee := suanli.MulDiv(amount, feeBP, 10_000)
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
	PostingSum    suanli.Money // must be 0
	BalanceSum    suanli.Money // must be 0
	Mismatched    []string     // accounts whose cached balance differs from their postings
	Postings      int
	ChargeTotal   suanli.Money // all charges renters paid
	UnbalancedTxn []int64      // transactions whose postings do not sum to 0
}

// CheckLedger recomputes every balance from the postings and reports any
// difference. A healthy ledger has zero sums and no mismatches.
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
		rows, err = tx.query(ctx, `SELECT txn_id FROM postings GROUP BY txn_id HAVING SUM(amount) <> 0`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			c.UnbalancedTxn = append(c.UnbalancedTxn, id)
		}
		rows.Close()
		var total int64
		if err := tx.queryRow(ctx, `SELECT COALESCE(SUM(amount), 0) FROM ledger_txns WHERE kind <> 'credit'`).Scan(&total); err != nil {
			return err
		}
		c.ChargeTotal = suanli.Money(total)
		return nil
	})
	return c, err
}

// FindCharges lists charges (and credits) by filter, newest first, with totals by kind.
func (s *DB) FindCharges(ctx context.Context, f suanli.ChargeFilter) (*suanli.ChargeSummary, error) {
	var where []string
	var args []any
	if f.AccountID != nil {
		where, args = append(where, "account_id = ?"), append(args, *f.AccountID)
	}
	if f.InstanceID != nil {
		where, args = append(where, "instance_id = ?"), append(args, *f.InstanceID)
	}
	if f.Since != nil {
		where, args = append(where, "created_at >= ?"), append(args, us(*f.Since))
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	sum := &suanli.ChargeSummary{ByKind: map[string]suanli.Money{}, Charges: []*suanli.Charge{}}
	err := s.read(ctx, func(tx *Tx) error {
		rows, err := tx.query(ctx, `SELECT kind, SUM(amount), COUNT(*) FROM ledger_txns`+cond+` GROUP BY kind`, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var kind string
			var amt int64
			var n int
			if err := rows.Scan(&kind, &amt, &n); err != nil {
				rows.Close()
				return err
			}
			sum.ByKind[kind] = suanli.Money(amt)
			if kind != "credit" {
				sum.Total += suanli.Money(amt)
			}
			sum.Count += n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		limit := f.Limit
		if limit <= 0 {
			limit = 1000
		}
		rows, err = tx.query(ctx, `SELECT id, account_id, instance_id, kind, amount, from_us, to_us, quantity, memo, created_at FROM ledger_txns`+
			cond+` ORDER BY id DESC LIMIT `+strconv.Itoa(limit)+` OFFSET `+strconv.Itoa(max(f.Offset, 0)), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c suanli.Charge
			var amt, from, to, created int64
			if err := rows.Scan(&c.ID, &c.AccountID, &c.InstanceID, &c.Kind, &amt, &from, &to, &c.Quantity, &c.Memo, &created); err != nil {
				return err
			}
			c.Amount, c.From, c.To, c.CreatedAt = suanli.Money(amt), fromUS(from), fromUS(to), fromUS(created)
			sum.Charges = append(sum.Charges, &c)
		}
		return rows.Err()
	})
	return sum, err
}

// LedgerStats are cheap ledger gauges for metrics.
type LedgerStats struct {
	Postings int64        // the highest posting id: postings written so far
	BurnRate suanli.Money // all active meters per hour
}

// Stats returns ledger gauges.
func (s *DB) Stats(ctx context.Context) (LedgerStats, error) {
	var st LedgerStats
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM postings`).Scan(&st.Postings); err != nil {
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
