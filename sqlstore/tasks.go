package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/suanli/suanli"
)

// ChangeTask and ChangeTaskResult are the change feed entries of the agent
// task relay: a task was posted or withdrawn for a machine, a result was
// posted for one of its tasks.
const (
	ChangeTask       = "task"
	ChangeTaskResult = "task_result"
)

// PostAgentTask stores a task for a machine's agent, for whichever replica
// the agent syncs with to hand it over.
func (s *DB) PostAgentTask(ctx context.Context, machineID int64, t suanli.AgentTask, now time.Time) error {
	body, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return s.withTx(ctx, func(tx *Tx) error {
		if _, err := tx.exec(ctx, `INSERT INTO agent_tasks (id, machine_id, origin, task, created_at) VALUES (?, ?, ?, ?, ?)`,
			t.ID, machineID, s.origin, string(body), us(now)); err != nil {
			return err
		}
		return tx.noteChange(ctx, ChangeTask, machineID)
	})
}

// DeleteAgentTask withdraws a task (answered, or its requester gave up).
func (s *DB) DeleteAgentTask(ctx context.Context, machineID int64, id string) error {
	return s.withTx(ctx, func(tx *Tx) error {
		if _, err := tx.exec(ctx, `DELETE FROM agent_tasks WHERE id = ?`, id); err != nil {
			return err
		}
		return tx.noteChange(ctx, ChangeTask, machineID)
	})
}

// PendingAgentTasks returns a machine's tasks that have no result yet,
// posted after since, oldest first.
func (s *DB) PendingAgentTasks(ctx context.Context, machineID int64, since time.Time) ([]suanli.AgentTask, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT task FROM agent_tasks WHERE machine_id = ? AND result IS NULL AND created_at > ? ORDER BY created_at, id`),
		machineID, us(since))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []suanli.AgentTask
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		var t suanli.AgentTask
		if err := json.Unmarshal([]byte(body), &t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// PostTaskResult stores an agent's result for a task posted by another
// replica. It reports whether the task was there, waiting for it.
func (s *DB) PostTaskResult(ctx context.Context, machineID int64, r suanli.TaskResult) (bool, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return false, err
	}
	found := false
	err = s.withTx(ctx, func(tx *Tx) error {
		res, err := tx.exec(ctx, `UPDATE agent_tasks SET result = ? WHERE id = ? AND machine_id = ? AND result IS NULL`, string(body), r.ID, machineID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		found = true
		return tx.noteChange(ctx, ChangeTaskResult, machineID)
	})
	return found, err
}

// TaskResults returns the results posted for the given tasks, by id.
func (s *DB) TaskResults(ctx context.Context, ids []string) (map[string]suanli.TaskResult, error) {
	out := map[string]suanli.TaskResult{}
	for _, id := range ids {
		var body sql.NullString
		err := s.db.QueryRowContext(ctx, s.q(`SELECT result FROM agent_tasks WHERE id = ?`), id).Scan(&body)
		if isNoRows(err) || (err == nil && !body.Valid) {
			continue
		} else if err != nil {
			return nil, err
		}
		var r suanli.TaskResult
		if err := json.Unmarshal([]byte(body.String), &r); err != nil {
			return nil, err
		}
		out[id] = r
	}
	return out, nil
}

// PruneAgentTasks deletes tasks posted before before (their requesters
// died waiting). It returns how many.
func (s *DB) PruneAgentTasks(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM agent_tasks WHERE created_at < ?`), us(before))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
