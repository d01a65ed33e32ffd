package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/billing"
)

// SettleRows is the row-per-charge settlement that the hour close replaced,
// kept as the benchmark's baseline and the tests' second opinion. In one
// transaction it settles every active meter up to now (compute no further
// than its machine's last heartbeat) and writes, for each
// meter charged, a ledger transaction with its postings (renter, provider,
// fee; zero legs left out), moves each ledger account's balance once, and
// updates every advanced meter's row. It is batched (multi-row inserts, one
// prepared update) and exactly as durable as a close (same database, same
// synchronous=FULL commit). Its charges are the lines a close's sub-ledger
// derives, as ledger rows. It returns how many meters it advanced. It is
// for benchmarks and tests: it does not tell other processes' Books.
func (s *DB) SettleRows(ctx context.Context, now time.Time) (int, error) {
	bc := &s.bill
	bc.mu.Lock()
	defer bc.mu.Unlock()
	end := now.UnixMicro()
	n := 0
	err := s.withTx(ctx, func(tx *Tx) error {
		st, err := tx.billState(ctx, true)
		if err != nil {
			return err
		}
		ms, err := tx.loadMeters(ctx, st, `m.active = ? ORDER BY m.id`, true)
		if err != nil {
			return err
		}
		// Compute is settled no further than its machine's last heartbeat.
		beats, err := tx.lastBeats(ctx)
		if err != nil {
			return err
		}
		var txns []txn
		var legs [][]suanli.Posting
		var moved []*meter
		balances := map[string]suanli.Money{}
		for _, m := range ms {
			if m.billedByCloses(st, m.Through) {
				if err := tx.catchUp(ctx, m); err != nil {
					return err
				}
			}
			m.CloseID = max(m.CloseID, st.CloseID)
			at := end
			if hb, ok := beats[m.MachineID]; ok && m.MachineID != 0 {
				at = min(at, hb)
			}
			if at <= m.Since {
				continue
			}
			amount, rem := suanli.Accrue(m.Rate, at-m.Since, m.PeriodUS, m.Remainder)
			if amount > 0 {
				txns = append(txns, txn{Kind: m.Kind, AccountID: m.AccountID, InstanceID: m.InstanceID, Amount: amount,
					From: fromUS(m.Since), To: fromUS(at), Quantity: billing.Quantity(m.Since, at), At: now})
				var ps []suanli.Posting
				for _, p := range chargePostings(m.AccountID, m.HostID, amount, m.FeeBP) {
					if p.Amount != 0 {
						ps = append(ps, p)
						balances[p.Account] += p.Amount
					}
				}
				legs = append(legs, ps)
			}
			m.Since, m.Remainder = at, rem
			moved = append(moved, m)
		}
		n = len(moved)
		ids, err := tx.insertTxns(ctx, txns)
		if err != nil {
			return err
		}
		var pargs []any
		flush := func() error {
			if len(pargs) == 0 {
				return nil
			}
			_, err := tx.exec(ctx, `INSERT INTO postings (txn_id, account, amount) VALUES `+values(len(pargs)/3, 3), pargs...)
			pargs = pargs[:0]
			return err
		}
		for i, ps := range legs {
			for _, p := range ps {
				pargs = append(pargs, ids[i], p.Account, int64(p.Amount))
			}
			if len(pargs) >= 3*5000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		accts := make([]string, 0, len(balances))
		for a := range balances {
			accts = append(accts, a)
		}
		sort.Strings(accts)
		for lo := 0; lo < len(accts); lo += 5000 {
			batch := accts[lo:min(lo+5000, len(accts))]
			args := make([]any, 0, 2*len(batch))
			for _, a := range batch {
				args = append(args, a, int64(balances[a]))
			}
			if _, err := tx.exec(ctx, `INSERT INTO ledger_balances (account, balance) VALUES `+values(len(batch), 2)+`
				ON CONFLICT (account) DO UPDATE SET balance = ledger_balances.balance + excluded.balance`, args...); err != nil {
				return err
			}
		}
		up, err := tx.tx.PrepareContext(ctx, s.q(`UPDATE meters SET since = ?, remainder = ?, close_id = ? WHERE id = ?`))
		if err != nil {
			return err
		}
		defer up.Close()
		for _, m := range moved {
			if _, err := up.ExecContext(ctx, m.Since, m.Remainder, m.CloseID, m.ID); err != nil {
				return err
			}
		}
		return nil
	})
	// The rows it moved are not marked dirty (that would cost the baseline
	// an index it does not need): this process's Book is rebuilt instead. A
	// store that another process closes must not be settled this way.
	bc.valid = false
	if err != nil {
		return 0, fmt.Errorf("settle rows at %s: %w", now.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}

// insertTxns writes ledger transactions with multi-row inserts and returns
// their ids, in order. On SQLite (one writer) the ids are assigned here,
// after the highest; on PostgreSQL they are drawn from the table's sequence
// first (ascending), so that later inserts without an id never collide.
func (tx *Tx) insertTxns(ctx context.Context, ts []txn) ([]int64, error) {
	ids := make([]int64, len(ts))
	var next int64
	if tx.s.dialect.Name == "postgres" {
		rows, err := tx.query(ctx, `SELECT nextval(pg_get_serial_sequence('ledger_txns', 'id')) FROM generate_series(1, ?::bigint)`, len(ts))
		if err != nil {
			return nil, err
		}
		got := ids[:0]
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			got = append(got, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if len(got) != len(ts) {
			return nil, fmt.Errorf("ledger: drew %d transaction ids, want %d", len(got), len(ts))
		}
		slices.Sort(ids)
	} else if err := tx.queryRow(ctx, `SELECT COALESCE(MAX(id), 0) + 1 FROM ledger_txns`).Scan(&next); err != nil {
		return nil, err
	}
	const batch = 3000 // 10 values a row, under SQLite's 32766 variables
	for lo := 0; lo < len(ts); lo += batch {
		part := ts[lo:min(lo+batch, len(ts))]
		args := make([]any, 0, 10*len(part))
		for i, t := range part {
			if next != 0 {
				ids[lo+i] = next
				next++
			}
			args = append(args, ids[lo+i], t.Kind, t.AccountID, t.InstanceID, int64(t.Amount), us(t.From), us(t.To), t.Quantity, t.Memo, us(t.At))
		}
		if _, err := tx.exec(ctx, `INSERT INTO ledger_txns (id, kind, account_id, instance_id, amount, from_us, to_us, quantity, memo, created_at)
			VALUES `+values(len(part), 10), args...); err != nil {
			return nil, err
		}
	}
	return ids, nil
}
