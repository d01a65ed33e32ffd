package sqlstore

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/billing"
)

// Reads of charges: the ledger's rows (inline charges at status changes,
// traffic, credits, payouts) merged with the lines the sub-ledger derives
// for hour closes (subledger.go). A close's lines carry the id of the
// close's ledger transaction: they were posted in it.

// FindCharges lists charges (and credits) by filter, newest first, with totals by kind.
func (s *DB) FindCharges(ctx context.Context, f suanli.ChargeFilter) (*suanli.ChargeSummary, error) {
	where := []string{"kind <> ?"}
	args := []any{txnClose}
	if f.AccountID != nil {
		where, args = append(where, "account_id = ?"), append(args, *f.AccountID)
	}
	if f.InstanceID != nil {
		where, args = append(where, "instance_id = ?"), append(args, *f.InstanceID)
	}
	if f.Since != nil {
		where, args = append(where, "created_at >= ?"), append(args, us(*f.Since))
	}
	cond := " WHERE " + strings.Join(where, " AND ")
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	offset := max(f.Offset, 0)
	sum := &suanli.ChargeSummary{ByKind: map[string]suanli.Money{}, Charges: []*suanli.Charge{}}
	err := s.read(ctx, func(tx *Tx) error {
		rows, err := tx.query(ctx, `SELECT kind, SUM(amount), COUNT(*) FROM ledger_txns`+cond+` GROUP BY kind`, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var kind string
			var amt int64
			var n int
			if err := rows.Scan(&kind, &amt, &n); err != nil {
				rows.Close()
				return err
			}
			sum.ByKind[kind] = suanli.Money(amt)
			if kind != "credit" {
				sum.Total += suanli.Money(amt)
			}
			sum.Count += n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// The newest offset+limit rows and lines; the page is cut from both.
		rows, err = tx.query(ctx, `SELECT id, account_id, instance_id, kind, amount, from_us, to_us, quantity, memo, created_at FROM ledger_txns`+
			cond+` ORDER BY id DESC LIMIT `+strconv.Itoa(offset+limit), args...)
		if err != nil {
			return err
		}
		type keyed struct {
			key chargeKey
			c   *suanli.Charge
		}
		var page []keyed
		for rows.Next() {
			var c suanli.Charge
			var amt, from, to, created int64
			if err := rows.Scan(&c.ID, &c.AccountID, &c.InstanceID, &c.Kind, &amt, &from, &to, &c.Quantity, &c.Memo, &created); err != nil {
				rows.Close()
				return err
			}
			c.Amount, c.From, c.To, c.CreatedAt = suanli.Money(amt), fromUS(from), fromUS(to), fromUS(created)
			page = append(page, keyed{chargeKey{c.ID, 0}, &c})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		st, err := tx.readBillState(ctx)
		if err != nil {
			return err
		}
		cal, throughs, err := tx.calendar(ctx, st)
		if err != nil {
			return err
		}
		col, id := "", int64(0)
		if f.InstanceID != nil {
			col, id = "instance_id", *f.InstanceID
		} else if f.AccountID != nil {
			col, id = "account_id", *f.AccountID
		}
		spans, err := tx.spans(ctx, col, id, st)
		if err != nil {
			return err
		}
		first := 0
		if f.Since != nil {
			first = closeIndex(throughs, us(*f.Since))
		}
		top := &topLines{n: offset + limit}
		eachLine(spans, first, len(cal), func(sp *spanRow, k int, l billing.Line) {
			if f.AccountID != nil && sp.AccountID != *f.AccountID {
				return
			}
			sum.ByKind[sp.Kind] += l.Amount
			sum.Total += l.Amount
			sum.Count++
			top.offer(lineRef{key: chargeKey{cal[k].TxnID, sp.MeterID}, sp: sp, k: k, l: l})
		})
		for _, r := range top.items {
			page = append(page, keyed{r.key, &suanli.Charge{ID: r.key.txn, AccountID: r.sp.AccountID, InstanceID: r.sp.InstanceID, Kind: r.sp.Kind,
				Amount: r.l.Amount, From: fromUS(r.l.From), To: fromUS(r.l.To), Quantity: billing.Quantity(r.l.From, r.l.To),
				CreatedAt: fromUS(cal[r.k].CreatedAt)}})
		}
		sort.Slice(page, func(i, j int) bool { return page[j].key.less(page[i].key) })
		for _, p := range page[min(offset, len(page)):min(offset+limit, len(page))] {
			sum.Charges = append(sum.Charges, p.c)
		}
		return nil
	})
	return sum, err
}

// ChargeRow is one ledger charge with its instance's attributes, for
// reports, invoices and budgets. A volume's charge (InstanceID the negated
// volume id) has the volume's project and tags.
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
// ends in [from, to), with the attributes of their instances, in ledger
// order.
func (s *DB) ChargeRows(ctx context.Context, accountID int64, from, to time.Time) ([]ChargeRow, error) {
	var out []ChargeRow
	var keys []chargeKey
	err := s.read(ctx, func(tx *Tx) error {
		rows, err := tx.query(ctx, `SELECT t.id, t.instance_id, t.kind, t.amount, t.from_us, t.to_us, t.quantity,
		COALESCE(i.label, ''), COALESCE(i.project, v.project, ''), COALESCE(i.tags, v.tags, '{}'), COALESCE(i.machine_id, 0)
		FROM ledger_txns t LEFT JOIN instances i ON i.id = t.instance_id LEFT JOIN volumes v ON t.instance_id < 0 AND v.id = -t.instance_id
		WHERE t.account_id = ? AND t.kind <> 'credit' AND t.kind <> 'payout' AND t.kind <> ? AND t.to_us >= ? AND t.to_us < ? ORDER BY t.id`,
			accountID, txnClose, us(from), us(to))
		if err != nil {
			return err
		}
		for rows.Next() {
			var r ChargeRow
			var amount, f, t int64
			var tags string
			if err := rows.Scan(&r.TxnID, &r.InstanceID, &r.Kind, &amount, &f, &t, &r.Quantity, &r.Label, &r.Project, &tags, &r.MachineID); err != nil {
				rows.Close()
				return err
			}
			r.Amount, r.From, r.To = suanli.Money(amount), fromUS(f), fromUS(t)
			json.Unmarshal([]byte(tags), &r.Tags)
			out, keys = append(out, r), append(keys, chargeKey{r.TxnID, 0})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		cal, throughs, spans, err := tx.closedSpans(ctx, "account_id", accountID)
		if err != nil {
			return err
		}
		tags := map[int64]map[string]string{} // parsed once per instance, shared by its lines
		// A line ends at its close's time or, for compute on a silent host,
		// before it: select by the line's end, from the first close that can.
		eachLine(spans, closeIndex(throughs, us(from)), len(throughs), func(sp *spanRow, k int, l billing.Line) {
			if l.To < us(from) || l.To >= us(to) {
				return
			}
			tg, ok := tags[sp.InstanceID]
			if !ok {
				json.Unmarshal([]byte(sp.Tags), &tg)
				tags[sp.InstanceID] = tg
			}
			out = append(out, ChargeRow{TxnID: cal[k].TxnID, InstanceID: sp.InstanceID, Kind: sp.Kind, Amount: l.Amount, From: fromUS(l.From),
				To: fromUS(l.To), Quantity: billing.Quantity(l.From, l.To), Label: sp.Label, Project: sp.Project, Tags: tg, MachineID: sp.MachineID})
			keys = append(keys, chargeKey{cal[k].TxnID, sp.MeterID})
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Sort(byChargeKey{out, keys})
	return out, nil
}

type byChargeKey struct {
	rows []ChargeRow
	keys []chargeKey
}

func (b byChargeKey) Len() int           { return len(b.rows) }
func (b byChargeKey) Less(i, j int) bool { return b.keys[i].less(b.keys[j]) }
func (b byChargeKey) Swap(i, j int) {
	b.rows[i], b.rows[j] = b.rows[j], b.rows[i]
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
}

// EarningRow is one machine's earnings in a period.
type EarningRow struct {
	MachineID int64
	Gross     suanli.Money
	Net       suanli.Money
}

// EarningsByMachine sums a provider's earnings postings in [from, to) per
// machine: Net is what the postings gave the provider, Gross the charges
// they came from.
func (s *DB) EarningsByMachine(ctx context.Context, hostID int64, from, to time.Time) ([]EarningRow, error) {
	by := map[int64]*EarningRow{}
	err := s.read(ctx, func(tx *Tx) error {
		rows, err := tx.query(ctx, `SELECT i.machine_id, SUM(t.amount), SUM(p.amount)
		FROM postings p JOIN ledger_txns t ON t.id = p.txn_id JOIN instances i ON i.id = t.instance_id
		WHERE p.account = ? AND t.kind <> 'payout' AND t.kind <> ? AND t.to_us >= ? AND t.to_us < ? GROUP BY i.machine_id`,
			suanli.LedgerEarnings(hostID), txnClose, us(from), us(to))
		if err != nil {
			return err
		}
		for rows.Next() {
			var r EarningRow
			var g, n int64
			if err := rows.Scan(&r.MachineID, &g, &n); err != nil {
				rows.Close()
				return err
			}
			r.Gross, r.Net = suanli.Money(g), suanli.Money(n)
			by[r.MachineID] = &r
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		_, throughs, spans, err := tx.closedSpans(ctx, "host_id", hostID)
		if err != nil {
			return err
		}
		eachLine(spans, closeIndex(throughs, us(from)), len(throughs), func(sp *spanRow, k int, l billing.Line) {
			if l.To < us(from) || l.To >= us(to) {
				return // as ChargeRows: by the line's end
			}
			if l.Amount-l.Fee == 0 || sp.MachineID == 0 {
				return // no earnings posting (the fee took it all), or no instance: as the row-per-charge ledger
			}
			r := by[sp.MachineID]
			if r == nil {
				r = &EarningRow{MachineID: sp.MachineID}
				by[sp.MachineID] = r
			}
			r.Gross += l.Amount
			r.Net += l.Amount - l.Fee
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []EarningRow
	for _, r := range by {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MachineID < out[j].MachineID })
	return out, nil
}

// InstanceSettled is what an instance's settled charges sum to: its ledger
// rows and what hour closes charged it.
func (s *DB) InstanceSettled(ctx context.Context, id int64) (suanli.Money, error) {
	var v suanli.Money
	err := s.read(ctx, func(tx *Tx) error {
		st, err := tx.readBillState(ctx)
		if err != nil {
			return err
		}
		ms, err := tx.instanceMeters(ctx, id)
		if err != nil {
			return err
		}
		v, err = tx.instanceSettled(ctx, id, ms, st)
		return err
	})
	return v, err
}

// instanceSettled sums an instance's settled charges: its ledger rows, the
// recorded spans of its meters, and what closes charged its meters since
// their rows were written (ms are its meters).
func (tx *Tx) instanceSettled(ctx context.Context, id int64, ms map[string]*meter, st billState) (suanli.Money, error) {
	var rows, spans int64
	if err := tx.queryRow(ctx, `SELECT COALESCE(SUM(amount), 0) FROM ledger_txns WHERE instance_id = ? AND kind <> 'credit'`, id).Scan(&rows); err != nil {
		return 0, err
	}
	if st.CloseID > 0 {
		if err := tx.queryRow(ctx, `SELECT COALESCE(SUM(s.amount), 0) FROM meter_spans s JOIN meters m ON m.id = s.meter_id WHERE m.instance_id = ?`,
			id).Scan(&spans); err != nil {
			return 0, err
		}
	}
	v := suanli.Money(rows + spans)
	for _, m := range ms {
		if m.billedByCloses(st, m.Through) {
			v += m.span().Total(m.Through)
		}
	}
	return v, nil
}

// SettledByInstance returns every instance's settled charges (as
// InstanceSettled) in one pass over the ledger and the sub-ledger, for
// reconciliation and benchmarks. Instances with nothing settled are absent.
func (s *DB) SettledByInstance(ctx context.Context) (map[int64]suanli.Money, error) {
	out := map[int64]suanli.Money{}
	err := s.read(ctx, func(tx *Tx) error {
		add := func(q string, args ...any) error {
			rows, err := tx.query(ctx, q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id, v int64
				if err := rows.Scan(&id, &v); err != nil {
					return err
				}
				out[id] += suanli.Money(v)
			}
			return rows.Err()
		}
		if err := add(`SELECT instance_id, SUM(amount) FROM ledger_txns WHERE instance_id <> 0 AND kind <> 'credit' GROUP BY instance_id`); err != nil {
			return err
		}
		st, err := tx.readBillState(ctx)
		if err != nil || st.CloseID == 0 {
			return err
		}
		if err := add(`SELECT m.instance_id, SUM(s.amount) FROM meter_spans s JOIN meters m ON m.id = s.meter_id GROUP BY m.instance_id`); err != nil {
			return err
		}
		ms, err := tx.loadMeters(ctx, st, `m.active = ? AND m.close_id < ? AND m.since < ?`, true, st.CloseID, st.Through)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.billedByCloses(st, m.Through) {
				if v := m.span().Total(m.Through); v != 0 {
					out[m.InstanceID] += v
				}
			}
		}
		return nil
	})
	return out, err
}
