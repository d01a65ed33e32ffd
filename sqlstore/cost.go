package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/suanli/suanli"
)

// PutBudget creates a budget, or replaces the account's budget of the same
// name. b.ID is set.
func (s *DB) PutBudget(ctx context.Context, b *suanli.Budget) error {
	return s.withTx(ctx, func(tx *Tx) error {
		var id int64
		err := tx.queryRow(ctx, `SELECT id FROM budgets WHERE account_id = ? AND name = ?`, b.AccountID, b.Name).Scan(&id)
		if err != nil && !isNoRows(err) {
			return err
		}
		var start, end int64
		if b.Start != nil {
			start = us(*b.Start)
		}
		if b.End != nil {
			end = us(*b.End)
		}
		th := jsonText(b.Thresholds)
		if id == 0 {
			b.ID, err = tx.insert(ctx, `INSERT INTO budgets (account_id, name, scope, amount, period, start_us, end_us, thresholds, action,
				webhook_url, webhook_secret, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, b.AccountID, b.Name, b.Scope,
				int64(b.Amount), b.Period, start, end, th, b.Action, b.WebhookURL, b.WebhookSecret, us(b.CreatedAt))
			return err
		}
		b.ID = id
		_, err = tx.exec(ctx, `UPDATE budgets SET scope = ?, amount = ?, period = ?, start_us = ?, end_us = ?, thresholds = ?, action = ?,
			webhook_url = ?, webhook_secret = CASE WHEN ? = '' THEN webhook_secret ELSE ? END WHERE id = ?`, b.Scope, int64(b.Amount), b.Period,
			start, end, th, b.Action, b.WebhookURL, b.WebhookSecret, b.WebhookSecret, id)
		return err
	})
}

// FindBudgets returns budgets, of one account or (accountID 0) of all,
// with their webhook secrets (the caller must not show them).
func (s *DB) FindBudgets(ctx context.Context, accountID int64) ([]*suanli.Budget, error) {
	q := `SELECT id, account_id, name, scope, amount, period, start_us, end_us, thresholds, action, webhook_url, webhook_secret, created_at FROM budgets`
	var args []any
	if accountID != 0 {
		q += ` WHERE account_id = ?`
		args = append(args, accountID)
	}
	rows, err := s.db.QueryContext(ctx, s.q(q+` ORDER BY id`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*suanli.Budget
	for rows.Next() {
		var b suanli.Budget
		var amount, start, end, created int64
		var th string
		if err := rows.Scan(&b.ID, &b.AccountID, &b.Name, &b.Scope, &amount, &b.Period, &start, &end, &th, &b.Action, &b.WebhookURL,
			&b.WebhookSecret, &created); err != nil {
			return nil, err
		}
		b.Amount, b.CreatedAt = suanli.Money(amount), fromUS(created)
		if start != 0 {
			t := fromUS(start)
			b.Start = &t
		}
		if end != 0 {
			t := fromUS(end)
			b.End = &t
		}
		if err := json.Unmarshal([]byte(th), &b.Thresholds); err != nil {
			return nil, err
		}
		out = append(out, &b)
	}
	return out, rows.Err()
}

// DeleteBudget removes an account's budget by name. ENOTFOUND.
func (s *DB) DeleteBudget(ctx context.Context, accountID int64, name string) error {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM budgets WHERE account_id = ? AND name = ?`), accountID, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return suanli.Errorf(suanli.ENOTFOUND, "budget %q not found", name)
	}
	return nil
}

// AddAlert records an alert. periodKey makes a budget threshold fire once
// per period: it returns false when that alert already exists.
func (s *DB) AddAlert(ctx context.Context, a *suanli.Alert, periodKey string) (bool, error) {
	added := false
	err := s.withTx(ctx, func(tx *Tx) error {
		if a.BudgetID != 0 {
			var n int
			if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM alerts WHERE budget_id = ? AND period_key = ? AND threshold = ?`,
				a.BudgetID, periodKey, a.Threshold).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
		}
		id, err := tx.insert(ctx, `INSERT INTO alerts (account_id, kind, budget_id, instance_id, threshold, period_key, message, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, a.AccountID, a.Kind, a.BudgetID, a.InstanceID, a.Threshold, periodKey, a.Message, us(a.CreatedAt))
		a.ID, added = id, err == nil
		return err
	})
	return added, err
}

// SetAlertDelivery records the webhook result of an alert.
func (s *DB) SetAlertDelivery(ctx context.Context, id int64, delivery string) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE alerts SET delivery = ? WHERE id = ?`), delivery, id)
	return err
}

// FindAlerts returns an account's newest alerts.
func (s *DB) FindAlerts(ctx context.Context, accountID int64, limit int) ([]*suanli.Alert, error) {
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, account_id, kind, budget_id, instance_id, threshold, message, delivery, created_at
		FROM alerts WHERE account_id = ? ORDER BY id DESC LIMIT `+fmt.Sprint(limit)), accountID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*suanli.Alert{}
	for rows.Next() {
		var a suanli.Alert
		var created int64
		if err := rows.Scan(&a.ID, &a.AccountID, &a.Kind, &a.BudgetID, &a.InstanceID, &a.Threshold, &a.Message, &a.Delivery, &created); err != nil {
			return nil, err
		}
		a.CreatedAt = fromUS(created)
		out = append(out, &a)
	}
	return out, rows.Err()
}

// LastAlertAt returns when the account last got an alert of kind (zero if never).
func (s *DB) LastAlertAt(ctx context.Context, accountID int64, kind string) (time.Time, error) {
	var at sql.NullInt64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT MAX(created_at) FROM alerts WHERE account_id = ? AND kind = ?`), accountID, kind).Scan(&at)
	if err != nil || !at.Valid {
		return time.Time{}, err
	}
	return fromUS(at.Int64), nil
}

// ChargeRow is one ledger charge with its instance's attributes, for
// reports, invoices and budgets.
type ChargeRow struct {
	TxnID      int64
	InstanceID int64
	Kind       string
	Amount     suanli.Money
	From, To   time.Time
	Quantity   string
	Label      string
	Project    string
	Tags       map[string]string
	MachineID  int64
}

// ChargeRows returns an account's charges (not credits) whose interval
// ends in [from, to), with the attributes of their instances.
func (s *DB) ChargeRows(ctx context.Context, accountID int64, from, to time.Time) ([]ChargeRow, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT t.id, t.instance_id, t.kind, t.amount, t.from_us, t.to_us, t.quantity,
		COALESCE(i.label, ''), COALESCE(i.project, ''), COALESCE(i.tags, '{}'), COALESCE(i.machine_id, 0)
		FROM ledger_txns t LEFT JOIN instances i ON i.id = t.instance_id
		WHERE t.account_id = ? AND t.kind <> 'credit' AND t.kind <> 'payout' AND t.to_us >= ? AND t.to_us < ? ORDER BY t.id`),
		accountID, us(from), us(to))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ChargeRow
	for rows.Next() {
		var r ChargeRow
		var amount, f, t int64
		var tags string
		if err := rows.Scan(&r.TxnID, &r.InstanceID, &r.Kind, &amount, &f, &t, &r.Quantity, &r.Label, &r.Project, &tags, &r.MachineID); err != nil {
			return nil, err
		}
		r.Amount, r.From, r.To = suanli.Money(amount), fromUS(f), fromUS(t)
		json.Unmarshal([]byte(tags), &r.Tags)
		out = append(out, r)
	}
	return out, rows.Err()
}

// CreditsBetween sums an account's credits in [from, to).
func (s *DB) CreditsBetween(ctx context.Context, accountID int64, from, to time.Time) (suanli.Money, error) {
	var sum int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT COALESCE(SUM(amount), 0) FROM ledger_txns WHERE account_id = ? AND kind = 'credit'
		AND created_at >= ? AND created_at < ?`), accountID, us(from), us(to)).Scan(&sum)
	return -suanli.Money(sum), err
}

// EarningRow is one machine's earnings in a period.
type EarningRow struct {
	MachineID int64
	Gross     suanli.Money
	Net       suanli.Money
}

// EarningsByMachine sums a provider's earnings postings in [from, to) per machine.
func (s *DB) EarningsByMachine(ctx context.Context, hostID int64, from, to time.Time) ([]EarningRow, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT i.machine_id, SUM(t.amount), SUM(p.amount)
		FROM postings p JOIN ledger_txns t ON t.id = p.txn_id JOIN instances i ON i.id = t.instance_id
		WHERE p.account = ? AND t.kind <> 'payout' AND t.to_us >= ? AND t.to_us < ? GROUP BY i.machine_id ORDER BY i.machine_id`),
		suanli.LedgerEarnings(hostID), us(from), us(to))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []EarningRow
	for rows.Next() {
		var r EarningRow
		var g, n int64
		if err := rows.Scan(&r.MachineID, &g, &n); err != nil {
			return nil, err
		}
		r.Gross, r.Net = suanli.Money(g), suanli.Money(n)
		out = append(out, r)
	}
	return out, rows.Err()
}

// LedgerPayouts is where paid-out earnings go.
const LedgerPayouts = "platform:payouts"

// Payout moves amount from a provider's earnings to paid out. EPAYMENTREQUIRED
// when the earnings do not cover it.
func (s *DB) Payout(ctx context.Context, hostID int64, amount suanli.Money, memo string, now time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error {
		bal, err := tx.ledgerBalance(ctx, suanli.LedgerEarnings(hostID))
		if err != nil {
			return err
		}
		if amount <= 0 || amount > bal {
			return suanli.Errorf(suanli.EPAYMENTREQUIRED, "payout of %s: earnings available are %s", amount, bal)
		}
		return tx.post(ctx, txn{Kind: "payout", AccountID: hostID, Amount: amount, Memo: memo, At: now, From: now, To: now},
			[]suanli.Posting{{Account: suanli.LedgerEarnings(hostID), Amount: -amount}, {Account: LedgerPayouts, Amount: amount}})
	})
}

// PaidOut sums a provider's payouts.
func (s *DB) PaidOut(ctx context.Context, hostID int64) (suanli.Money, error) {
	var sum int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT COALESCE(SUM(amount), 0) FROM ledger_txns WHERE account_id = ? AND kind = 'payout'`), hostID).Scan(&sum)
	return suanli.Money(sum), err
}

// Idempotent is a stored reply to a mutating request.
type Idempotent struct {
	Method, Path, BodyHash string
	Status                 int
	Response               []byte
}

// FindIdempotent returns the stored reply for an account's key, or nil.
func (s *DB) FindIdempotent(ctx context.Context, accountID int64, key string) (*Idempotent, error) {
	var r Idempotent
	err := s.db.QueryRowContext(ctx, s.q(`SELECT method, path, body_hash, status, response FROM idempotency_keys WHERE account_id = ? AND key = ?`),
		accountID, key).Scan(&r.Method, &r.Path, &r.BodyHash, &r.Status, &r.Response)
	if isNoRows(err) {
		return nil, nil
	}
	return &r, err
}

// PutIdempotent stores a reply under an account's key (first writer wins).
func (s *DB) PutIdempotent(ctx context.Context, accountID int64, key string, r Idempotent, now time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error {
		var n int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM idempotency_keys WHERE account_id = ? AND key = ?`, accountID, key).Scan(&n); err != nil || n > 0 {
			return err
		}
		_, err := tx.exec(ctx, `INSERT INTO idempotency_keys (account_id, key, method, path, body_hash, status, response, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, accountID, key, r.Method, r.Path, r.BodyHash, r.Status, r.Response, us(now))
		return err
	})
}

// PurgeIdempotent forgets keys older than before.
func (s *DB) PurgeIdempotent(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM idempotency_keys WHERE created_at < ?`), us(before))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// AccountsWithLiveInstances returns the ids of accounts that rent anything now.
func (s *DB) AccountsWithLiveInstances(ctx context.Context) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT DISTINCT account_id FROM instances WHERE status <> ? ORDER BY account_id`), suanli.StatusDestroyed)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
