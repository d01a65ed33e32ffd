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

// CreditsBetween sums an account's credits in [from, to).
func (s *DB) CreditsBetween(ctx context.Context, accountID int64, from, to time.Time) (suanli.Money, error) {
	var sum int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT COALESCE(SUM(amount), 0) FROM ledger_txns WHERE account_id = ? AND kind = 'credit'
		AND created_at >= ? AND created_at < ?`), accountID, us(from), us(to)).Scan(&sum)
	return -suanli.Money(sum), err
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

// FindIdempotent returns the stored reply for an account's key, or nil (a
// claim still running has Status 0).
func (s *DB) FindIdempotent(ctx context.Context, accountID int64, key string) (*Idempotent, error) {
	var r Idempotent
	err := s.db.QueryRowContext(ctx, s.q(`SELECT method, path, body_hash, status, response FROM idempotency_keys WHERE account_id = ? AND key = ?`),
		accountID, key).Scan(&r.Method, &r.Path, &r.BodyHash, &r.Status, &r.Response)
	if isNoRows(err) {
		return nil, nil
	}
	return &r, err
}

// ClaimIdempotent claims an account's key for a request about to run (r
// without Status and Response), so that the same key arriving at another
// replica meanwhile waits for this one's reply instead of running again. It
// returns true when the caller holds the claim; otherwise the key's row as
// it stands: a stored reply, or a claim still running (Status 0). A claim
// older than stale is taken over (its replica died mid-request).
func (s *DB) ClaimIdempotent(ctx context.Context, accountID int64, key string, r Idempotent, now time.Time, stale time.Duration) (*Idempotent, bool, error) {
	var prev *Idempotent
	claimed := false
	err := s.withTx(ctx, func(tx *Tx) error {
		prev, claimed = nil, false
		var p Idempotent
		var created int64
		var owner string
		err := tx.queryRow(ctx, `SELECT method, path, body_hash, status, response, created_at, owner FROM idempotency_keys WHERE account_id = ? AND key = ?`,
			accountID, key).Scan(&p.Method, &p.Path, &p.BodyHash, &p.Status, &p.Response, &created, &owner)
		switch {
		case isNoRows(err):
			claimed = true
			_, err := tx.exec(ctx, `INSERT INTO idempotency_keys (account_id, key, method, path, body_hash, status, response, created_at, owner)
				VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)`, accountID, key, r.Method, r.Path, r.BodyHash, []byte{}, us(now), s.origin)
			return err
		case err != nil:
			return err
		case p.Status == 0 && (fromUS(created).Before(now.Add(-stale)) || s.deadOrigin(owner)):
			// A claim gone stale, or left by a server process known to be
			// dead: the request is taken over (a create finds what the
			// dead try created by its request key).
			claimed = true
			_, err := tx.exec(ctx, `UPDATE idempotency_keys SET method = ?, path = ?, body_hash = ?, created_at = ?, owner = ? WHERE account_id = ? AND key = ? AND status = 0`,
				r.Method, r.Path, r.BodyHash, us(now), s.origin, accountID, key)
			return err
		}
		prev = &p
		return nil
	})
	return prev, claimed, err
}

// ReleaseIdempotent drops a claim whose request failed, so that a retry
// runs it again.
func (s *DB) ReleaseIdempotent(ctx context.Context, accountID int64, key string) error {
	_, err := s.db.ExecContext(ctx, s.q(`DELETE FROM idempotency_keys WHERE account_id = ? AND key = ? AND status = 0`), accountID, key)
	return err
}

// PutIdempotent stores a reply under an account's key (first writer wins;
// a claim is replaced by its reply).
func (s *DB) PutIdempotent(ctx context.Context, accountID int64, key string, r Idempotent, now time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error {
		var status int
		err := tx.queryRow(ctx, `SELECT status FROM idempotency_keys WHERE account_id = ? AND key = ?`, accountID, key).Scan(&status)
		switch {
		case isNoRows(err):
			_, err := tx.exec(ctx, `INSERT INTO idempotency_keys (account_id, key, method, path, body_hash, status, response, created_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, accountID, key, r.Method, r.Path, r.BodyHash, r.Status, r.Response, us(now))
			return err
		case err != nil || status != 0:
			return err
		}
		_, err = tx.exec(ctx, `UPDATE idempotency_keys SET method = ?, path = ?, body_hash = ?, status = ?, response = ?, created_at = ?
			WHERE account_id = ? AND key = ? AND status = 0`, r.Method, r.Path, r.BodyHash, r.Status, r.Response, us(now), accountID, key)
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
