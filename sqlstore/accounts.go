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
		return tx.createAccount(ctx, a)
	})
}

func (tx *Tx) createAccount(ctx context.Context, a *suanli.Account) error {
	if a.Kind == "" {
		a.Kind = suanli.KindUser
	}
	id, err := tx.insert(ctx, `INSERT INTO accounts (name, email, role, kind, allowed_countries, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		a.Name, a.Email, a.Role, a.Kind, strings.Join(a.AllowedCountries, ","), us(a.CreatedAt))
	a.ID = id
	return err
}

// FindAccounts lists every account, oldest first.
func (s *DB) FindAccounts(ctx context.Context) ([]*suanli.Account, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+accountCols+` FROM accounts ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanAccount)
}

// SetAllowedCountries sets an account's data residency (empty: anywhere).
func (s *DB) SetAllowedCountries(ctx context.Context, id int64, allowed []string) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE accounts SET allowed_countries = ? WHERE id = ?`), strings.Join(allowed, ","), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("account", id)
	}
	return nil
}

const accountCols = `id, name, email, role, kind, allowed_countries, created_at`

func scanAccount(r scanner) (*suanli.Account, error) {
	var a suanli.Account
	var created int64
	var allowed string
	if err := r.Scan(&a.ID, &a.Name, &a.Email, &a.Role, &a.Kind, &allowed, &created); err != nil {
		return nil, err
	}
	if allowed != "" {
		a.AllowedCountries = strings.Split(allowed, ",")
	}
	a.CreatedAt = fromUS(created)
	return &a, nil
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
	a, err := scanAccount(s.db.QueryRowContext(ctx, s.q(`SELECT `+accountCols+` FROM accounts WHERE `+where), arg))
	if isNoRows(err) {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "account %v not found", arg)
	}
	return a, err
}

// CreateAPIKey stores a key by the hash of its secret. k.ID is set.
func (s *DB) CreateAPIKey(ctx context.Context, k *suanli.APIKey, hash string) error {
	return s.withTx(ctx, func(tx *Tx) error { return tx.createAPIKey(ctx, k, hash) })
}

func (tx *Tx) createAPIKey(ctx context.Context, k *suanli.APIKey, hash string) error {
	scopes, _ := json.Marshal(k.Scopes)
	if k.Kind == "" {
		k.Kind = suanli.KeyLive
		if k.MachineID != 0 {
			k.Kind = suanli.KeyAgent
		}
	}
	id, err := tx.insert(ctx, `INSERT INTO api_keys (account_id, name, kind, prefix, hash, scopes, machine_id, parent_id, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, k.AccountID, k.Name, k.Kind, k.Prefix, hash, string(scopes), k.MachineID, k.ParentID,
		us(k.CreatedAt), us(k.ExpiresAt))
	k.ID = id
	return err
}

const keyCols = `id, account_id, name, kind, prefix, scopes, machine_id, parent_id, created_at, expires_at, revoked_at, last_used_at, last_used_addr`

func scanKey(r scanner) (*suanli.APIKey, error) {
	var k suanli.APIKey
	var scopes string
	var created, expires int64
	var revoked, used sql.NullInt64
	if err := r.Scan(&k.ID, &k.AccountID, &k.Name, &k.Kind, &k.Prefix, &scopes, &k.MachineID, &k.ParentID, &created, &expires,
		&revoked, &used, &k.LastUsedAddr); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(scopes), &k.Scopes); err != nil {
		return nil, fmt.Errorf("key %d scopes: %w", k.ID, err)
	}
	k.CreatedAt, k.ExpiresAt = fromUS(created), fromUS(expires)
	k.RevokedAt, k.LastUsedAt = fromUSPtr(revoked), fromUSPtr(used)
	return &k, nil
}

// FindAPIKeyByHash returns the key with that secret hash (revoked and expired
// ones too: the caller decides). ENOTFOUND.
func (s *DB) FindAPIKeyByHash(ctx context.Context, hash string) (*suanli.APIKey, error) {
	k, err := scanKey(s.db.QueryRowContext(ctx, s.q(`SELECT `+keyCols+` FROM api_keys WHERE hash = ?`), hash))
	if isNoRows(err) {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "no such key")
	}
	return k, err
}

// FindAPIKeyByID returns a key. ENOTFOUND.
func (s *DB) FindAPIKeyByID(ctx context.Context, id int64) (*suanli.APIKey, error) {
	k, err := scanKey(s.db.QueryRowContext(ctx, s.q(`SELECT `+keyCols+` FROM api_keys WHERE id = ?`), id))
	if isNoRows(err) {
		return nil, notFound("key", id)
	}
	return k, err
}

// FindAPIKeys lists an account's keys and tokens, newest first.
func (s *DB) FindAPIKeys(ctx context.Context, accountID int64) ([]*suanli.APIKey, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+keyCols+` FROM api_keys WHERE account_id = ? ORDER BY id DESC`), accountID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanKey)
}

// activeByName counts the account's active live keys named name, leaving
// out the key except (0: none).
func (tx *Tx) activeByName(ctx context.Context, accountID int64, name string, except int64, now time.Time) (int, error) {
	var n int
	err := tx.queryRow(ctx, `SELECT COUNT(*) FROM api_keys WHERE account_id = ? AND name = ? AND kind = ? AND revoked_at IS NULL
		AND expires_at > ? AND id <> ?`, accountID, name, suanli.KeyLive, us(now), except).Scan(&n)
	return n, err
}

// CreateLiveKey stores a person's new key unless max active keys already
// carry its name (ECONFLICT, naming them).
func (s *DB) CreateLiveKey(ctx context.Context, k *suanli.APIKey, hash string, max int, now time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error {
		n, err := tx.activeByName(ctx, k.AccountID, k.Name, 0, now)
		if err != nil {
			return err
		}
		if n >= max {
			return suanli.Errorf(suanli.ECONFLICT, "%d keys named %q are active already (the most for rotation): revoke one with `suanli keys revoke ID`, or rotate one with `suanli keys rotate ID`", n, k.Name)
		}
		k.Kind = suanli.KeyLive
		return tx.createAPIKey(ctx, k, hash)
	})
}

// RotateKey stores next as old's successor and sets old's expiry to
// oldExpires (now: revoked at once), in one transaction. ECONFLICT when
// another key of that name is active besides old.
func (s *DB) RotateKey(ctx context.Context, old *suanli.APIKey, next *suanli.APIKey, hash string, oldExpires time.Time, max int, now time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error {
		n, err := tx.activeByName(ctx, old.AccountID, old.Name, old.ID, now)
		if err != nil {
			return err
		}
		if n+1 >= max && oldExpires.After(now) {
			return suanli.Errorf(suanli.ECONFLICT, "key %d has a sibling named %q that is still active: revoke one of them first (or rotate with --grace 0)", old.ID, old.Name)
		}
		if n >= max {
			return suanli.Errorf(suanli.ECONFLICT, "%d other keys named %q are active: revoke one first", n, old.Name)
		}
		if !oldExpires.After(now) {
			if err := tx.revokeKey(ctx, old.ID, now); err != nil {
				return err
			}
		} else if _, err := tx.exec(ctx, `UPDATE api_keys SET expires_at = ? WHERE id = ? AND expires_at > ?`, us(oldExpires), old.ID, us(oldExpires)); err != nil {
			return err
		} else if err := tx.noteChange(ctx, ChangeKeys, 0); err != nil {
			return err
		}
		next.Kind = suanli.KeyLive
		return tx.createAPIKey(ctx, next, hash)
	})
}

// revokeKey revokes a key and its temporary tokens, and says so on the
// change feed: other replicas drop the keys they verified recently.
func (tx *Tx) revokeKey(ctx context.Context, id int64, at time.Time) error {
	if _, err := tx.exec(ctx, `UPDATE api_keys SET revoked_at = ? WHERE (id = ? OR parent_id = ?) AND revoked_at IS NULL`, us(at), id, id); err != nil {
		return err
	}
	return tx.noteChange(ctx, ChangeKeys, 0)
}

// RevokeAPIKey revokes a key and every temporary token cut from it.
func (s *DB) RevokeAPIKey(ctx context.Context, id int64, at time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error { return tx.revokeKey(ctx, id, at) })
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
