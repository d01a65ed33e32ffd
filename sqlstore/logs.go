package sqlstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/suanli/suanli"
)

// MaxLogBytes is how much of an instance's log the store keeps; older bytes
// are dropped from the front, and offsets stay absolute.
const MaxLogBytes = 4 << 20

// AppendLog stores a chunk of an instance's log that starts at offset. Bytes
// the store already holds are skipped, so an agent that resends after a lost
// reply never duplicates lines. It returns the new end offset.
func (s *DB) AppendLog(ctx context.Context, instanceID, offset int64, data []byte) (int64, error) {
	var end int64
	err := s.withTx(ctx, func(tx *Tx) error {
		var base int64
		var cur []byte
		err := tx.queryRow(ctx, `SELECT base, data FROM instance_logs WHERE instance_id = ?`, instanceID).Scan(&base, &cur)
		exists := err == nil
		if err != nil && !isNoRows(err) {
			return err
		}
		end = base + int64(len(cur))
		if offset+int64(len(data)) <= end {
			return nil
		}
		if offset < end {
			data = data[end-offset:]
		} else if offset > end {
			// The agent lost bytes (its log was rotated): keep the gap visible
			// and the offsets absolute, so that later chunks still line up.
			n := offset - end
			mark := []byte(fmt.Sprintf("\n[suanli: %d log bytes lost]\n", n))
			if int64(len(mark)) >= n {
				mark = bytes.Repeat([]byte{'\n'}, int(n))
			}
			cur = append(cur, mark...)
			base += n - int64(len(mark))
		}
		cur = append(cur, data...)
		end = base + int64(len(cur))
		if len(cur) > MaxLogBytes {
			drop := len(cur) - MaxLogBytes
			cur = cur[drop:]
			base += int64(drop)
		}
		if exists {
			_, err = tx.exec(ctx, `UPDATE instance_logs SET base = ?, data = ? WHERE instance_id = ?`, base, cur, instanceID)
		} else {
			_, err = tx.exec(ctx, `INSERT INTO instance_logs (instance_id, base, data) VALUES (?, ?, ?)`, instanceID, base, cur)
		}
		return err
	})
	return end, err
}

// ReadLog returns up to max bytes of an instance's log from offset (from the
// oldest kept byte when offset is older than that).
func (s *DB) ReadLog(ctx context.Context, instanceID, offset int64, max int) (*suanli.LogChunk, error) {
	var base int64
	var data []byte
	err := s.db.QueryRowContext(ctx, s.q(`SELECT base, data FROM instance_logs WHERE instance_id = ?`), instanceID).Scan(&base, &data)
	if isNoRows(err) {
		return &suanli.LogChunk{InstanceID: instanceID, Offset: offset, Next: offset, Data: []byte{}}, nil
	} else if err != nil {
		return nil, err
	}
	if offset < base {
		offset = base
	}
	end := base + int64(len(data))
	if offset > end {
		offset = end
	}
	chunk := data[offset-base:]
	if max > 0 && len(chunk) > max {
		chunk = chunk[:max]
	}
	return &suanli.LogChunk{InstanceID: instanceID, Offset: offset, Data: chunk, Next: offset + int64(len(chunk))}, nil
}

// LogEnds returns, for each live instance on a machine, how many log bytes
// the store holds (its end offset).
func (s *DB) LogEnds(ctx context.Context, machineID int64) (map[int64]int64, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT i.id, COALESCE(l.base + LENGTH(l.data), 0) FROM instances i
		LEFT JOIN instance_logs l ON l.instance_id = i.id WHERE i.machine_id = ? AND i.status <> ?`), machineID, suanli.StatusDestroyed)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var id, end int64
		if err := rows.Scan(&id, &end); err != nil {
			return nil, err
		}
		out[id] = end
	}
	return out, rows.Err()
}

// RecordUsage bills traffic from an agent's cumulative counters. A report
// whose sequence number is not newer than the last one seen for that
// instance is ignored, so a retried or replayed sync never bills twice.
func (s *DB) RecordUsage(ctx context.Context, machineID int64, reports []suanli.UsageReport, now time.Time) error {
	if len(reports) == 0 {
		return nil
	}
	return s.withTx(ctx, func(tx *Tx) error {
		for _, r := range reports {
			var owner int64
			err := tx.queryRow(ctx, `SELECT machine_id FROM instances WHERE id = ?`, r.InstanceID).Scan(&owner)
			if isNoRows(err) || owner != machineID {
				continue // not this machine's instance: ignore, never bill it
			} else if err != nil {
				return err
			}
			var lastSeq, tx0, rx0 int64
			err = tx.queryRow(ctx, `SELECT last_seq, tx_bytes, rx_bytes FROM usage_counters WHERE instance_id = ?`, r.InstanceID).Scan(&lastSeq, &tx0, &rx0)
			seen := err == nil
			if err != nil && !isNoRows(err) {
				return err
			}
			if seen && r.Seq <= lastSeq {
				continue
			}
			// Counters restart from zero when a container is recreated: count from there.
			dTx, dRx := r.TxBytes-tx0, r.RxBytes-rx0
			if dTx < 0 {
				dTx = r.TxBytes
			}
			if dRx < 0 {
				dRx = r.RxBytes
			}
			ms, err := tx.instanceMeters(ctx, r.InstanceID)
			if err != nil {
				return err
			}
			if m := ms[suanli.MeterInetUp]; m != nil {
				if err := tx.accrueQuantity(ctx, m, dTx, now, fmt.Sprintf("%d bytes out", dTx)); err != nil {
					return err
				}
			}
			if m := ms[suanli.MeterInetDown]; m != nil {
				if err := tx.accrueQuantity(ctx, m, dRx, now, fmt.Sprintf("%d bytes in", dRx)); err != nil {
					return err
				}
			}
			if seen {
				_, err = tx.exec(ctx, `UPDATE usage_counters SET last_seq = ?, tx_bytes = ?, rx_bytes = ? WHERE instance_id = ?`, r.Seq, r.TxBytes, r.RxBytes, r.InstanceID)
			} else {
				_, err = tx.exec(ctx, `INSERT INTO usage_counters (instance_id, machine_id, last_seq, tx_bytes, rx_bytes) VALUES (?, ?, ?, ?, ?)`,
					r.InstanceID, machineID, r.Seq, r.TxBytes, r.RxBytes)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}
