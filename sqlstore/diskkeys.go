package sqlstore

import (
	"context"
	"time"

	"github.com/suanli/suanli"
)

// Disk keys: the sealed encryption key of each instance disk and volume on
// a machine that encrypts at rest. The store only keeps the sealed bytes
// (the control plane seals and opens them); it deletes a key in the same
// transaction that destroys its instance (writeInstance) or deletes its
// volume (DeleteVolume), so a key never outlives its data's owner.

// DiskKeys returns the sealed keys of the given objects of one kind
// (suanli.ReleaseInstance or suanli.ReleaseVolume), minting one with mint
// for each that has none yet. Reading takes no write lock; only a missing
// key does, and a key another replica stored meanwhile wins. Objects that
// are already destroyed or deleted get no key.
func (s *DB) DiskKeys(ctx context.Context, kind string, ids []int64, mint func(id int64) ([]byte, error), now time.Time) (map[int64][]byte, error) {
	out := make(map[int64][]byte, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	read := func(tx *Tx) error {
		list, args := inList(ids)
		rows, err := tx.query(ctx, `SELECT object_id, sealed FROM disk_keys WHERE kind = ? AND object_id IN (`+list+`)`, append([]any{kind}, args...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var sealed []byte
			if err := rows.Scan(&id, &sealed); err != nil {
				return err
			}
			out[id] = sealed
		}
		return rows.Err()
	}
	if err := s.read(ctx, read); err != nil {
		return nil, err
	}
	var missing []int64
	for _, id := range ids {
		if out[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	table, gone := "instances", suanli.StatusDestroyed
	if kind == suanli.ReleaseVolume {
		table, gone = "volumes", suanli.VolumeDeleted
	}
	err := s.withTx(ctx, func(tx *Tx) error {
		for _, id := range missing {
			var status string
			if err := tx.queryRow(ctx, `SELECT status FROM `+table+` WHERE id = ?`, id).Scan(&status); isNoRows(err) || status == gone {
				continue
			} else if err != nil {
				return err
			}
			key, err := mint(id)
			if err != nil {
				return err
			}
			if _, err := tx.exec(ctx, `INSERT INTO disk_keys (kind, object_id, sealed, created_at) VALUES (?, ?, ?, ?)
				ON CONFLICT (kind, object_id) DO NOTHING`, kind, id, key, us(now)); err != nil {
				return err
			}
		}
		return read(tx)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// deleteDiskKey destroys the stored key of one object, if any.
func (tx *Tx) deleteDiskKey(ctx context.Context, kind string, id int64) error {
	_, err := tx.exec(ctx, `DELETE FROM disk_keys WHERE kind = ? AND object_id = ?`, kind, id)
	return err
}
