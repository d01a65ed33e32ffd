package sqlstore

import (
	"context"
	"encoding/json"

	"github.com/suanli/suanli"
)

// CreateSchedule stores a recurring rental. sc.ID is set.
func (s *DB) CreateSchedule(ctx context.Context, sc *suanli.Schedule) error {
	return s.withTx(ctx, func(tx *Tx) error {
		id, err := tx.insert(ctx, `INSERT INTO schedules (account_id, cron, query, gpus, hours, max_price, image, cmd, active, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, sc.AccountID, sc.Cron, sc.Query, sc.GPUs, sc.Hours, int64(sc.MaxPrice), sc.Image,
			jsonText(sc.Cmd), true, us(sc.CreatedAt))
		sc.ID, sc.Active = id, true
		return err
	})
}

// FindSchedules lists the recurring rentals of an account (0: all), active ones unless all.
func (s *DB) FindSchedules(ctx context.Context, accountID int64, all bool) ([]*suanli.Schedule, error) {
	q := `SELECT id, account_id, cron, query, gpus, hours, max_price, image, cmd, active, last_error, created_at FROM schedules WHERE 1 = 1`
	var args []any
	if accountID != 0 {
		q, args = q+` AND account_id = ?`, append(args, accountID)
	}
	if !all {
		q, args = q+` AND active = ?`, append(args, true)
	}
	rows, err := s.db.QueryContext(ctx, s.q(q+` ORDER BY id`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*suanli.Schedule{}
	for rows.Next() {
		var sc suanli.Schedule
		var price, created int64
		var cmd string
		if err := rows.Scan(&sc.ID, &sc.AccountID, &sc.Cron, &sc.Query, &sc.GPUs, &sc.Hours, &price, &sc.Image, &cmd, &sc.Active,
			&sc.LastError, &created); err != nil {
			return nil, err
		}
		sc.MaxPrice, sc.CreatedAt = suanli.Money(price), fromUS(created)
		json.Unmarshal([]byte(cmd), &sc.Cmd)
		out = append(out, &sc)
	}
	return out, rows.Err()
}

// SetScheduleState records a schedule's last error and whether it is active.
func (s *DB) SetScheduleState(ctx context.Context, id int64, active bool, lastError string) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE schedules SET active = ?, last_error = ? WHERE id = ?`), active, lastError, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("schedule", id)
	}
	return nil
}
