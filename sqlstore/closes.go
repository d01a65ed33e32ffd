package sqlstore

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/billing"
)

// txnClose is the ledger transaction kind of an hour close. Its postings
// are aggregated per ledger account; its per-instance lines live in the
// sub-ledger (subledger.go), so readers of charges never list it.
const txnClose = "close"

// billCache is what the store keeps in memory for billing: the Book of
// active meters, for hour closes, and the close calendar, for reads. The
// zero value is empty: the Book is rebuilt from the store on first use.
type billCache struct {
	mu     sync.Mutex // serialises closes; guards book, valid, synced
	book   billing.Book
	valid  bool  // the book holds every active meter as of close synced, bar dirty rows
	synced int64 // the close the book is synced to

	calMu    sync.Mutex // guards cal and throughs (append only)
	cal      []closeInfo
	throughs []int64
}

// closeInfo is one close in the calendar.
type closeInfo struct {
	ID, TxnID, Through, CreatedAt int64
}

// billState is the latest close, as a transaction sees it.
type billState struct {
	CloseID int64
	Through int64 // µs
}

// rowLock is the clause that locks the rows a SELECT reads until the
// transaction ends: shared, or exclusive. SQLite needs none (one writer).
// On PostgreSQL every transaction that writes a meter holds the bill_state
// row shared, and a close holds it exclusively, so no meter write straddles
// a close.
func (tx *Tx) rowLock(exclusive bool) string {
	if tx.s.dialect.Name != "postgres" {
		return ""
	}
	if exclusive {
		return " FOR UPDATE"
	}
	return " FOR SHARE"
}

// billState reads the latest close in a transaction that writes: meter
// writers lock it shared, a close exclusively.
func (tx *Tx) billState(ctx context.Context, exclusive bool) (billState, error) {
	var st billState
	err := tx.queryRow(ctx, `SELECT close_id, through_us FROM bill_state WHERE id = 1`+tx.rowLock(exclusive)).Scan(&st.CloseID, &st.Through)
	return st, err
}

// readBillState reads the latest close without locking it (for reads).
func (tx *Tx) readBillState(ctx context.Context) (billState, error) {
	var st billState
	err := tx.queryRow(ctx, `SELECT close_id, through_us FROM bill_state WHERE id = 1`).Scan(&st.CloseID, &st.Through)
	return st, err
}

// BookClose is what an hour close did.
type BookClose struct {
	ID      int64     // the close's number (0: nothing to close)
	TxnID   int64     // its ledger transaction
	Through time.Time // every active meter is settled up to here
	Meters  int       // meters advanced
	Lines   int       // meters charged: the sub-ledger's lines
	Legs    int       // postings a row-per-charge ledger would have written
	Written int       // postings written: one per ledger account touched
	Amount  suanli.Money
	Fees    suanli.Money
	Loaded  int  // meter rows read from the store: all active ones at a rebuild, else the changed ones
	Rebuilt bool // the in-memory book was rebuilt from the store first
}

// Settle is the periodic settlement: an hour close at now (CloseBooks). It
// returns how many meters the close advanced.
func (s *DB) Settle(ctx context.Context, now time.Time) (int, error) {
	c, err := s.CloseBooks(ctx, now)
	if err != nil {
		return 0, err
	}
	return c.Meters, nil
}

// CloseBooks settles every active meter up to now in one transaction: the
// in-memory Book (rebuilt from the store when it is not known to be current)
// computes each meter's charge, and the transaction writes one ledger
// transaction with one posting per ledger account touched (renter balances,
// provider earnings, the platform fee), the close's row in the calendar, and
// the new latest close. Per-instance charge lines are not written: the
// sub-ledger derives them from meter spans and the calendar.
//
// A close is all or nothing: a crash before the commit leaves the store as
// it was and the Book is rebuilt; after it, the close is durable and a
// second close at the same time (or earlier) does nothing, so no second is
// billed twice. Closes are serialised in the process and, through the
// bill_state row, across processes sharing a database.
func (s *DB) CloseBooks(ctx context.Context, now time.Time) (*BookClose, error) {
	return s.CloseBooksFenced(ctx, now, nil)
}

// CloseBooksFenced is CloseBooks made by the holder of a lease (the
// replica that runs the singleton loops): the close commits only while f
// still holds it (ECONFLICT otherwise), and records its term.
func (s *DB) CloseBooksFenced(ctx context.Context, now time.Time, f *Fence) (*BookClose, error) {
	if fn := s.beforeClose.Load(); fn != nil {
		(*fn)(ctx)
	}
	bc := &s.bill
	bc.mu.Lock()
	defer bc.mu.Unlock()
	res := &BookClose{Through: now}
	through := now.UnixMicro()
	var cl *billing.Close
	err := s.withTx(ctx, func(tx *Tx) error {
		if err := tx.checkFence(ctx, f); err != nil {
			return err
		}
		st, err := tx.billState(ctx, true)
		if err != nil {
			return err
		}
		if through <= st.Through {
			return nil // closed up to there already
		}
		if err := tx.syncBook(ctx, bc, st, res); err != nil {
			return err
		}
		beats, err := tx.heartbeats(ctx, bc.book.Machines())
		if err != nil {
			return err
		}
		cl = bc.book.Close(through, beats)
		if cl.Meters == 0 {
			return nil // nothing advanced: the close would change nothing
		}
		res.ID = st.CloseID + 1
		res.Meters, res.Lines, res.Legs, res.Amount, res.Fees = cl.Meters, cl.Lines, cl.Legs, cl.Amount, cl.Fees
		postings := cl.LedgerPostings()
		res.Written = len(postings)
		t := txn{Kind: txnClose, Amount: cl.Amount, From: fromUS(st.Through), To: now, At: now,
			Quantity: fmt.Sprintf("%d meters, %d lines", cl.Meters, cl.Lines), Memo: fmt.Sprintf("hour close %d", res.ID)}
		if res.TxnID, err = tx.postBatch(ctx, t, postings); err != nil {
			return err
		}
		var term int64
		if f != nil {
			term = f.Term
		}
		if _, err := tx.exec(ctx, `INSERT INTO bill_closes (id, txn_id, through_us, meters, lines, legs, written, amount, fees, digest, created_at, term)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, res.ID, res.TxnID, through, cl.Meters, cl.Lines, cl.Legs, len(postings),
			int64(cl.Amount), int64(cl.Fees), int64(cl.Digest), us(now), term); err != nil {
			return err
		}
		caps := cl.MachineBilled()
		for lo := 0; lo < len(caps); lo += 1000 {
			part := caps[lo:min(lo+1000, len(caps))]
			args := make([]any, 0, 3*len(part))
			for _, c := range part {
				args = append(args, res.ID, c.MachineID, c.Through)
			}
			if _, err := tx.exec(ctx, `INSERT INTO bill_caps (close_id, machine_id, through_us) VALUES `+values(len(part), 3), args...); err != nil {
				return err
			}
		}
		_, err = tx.exec(ctx, `UPDATE bill_state SET close_id = ?, through_us = ? WHERE id = 1`, res.ID, through)
		return err
	})
	if err != nil {
		bc.valid = false // rebuild next time: the dirty flags this read were not cleared
		return nil, fmt.Errorf("hour close at %s: %w", now.UTC().Format(time.RFC3339), err)
	}
	if res.ID > 0 {
		if err := bc.book.Apply(cl); err != nil {
			bc.valid = false
			return nil, err
		}
		bc.synced = res.ID
	}
	return res, nil
}

// syncBook makes the Book hold every active meter as of close st: a
// rebuild from the store when the Book is not known to be current (first
// use, a failed close, a close by another process), otherwise the rows
// written since the last close (marked dirty) merged in. Dirty marks are
// cleared in the same transaction.
func (tx *Tx) syncBook(ctx context.Context, bc *billCache, st billState, res *BookClose) error {
	current := bc.valid && bc.synced == st.CloseID
	bc.valid = false
	if !current {
		bc.book.Reset()
		n, err := tx.loadBook(ctx, &bc.book, st)
		if err != nil {
			return err
		}
		if err := tx.loadMachineBilled(ctx, &bc.book, st); err != nil {
			return err
		}
		res.Rebuilt, res.Loaded = true, n
	}
	rows, err := tx.query(ctx, meterSelect+` WHERE m.dirty ORDER BY m.id`, meterArgs(st)...)
	if err != nil {
		return err
	}
	var changed []billing.MeterRow
	for rows.Next() {
		r, err := scanBookRow(rows, st)
		if err != nil {
			rows.Close()
			return err
		}
		changed = append(changed, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if !res.Rebuilt {
		res.Loaded = len(changed)
		if err := bc.book.Merge(changed); err != nil {
			return err
		}
	}
	if len(changed) > 0 {
		if _, err := tx.exec(ctx, `UPDATE meters SET dirty = FALSE WHERE dirty`); err != nil {
			return err
		}
	}
	bc.valid, bc.synced = true, st.CloseID
	return nil
}

// scanBookRow reads a meter (meterSelect) for the Book, caught up to the
// latest close.
func scanBookRow(r scanner, st billState) (billing.MeterRow, error) {
	m, err := scanMeter(r, st)
	if err != nil {
		return billing.MeterRow{}, err
	}
	c := m.caughtUp(st, m.Through)
	return billing.MeterRow{ID: c.ID, AccountID: c.AccountID, HostID: c.HostID, Rate: c.Rate, PeriodUS: c.PeriodUS, FeeBP: c.FeeBP,
		Active: c.Active, Since: c.Since, Remainder: c.Remainder, MachineID: c.MachineID}, nil
}

// loadBook reads every active meter into an empty Book, in id order.
func (tx *Tx) loadBook(ctx context.Context, b *billing.Book, st billState) (int, error) {
	rows, err := tx.query(ctx, meterSelect+` WHERE m.active = ? ORDER BY m.id`, meterArgs(st, true)...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		r, err := scanBookRow(rows, st)
		if err != nil {
			return n, err
		}
		if err := b.Append(r); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

// loadMachineBilled tells a rebuilt Book how far the latest close billed
// compute on the machines it bounded.
func (tx *Tx) loadMachineBilled(ctx context.Context, b *billing.Book, st billState) error {
	rows, err := tx.query(ctx, `SELECT machine_id, through_us FROM bill_caps WHERE close_id = ?`, st.CloseID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, t int64
		if err := rows.Scan(&id, &t); err != nil {
			return err
		}
		b.SetMachineBilled(id, t)
	}
	return rows.Err()
}

// heartbeats returns the last heartbeat of each machine, in the order
// given; a machine not found is not bounded.
func (tx *Tx) heartbeats(ctx context.Context, machines []int64) ([]int64, error) {
	out := make([]int64, len(machines))
	if len(machines) == 0 {
		return out, nil
	}
	beat, err := tx.lastBeats(ctx)
	if err != nil {
		return nil, err
	}
	for i, id := range machines {
		hb, ok := beat[id]
		if !ok {
			hb = math.MaxInt64
		}
		out[i] = hb
	}
	return out, nil
}

// WarmBook rebuilds the in-memory Book from the store now, so that the
// first hour close after a start does not pay for it. It returns how many
// active meters it loaded. It reads in slices of warmSlice meters, each in
// its own short read transaction, so that other requests are served in
// between: rows written meanwhile are marked dirty and merged by the next
// close, and a close by another process meanwhile leaves the Book to be
// rebuilt by the next close. Warming is safe at any time.
func (s *DB) WarmBook(ctx context.Context) (int, error) {
	bc := &s.bill
	bc.mu.Lock()
	defer bc.mu.Unlock()
	bc.valid = false
	bc.book.Reset()
	var st0 billState
	n, after := 0, int64(0)
	for first := true; ; first = false {
		got, moved := 0, false
		err := s.read(ctx, func(tx *Tx) error {
			st, err := tx.readBillState(ctx)
			if err != nil {
				return err
			}
			if first {
				st0 = st
			} else if st != st0 {
				moved = true // closed meanwhile: the caught-up states read so far are stale
				return nil
			}
			rows, err := tx.query(ctx, meterSelect+` WHERE m.active = ? AND m.id > ? ORDER BY m.id LIMIT `+fmt.Sprint(warmSlice), meterArgs(st, true, after)...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				r, err := scanBookRow(rows, st)
				if err != nil {
					return err
				}
				if err := bc.book.Append(r); err != nil {
					return err
				}
				got, after = got+1, r.ID
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if got < warmSlice {
				return tx.loadMachineBilled(ctx, &bc.book, st)
			}
			return nil
		})
		if err != nil {
			bc.book.Reset()
			return 0, fmt.Errorf("load billing book: %w", err)
		}
		if moved {
			bc.book.Reset()
			return 0, nil // the next close rebuilds the Book in its own transaction
		}
		n += got
		if got < warmSlice {
			break
		}
	}
	bc.valid, bc.synced = true, st0.CloseID
	return n, nil
}

// warmSlice is how many meters WarmBook reads per transaction.
var warmSlice = 100_000

// postBatch writes a transaction and its postings with multi-row
// statements, and moves the balances; the postings must sum to zero and
// name each account at most once. It returns the transaction's id.
func (tx *Tx) postBatch(ctx context.Context, t txn, postings []suanli.Posting) (int64, error) {
	var sum suanli.Money
	for _, p := range postings {
		sum += p.Amount
	}
	if sum != 0 {
		return 0, suanli.Errorf(suanli.EINTERNAL, "ledger: postings of %s txn sum to %d, not zero", t.Kind, sum)
	}
	id, err := tx.insert(ctx, `INSERT INTO ledger_txns (kind, account_id, instance_id, amount, from_us, to_us, quantity, memo, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, t.Kind, t.AccountID, t.InstanceID, int64(t.Amount), us(t.From), us(t.To), t.Quantity, t.Memo, us(t.At))
	if err != nil {
		return 0, err
	}
	const batch = 500
	for lo := 0; lo < len(postings); lo += batch {
		ps := postings[lo:min(lo+batch, len(postings))]
		args := make([]any, 0, 3*len(ps))
		bargs := make([]any, 0, 2*len(ps))
		for _, p := range ps {
			args = append(args, id, p.Account, int64(p.Amount))
			bargs = append(bargs, p.Account, int64(p.Amount))
		}
		if _, err := tx.exec(ctx, `INSERT INTO postings (txn_id, account, amount) VALUES `+values(len(ps), 3), args...); err != nil {
			return 0, err
		}
		if _, err := tx.exec(ctx, `INSERT INTO ledger_balances (account, balance) VALUES `+values(len(ps), 2)+`
			ON CONFLICT (account) DO UPDATE SET balance = ledger_balances.balance + excluded.balance`, bargs...); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// values returns n groups of k placeholders: "(?, ?), (?, ?)".
func values(n, k int) string {
	g := "(" + strings.TrimSuffix(strings.Repeat("?, ", k), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(g+", ", n), ", ")
}
