package sqlstore

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/billing"
)

// The sub-ledger itemizes hour closes per instance without a row per
// charge: a close's line for a meter is derived (billing.Span.Lines) from
// the meter's span — its terms and the state its row had when written, kept
// in meter_spans once the row is written again — and the close calendar
// (bill_closes). Reads of charges merge these lines with the ledger's own
// rows (inline charges at status changes, traffic, credits, payouts),
// ordered as the row-per-charge ledger ordered them: by ledger transaction,
// a close's lines by meter id.

// calendar returns the closes up to st, as the transaction sees them, and
// their through times. Closes never change once committed, so the store
// keeps them in memory and reads only the new ones.
func (tx *Tx) calendar(ctx context.Context, st billState) ([]closeInfo, []int64, error) {
	bc := &tx.s.bill
	bc.calMu.Lock()
	defer bc.calMu.Unlock()
	if n := int64(len(bc.cal)); n < st.CloseID {
		rows, err := tx.query(ctx, `SELECT id, txn_id, through_us, created_at FROM bill_closes WHERE id > ? AND id <= ? ORDER BY id`, n, st.CloseID)
		if err != nil {
			return nil, nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var c closeInfo
			if err := rows.Scan(&c.ID, &c.TxnID, &c.Through, &c.CreatedAt); err != nil {
				return nil, nil, err
			}
			if c.ID != int64(len(bc.cal))+1 {
				return nil, nil, suanli.Errorf(suanli.EINTERNAL, "close calendar: close %d follows close %d", c.ID, len(bc.cal))
			}
			bc.cal, bc.throughs = append(bc.cal, c), append(bc.throughs, c.Through)
		}
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
	}
	if int64(len(bc.cal)) < st.CloseID {
		return nil, nil, suanli.Errorf(suanli.EINTERNAL, "close calendar: %d closes stored, the latest is %d", len(bc.cal), st.CloseID)
	}
	n := int(st.CloseID)
	return bc.cal[:n:n], bc.throughs[:n:n], nil
}

// spanRow is a span with what reads show of its meter and instance.
type spanRow struct {
	billing.Span
	InstanceID int64
	Kind       string
	Lo, Hi     int          // the closes that billed it: ids (Lo, Hi], calendar indexes [Lo, Hi)
	Amount     suanli.Money // closed spans: what they were charged, as recorded
	Open       bool         // the meter's current row, not a recorded span
	Label      string
	Project    string
	Tags       string
	MachineID  int64 // the instance's machine now (reports group by it)
	// Bound is the machine whose heartbeats bounded how far the closes
	// billed the span (compute; 0: none), and ts the closes' through times
	// for it (Lo+1 … Hi).
	Bound int64
	ts    []int64
}

// spanInstanceCols are the attributes of a meter's instance (m), or of its
// volume (a volume meter's instance_id is the negated volume id): the
// project and tags reports and budgets group by. A volume has no label and
// no machine here, so that earnings and invoices treat its lines as before.
const (
	spanInstanceCols = `COALESCE(i.label, ''), COALESCE(i.project, v.project, ''), COALESCE(i.tags, v.tags, '{}'), COALESCE(i.machine_id, 0)`
	spanInstanceJoin = ` LEFT JOIN instances i ON i.id = m.instance_id LEFT JOIN volumes v ON m.instance_id < 0 AND v.id = -m.instance_id`
)

// closedSpans reads the close calendar (closes and their times) and the
// spans of col = id ("" for all) as of the latest close.
func (tx *Tx) closedSpans(ctx context.Context, col string, id int64) ([]closeInfo, []int64, []spanRow, error) {
	st, err := tx.readBillState(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	cal, throughs, err := tx.calendar(ctx, st)
	if err != nil {
		return nil, nil, nil, err
	}
	spans, err := tx.spans(ctx, col, id, st)
	return cal, throughs, spans, err
}

// spans returns the spans of the meters whose col equals id (every meter
// when col is ""): those recorded when a billed meter's row was written,
// and the open ones of active meters that closes billed since.
func (tx *Tx) spans(ctx context.Context, col string, id int64, st billState) ([]spanRow, error) {
	if st.CloseID == 0 {
		return nil, nil
	}
	var out []spanRow
	// A span keeps the host and rate its meter had (a move changes them);
	// instance, account and kind never change.
	where, swhere, args := "", "", []any{}
	if col != "" {
		where, swhere, args = ` AND m.`+col+` = ?`, ` AND m.`+col+` = ?`, append(args, id)
		if col == "host_id" {
			swhere = ` AND s.host_id = ?`
		}
	}
	rows, err := tx.query(ctx, `SELECT m.id, m.instance_id, m.account_id, s.host_id, m.kind, s.rate, s.period_us, s.fee_bp,
		s.since, s.remainder, s.close_lo, s.close_hi, s.amount, s.machine_id, `+spanInstanceCols+`
		FROM meter_spans s JOIN meters m ON m.id = s.meter_id`+spanInstanceJoin+`
		WHERE s.close_lo < ?`+swhere+` ORDER BY s.id`, append([]any{st.CloseID}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var sp spanRow
		var rate, amount, lo, hi int64
		if err := rows.Scan(&sp.MeterID, &sp.InstanceID, &sp.AccountID, &sp.HostID, &sp.Kind, &rate, &sp.PeriodUS, &sp.FeeBP,
			&sp.Since, &sp.Remainder, &lo, &hi, &amount, &sp.Bound, &sp.Label, &sp.Project, &sp.Tags, &sp.MachineID); err != nil {
			return nil, err
		}
		sp.Rate, sp.Amount, sp.Lo, sp.Hi = suanli.Money(rate), suanli.Money(amount), int(lo), int(min(hi, st.CloseID))
		out = append(out, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	// "active <> FALSE" rather than "active = TRUE" when selecting by a
	// column: an index on that column beats the one on active.
	active, isActive := `m.active = ?`, any(true)
	if col != "" {
		active, isActive = `m.active <> ?`, false
	}
	rows, err = tx.query(ctx, `SELECT m.id, m.instance_id, m.account_id, m.host_id, m.kind, m.rate, m.period_us, m.fee_bp,
		m.since, m.remainder, m.close_id, `+spanInstanceCols+`
		FROM meters m`+spanInstanceJoin+`
		WHERE `+active+` AND m.close_id < ? AND m.since < ?`+where+` ORDER BY m.id`, append([]any{isActive, st.CloseID, st.Through}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		sp := spanRow{Open: true, Hi: int(st.CloseID)}
		var rate, lo int64
		if err := rows.Scan(&sp.MeterID, &sp.InstanceID, &sp.AccountID, &sp.HostID, &sp.Kind, &rate, &sp.PeriodUS, &sp.FeeBP,
			&sp.Since, &sp.Remainder, &lo, &sp.Label, &sp.Project, &sp.Tags, &sp.MachineID); err != nil {
			return nil, err
		}
		sp.Rate, sp.Lo = suanli.Money(rate), int(lo)
		if sp.Kind == suanli.MeterCompute {
			sp.Bound = sp.MachineID
		}
		out = append(out, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	return out, tx.spanThroughs(ctx, out, st)
}

// spanThroughs gives each span the through times of the closes that billed
// it: the calendar's, or, where a close billed compute on the span's
// machine short of its time, that (bill_caps).
func (tx *Tx) spanThroughs(ctx context.Context, spans []spanRow, st billState) error {
	_, throughs, err := tx.calendar(ctx, st)
	if err != nil {
		return err
	}
	type window struct{ lo, hi int }
	bound := map[int64]window{}
	for i := range spans {
		sp := &spans[i]
		sp.ts = throughs[sp.Lo:sp.Hi]
		if sp.Bound != 0 {
			w, ok := bound[sp.Bound]
			if !ok {
				w = window{sp.Lo, sp.Hi}
			}
			bound[sp.Bound] = window{min(w.lo, sp.Lo), max(w.hi, sp.Hi)}
		}
	}
	caps := map[int64]map[int]int64{} // machine → calendar index → through
	for machine, w := range bound {
		rows, err := tx.query(ctx, `SELECT close_id, through_us FROM bill_caps WHERE machine_id = ? AND close_id > ? AND close_id <= ?`,
			machine, w.lo, w.hi)
		if err != nil {
			return err
		}
		c := map[int]int64{}
		for rows.Next() {
			var id, t int64
			if err := rows.Scan(&id, &t); err != nil {
				rows.Close()
				return err
			}
			c[int(id)-1] = t
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		caps[machine] = c
	}
	for i := range spans {
		sp := &spans[i]
		c := caps[sp.Bound]
		if len(c) == 0 {
			continue
		}
		ts := slices.Clone(sp.ts)
		for k := range ts {
			if t, ok := c[sp.Lo+k]; ok {
				ts[k] = t
			}
		}
		sp.ts = ts
	}
	return nil
}

// eachLine calls fn for every line that the closes with calendar index in
// [a, b) charged the spans, with the close's calendar index.
func eachLine(spans []spanRow, a, b int, fn func(sp *spanRow, k int, l billing.Line)) {
	for i := range spans {
		sp := &spans[i]
		x, y := max(sp.Lo, a), min(sp.Hi, b)
		if x >= y {
			continue
		}
		for l := range sp.Lines(sp.ts, x-sp.Lo, y-sp.Lo) {
			fn(sp, sp.Lo+l.Close, l)
		}
	}
}

// closeIndex returns the first calendar index whose close is at or after
// t (µs): closes' created_at and through are the same instant.
func closeIndex(throughs []int64, t int64) int {
	return sort.Search(len(throughs), func(i int) bool { return throughs[i] >= t })
}

// chargeKey orders charges as the row-per-charge ledger did: by ledger
// transaction, and a close's lines by meter id. Ledger rows have meter 0.
type chargeKey struct{ txn, meter int64 }

func (k chargeKey) less(o chargeKey) bool {
	return k.txn < o.txn || k.txn == o.txn && k.meter < o.meter
}

// lineRef is a derived line kept for a page of charges.
type lineRef struct {
	key chargeKey
	sp  *spanRow
	k   int
	l   billing.Line
}

// topLines keeps the n lines with the highest keys (a min-heap).
type topLines struct {
	n     int
	items []lineRef
}

func (h *topLines) Len() int           { return len(h.items) }
func (h *topLines) Less(i, j int) bool { return h.items[i].key.less(h.items[j].key) }
func (h *topLines) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *topLines) Push(x any)         { h.items = append(h.items, x.(lineRef)) }
func (h *topLines) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

func (h *topLines) offer(r lineRef) {
	if h.n <= 0 {
		return
	}
	if len(h.items) < h.n {
		heap.Push(h, r)
	} else if h.items[0].key.less(r.key) {
		h.items[0] = r
		heap.Fix(h, 0)
	}
}

// auditCloses re-derives every close's lines from the sub-ledger and
// compares them with what each close recorded and posted. It returns one
// line per difference; a healthy ledger has none.
func (tx *Tx) auditCloses(ctx context.Context) ([]string, error) {
	st, err := tx.readBillState(ctx)
	if err != nil || st.CloseID == 0 {
		return nil, err
	}
	cal, _, err := tx.calendar(ctx, st)
	if err != nil {
		return nil, err
	}
	spans, err := tx.spans(ctx, "", 0, st)
	if err != nil {
		return nil, err
	}
	type tally struct {
		lines, legs  int64
		amount, fees suanli.Money
		digest       uint64
	}
	got := make([]tally, len(cal))
	accounts := map[string]suanli.Money{}
	var problems []string
	for i := range spans {
		sp := &spans[i]
		var sum suanli.Money
		eachLine(spans[i:i+1], 0, len(cal), func(sp *spanRow, k int, l billing.Line) {
			t := &got[k]
			t.lines++
			t.legs += int64(billing.Legs(l.Amount, l.Fee))
			t.amount += l.Amount
			t.fees += l.Fee
			t.digest += sp.Digest(l)
			sum += l.Amount
			accounts[suanli.LedgerBalance(sp.AccountID)] -= l.Amount
			accounts[suanli.LedgerEarnings(sp.HostID)] += l.Amount - l.Fee
			accounts[suanli.LedgerPlatformFees] += l.Fee
		})
		if !sp.Open && sum != sp.Amount {
			problems = append(problems, fmt.Sprintf("meter %d: span of closes %d-%d recorded %d, lines sum to %d", sp.MeterID, sp.Lo+1, sp.Hi, sp.Amount, sum))
		}
	}
	rows, err := tx.query(ctx, `SELECT id, lines, legs, amount, fees, digest FROM bill_closes WHERE id <= ? ORDER BY id`, st.CloseID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, lines, legs, amount, fees, digest int64
		if err := rows.Scan(&id, &lines, &legs, &amount, &fees, &digest); err != nil {
			return nil, err
		}
		t := got[id-1]
		if t.lines != lines || t.legs != legs || t.amount != suanli.Money(amount) || t.fees != suanli.Money(fees) || t.digest != uint64(digest) {
			problems = append(problems, fmt.Sprintf("close %d: recorded %d lines, %d legs, %d charged, %d fees, digest %x; the sub-ledger derives %d, %d, %d, %d, %x",
				id, lines, legs, amount, fees, uint64(digest), t.lines, t.legs, t.amount, t.fees, t.digest))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	rows, err = tx.query(ctx, `SELECT p.account, SUM(p.amount) FROM postings p JOIN ledger_txns t ON t.id = p.txn_id
		WHERE t.kind = ? GROUP BY p.account ORDER BY p.account`, txnClose)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var a string
		var sum int64
		if err := rows.Scan(&a, &sum); err != nil {
			return nil, err
		}
		if accounts[a] != suanli.Money(sum) {
			problems = append(problems, fmt.Sprintf("%s: closes posted %d, the sub-ledger derives %d", a, sum, accounts[a]))
		}
		delete(accounts, a)
	}
	for a, v := range accounts {
		if v != 0 {
			problems = append(problems, fmt.Sprintf("%s: closes posted nothing, the sub-ledger derives %d", a, v))
		}
	}
	sort.Strings(problems)
	return problems, rows.Err()
}
