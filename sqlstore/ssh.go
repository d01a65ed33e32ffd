package sqlstore

import (
	"context"
	"time"

	"github.com/suanli/suanli"
)

// CreateSSHKey stores a public key on an account. k.ID is set. ECONFLICT
// when the account has a key with the same fingerprint.
func (s *DB) CreateSSHKey(ctx context.Context, k *suanli.SSHKey) error {
	return s.withTx(ctx, func(tx *Tx) error {
		var n int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM ssh_keys WHERE account_id = ? AND fingerprint = ?`, k.AccountID, k.Fingerprint).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return suanli.Errorf(suanli.ECONFLICT, "SSH key %s is already on your account", k.Fingerprint)
		}
		id, err := tx.insert(ctx, `INSERT INTO ssh_keys (account_id, name, public_key, fingerprint, created_at) VALUES (?, ?, ?, ?, ?)`,
			k.AccountID, k.Name, k.PublicKey, k.Fingerprint, us(k.CreatedAt))
		k.ID = id
		return err
	})
}

// FindSSHKeys lists an account's keys in id order.
func (s *DB) FindSSHKeys(ctx context.Context, accountID int64) ([]*suanli.SSHKey, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, account_id, name, public_key, fingerprint, created_at FROM ssh_keys WHERE account_id = ? ORDER BY id`), accountID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*suanli.SSHKey{}
	for rows.Next() {
		var k suanli.SSHKey
		var created int64
		if err := rows.Scan(&k.ID, &k.AccountID, &k.Name, &k.PublicKey, &k.Fingerprint, &created); err != nil {
			return nil, err
		}
		k.CreatedAt = fromUS(created)
		out = append(out, &k)
	}
	return out, rows.Err()
}

// DeleteSSHKey removes one of an account's keys. ENOTFOUND when the account
// has no such key.
func (s *DB) DeleteSSHKey(ctx context.Context, accountID, id int64) error {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM ssh_keys WHERE account_id = ? AND id = ?`), accountID, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("SSH key", id)
	}
	return nil
}

// CreateAllowedNetwork adds a network to an account's IP allowlist. n.ID is
// set. ECONFLICT when it is listed already.
func (s *DB) CreateAllowedNetwork(ctx context.Context, n *suanli.AllowedNetwork) error {
	return s.withTx(ctx, func(tx *Tx) error {
		var c int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM ip_allowlist WHERE account_id = ? AND cidr = ?`, n.AccountID, n.CIDR).Scan(&c); err != nil {
			return err
		}
		if c > 0 {
			return suanli.Errorf(suanli.ECONFLICT, "%s is already on your allowlist", n.CIDR)
		}
		id, err := tx.insert(ctx, `INSERT INTO ip_allowlist (account_id, cidr, note, created_at) VALUES (?, ?, ?, ?)`,
			n.AccountID, n.CIDR, n.Note, us(n.CreatedAt))
		n.ID = id
		return err
	})
}

// FindAllowedNetworks lists an account's allowlist in id order.
func (s *DB) FindAllowedNetworks(ctx context.Context, accountID int64) ([]*suanli.AllowedNetwork, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, account_id, cidr, note, created_at FROM ip_allowlist WHERE account_id = ? ORDER BY id`), accountID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*suanli.AllowedNetwork{}
	for rows.Next() {
		var n suanli.AllowedNetwork
		var created int64
		if err := rows.Scan(&n.ID, &n.AccountID, &n.CIDR, &n.Note, &created); err != nil {
			return nil, err
		}
		n.CreatedAt = fromUS(created)
		out = append(out, &n)
	}
	return out, rows.Err()
}

// DeleteAllowedNetwork removes an allowlist entry of an account. ENOTFOUND.
func (s *DB) DeleteAllowedNetwork(ctx context.Context, accountID, id int64) error {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM ip_allowlist WHERE account_id = ? AND id = ?`), accountID, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("allowlist entry", id)
	}
	return nil
}

// SetMachineSSH records where a machine's agent accepts SSH. It writes only
// when the endpoint changed.
func (s *DB) SetMachineSSH(ctx context.Context, machineID int64, e suanli.SSHEndpoint, at time.Time) error {
	return s.withTx(ctx, func(tx *Tx) error {
		var cur suanli.SSHEndpoint
		err := tx.queryRow(ctx, `SELECT host, port, host_key FROM machine_ssh WHERE machine_id = ?`, machineID).Scan(&cur.Host, &cur.Port, &cur.HostKey)
		if err == nil && cur == e {
			return nil
		} else if err != nil && !isNoRows(err) {
			return err
		}
		if _, err := tx.exec(ctx, `DELETE FROM machine_ssh WHERE machine_id = ?`, machineID); err != nil {
			return err
		}
		_, err = tx.exec(ctx, `INSERT INTO machine_ssh (machine_id, host, port, host_key, updated_at) VALUES (?, ?, ?, ?, ?)`,
			machineID, e.Host, e.Port, e.HostKey, us(at))
		return err
	})
}

// FindMachineSSH returns a machine's SSH endpoint. ENOTFOUND when its agent
// has reported none.
func (s *DB) FindMachineSSH(ctx context.Context, machineID int64) (*suanli.SSHEndpoint, error) {
	var e suanli.SSHEndpoint
	err := s.db.QueryRowContext(ctx, s.q(`SELECT host, port, host_key FROM machine_ssh WHERE machine_id = ?`), machineID).Scan(&e.Host, &e.Port, &e.HostKey)
	if isNoRows(err) {
		return nil, suanli.Errorf(suanli.ENOTFOUND, "machine %d has no SSH endpoint", machineID)
	} else if err != nil {
		return nil, err
	}
	return &e, nil
}
