package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// CreateAccount inserts an account. ECONFLICT when the name is taken.
func (s *DB) CreateAccount(ctx context.Context, a *suanli.Account) error {
	if strings.TrimSpace(a.Name) == "" {
		return suanli.FieldErrorf("name", "must not be empty")
	}
	return s.withTx(ctx, func(tx *Tx) error {
		var n int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM accounts WHERE name = ?`, a.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return suanli.Errorf(suanli.ECONFLICT, "account name %q is taken", a.Name)
		}
		id, err := tx.insert(ctx, `INSERT INTO accounts (name, email, role, created_at) VALUES (?, ?, ?, ?)`,
			a.Name, a.Email, a.Role, us(a.CreatedAt))
		a.ID = id
		return err
	})
}

// FindAccountByID returns an account. ENOTFOUND.
func (s *DB) FindAccountByID(ctx context.Context, id int64) (*suanli.Account, error) {
	return s.findAccount(ctx, `id = ?`, id)
}

// FindAccountByName returns an account. ENOTFOUND.
func (s *DB) FindAccountByName(ctx context.Context, name string) (*suanli.Account, error) {
	return s.findAccount(ctx, `name = ?`, name)
}

func (s *DB) findAccount(ctx context.Context, where string, arg any) (*suanli.Account, error) {
	var a suanli.Account
	var created int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT id, name, email, role, created_at FROM accounts WHERE `+where), arg).
		Scan(&a.ID, &a.Name, &a.Email, &a.Role, &created)
	if isNoRows(err) {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "account %v not found", arg)
	} else if err != nil {
		return nil, err
	}
	a.CreatedAt = fromUS(created)
	return &a, nil
}

// CreateAPIKey stores a key by the hash of its secret. k.ID is set.
func (s *DB) CreateAPIKey(ctx context.Context, k *suanli.APIKey, hash string) error {
	return s.withTx(ctx, func(tx *Tx) error { return tx.createAPIKey(ctx, k, hash) })
}

func (tx *Tx) createAPIKey(ctx context.Context, k *suanli.APIKey, hash string) error {
	scopes, _ := json.Marshal(k.Scopes)
	id, err := tx.insert(ctx, `INSERT INTO api_keys (account_id, name, prefix, hash, scopes, machine_id, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, k.AccountID, k.Name, k.Prefix, hash, string(scopes), k.MachineID, us(k.CreatedAt), us(k.ExpiresAt))
	k.ID = id
	return err
}

// FindAPIKeyByHash returns the key with that secret hash (revoked and expired
// ones too: the caller decides). ENOTFOUND.
func (s *DB) FindAPIKeyByHash(ctx context.Context, hash string) (*suanli.APIKey, error) {
	var k suanli.APIKey
	var scopes string
	var created, expires int64
	var revoked, used sql.NullInt64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT id, account_id, name, prefix, scopes, machine_id, created_at, expires_at, revoked_at, last_used_at
		FROM api_keys WHERE hash = ?`), hash).Scan(&k.ID, &k.AccountID, &k.Name, &k.Prefix, &scopes, &k.MachineID, &created, &expires, &revoked, &used)
	if isNoRows(err) {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "no such key")
	} else if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(scopes), &k.Scopes); err != nil {
		return nil, fmt.Errorf("key %d scopes: %w", k.ID, err)
	}
	k.CreatedAt, k.ExpiresAt = fromUS(created), fromUS(expires)
	k.RevokedAt, k.LastUsedAt = fromUSPtr(revoked), fromUSPtr(used)
	return &k, nil
}

// TouchAPIKey records a key's last use.
func (s *DB) TouchAPIKey(ctx context.Context, id int64, at time.Time, addr string) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE api_keys SET last_used_at = ?, last_used_addr = ? WHERE id = ?`), us(at), addr, id)
	return err
}

// CreateJoinToken stores a one-time join token by its hash.
func (s *DB) CreateJoinToken(ctx context.Context, hash string, accountID int64, expires time.Time) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO join_tokens (hash, account_id, expires_at) VALUES (?, ?, ?)`), hash, accountID, us(expires))
	return err
}

// JoinMachine spends a join token: in one transaction it marks the token
// used, creates the machine (owned by the token's account) and the agent's
// own credential. EUNAUTHORIZED when the token is unknown, used or expired.
func (s *DB) JoinMachine(ctx context.Context, tokenHash string, m *suanli.Machine, key *suanli.APIKey, keyHash string, now time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error {
		var account int64
		var expires int64
		var used sql.NullInt64
		err := tx.queryRow(ctx, `SELECT account_id, expires_at, used_at FROM join_tokens WHERE hash = ?`, tokenHash).Scan(&account, &expires, &used)
		if isNoRows(err) {
			return suanli.Errorf(suanli.EUNAUTHORIZED, "join token not recognised: print a new one with `suanli host join-token`")
		} else if err != nil {
			return err
		}
		if used.Valid {
			return suanli.Errorf(suanli.EUNAUTHORIZED, "join token already used: each token registers one machine; print a new one with `suanli host join-token`")
		}
		if now.UnixMicro() > expires {
			return suanli.Errorf(suanli.EUNAUTHORIZED, "join token expired at %s: print a new one with `suanli host join-token`", fromUS(expires).Format(time.RFC3339))
		}
		m.OwnerID = account
		if err := tx.createMachine(ctx, m); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `UPDATE join_tokens SET used_at = ?, machine_id = ? WHERE hash = ?`, us(now), m.ID, tokenHash); err != nil {
			return err
		}
		key.AccountID, key.MachineID = account, m.ID
		return tx.createAPIKey(ctx, key, keyHash)
	})
}

// Setting returns a stored setting, or "" when unset.
func (s *DB) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, s.q(`SELECT value FROM settings WHERE name = ?`), name).Scan(&v)
	if isNoRows(err) {
		return "", nil
	}
	return v, err
}

// SetSetting stores a setting.
func (s *DB) SetSetting(ctx context.Context, name, value string) error {
	return s.withTx(ctx, func(tx *Tx) error {
		if _, err := tx.exec(ctx, `DELETE FROM settings WHERE name = ?`, name); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)`, name, value)
		return err
	})
}

// AccountQuota returns an account's quota override (zero fields: defaults).
func (s *DB) AccountQuota(ctx context.Context, id int64) (suanli.Quota, error) {
	var q suanli.Quota
	err := s.db.QueryRowContext(ctx, s.q(`SELECT quota_gpus, quota_instances FROM accounts WHERE id = ?`), id).Scan(&q.GPUs, &q.Instances)
	if isNoRows(err) {
		return q, suanli.Errorf(suanli.ENOTFOUND, "account %d not found", id)
	}
	return q, err
}

// SetAccountQuota overrides an account's quota (zero fields: defaults).
func (s *DB) SetAccountQuota(ctx context.Context, id int64, q suanli.Quota) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE accounts SET quota_gpus = ?, quota_instances = ? WHERE id = ?`), q.GPUs, q.Instances, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return suanli.Errorf(suanli.ENOTFOUND, "account %d not found", id)
	}
	return nil
}
