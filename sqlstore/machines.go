package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

const machineCols = `id, owner_id, hardware, simulated, status, last_heartbeat, agent_version, runtime, country, region, geolocation,
	datacenter, verified, inet_up_mbps, inet_down_mbps, reliability, listing, desired_version, created_at`

func (tx *Tx) createMachine(ctx context.Context, m *suanli.Machine) error {
	hw, _ := json.Marshal(m.Hardware)
	listing, _ := json.Marshal(m.Listing)
	id, err := tx.insert(ctx, `INSERT INTO machines (owner_id, hardware, simulated, status, last_heartbeat, agent_version, runtime, country, region,
		geolocation, datacenter, verified, inet_up_mbps, inet_down_mbps, reliability, listing, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.OwnerID, string(hw), m.Simulated, m.Status, us(m.LastHeartbeat), m.AgentVersion, m.Runtime, m.Country, m.Region,
		m.Geolocation, m.Datacenter, m.Verified, m.InetUpMbps, m.InetDownMbps, m.Reliability, string(listing), us(m.CreatedAt))
	if err != nil {
		return err
	}
	m.ID = id
	if err := tx.upsertBeat(ctx, id, us(m.LastHeartbeat)); err != nil {
		return err
	}
	return tx.noteChange(ctx, ChangeMachine, id)
}

type scanner interface{ Scan(...any) error }

func scanMachine(r scanner) (*suanli.Machine, int64, error) {
	var m suanli.Machine
	var hw, listing string
	var hb, created, version int64
	if err := r.Scan(&m.ID, &m.OwnerID, &hw, &m.Simulated, &m.Status, &hb, &m.AgentVersion, &m.Runtime, &m.Country, &m.Region,
		&m.Geolocation, &m.Datacenter, &m.Verified, &m.InetUpMbps, &m.InetDownMbps, &m.Reliability, &listing, &version, &created); err != nil {
		return nil, 0, err
	}
	if err := json.Unmarshal([]byte(hw), &m.Hardware); err != nil {
		return nil, 0, fmt.Errorf("machine %d hardware: %w", m.ID, err)
	}
	if err := json.Unmarshal([]byte(listing), &m.Listing); err != nil {
		return nil, 0, fmt.Errorf("machine %d listing: %w", m.ID, err)
	}
	m.LastHeartbeat, m.CreatedAt = fromUS(hb), fromUS(created)
	return &m, version, nil
}

// FindMachineByID returns a machine with the GPUs its live instances hold. ENOTFOUND.
func (s *DB) FindMachineByID(ctx context.Context, id int64) (*suanli.Machine, error) {
	ms, _, err := s.FindMachines(ctx, suanli.MachineFilter{ID: &id})
	if err != nil {
		return nil, err
	} else if len(ms) == 0 {
		return nil, notFound("machine", id)
	}
	return ms[0], nil
}

// FindMachines lists machines by filter, in id order, and the total count.
func (s *DB) FindMachines(ctx context.Context, f suanli.MachineFilter) ([]*suanli.Machine, int, error) {
	var where []string
	var args []any
	if f.ID != nil {
		where, args = append(where, "id = ?"), append(args, *f.ID)
	}
	if f.OwnerID != nil {
		where, args = append(where, "owner_id = ?"), append(args, *f.OwnerID)
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	var out []*suanli.Machine
	var total int
	err := s.read(ctx, func(tx *Tx) error {
		rows, err := tx.query(ctx, `SELECT `+machineCols+` FROM machines`+cond+` ORDER BY id`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var all []*suanli.Machine
		for rows.Next() {
			m, _, err := scanMachine(rows)
			if err != nil {
				return err
			}
			if f.Listed != nil && m.Listing.Listed != *f.Listed {
				continue
			}
			all = append(all, m)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		total = len(all)
		out = page(all, f.Offset, f.Limit)
		if err := tx.overlayBeats(ctx, out); err != nil {
			return err
		}
		for _, m := range out {
			if m.GPUsInUse, err = tx.gpusInUse(ctx, m.ID); err != nil {
				return err
			}
		}
		return nil
	})
	return out, total, err
}

func page[T any](all []T, offset, limit int) []T {
	if offset > len(all) {
		offset = len(all)
	}
	all = all[offset:]
	if limit > 0 && limit < len(all) {
		all = all[:limit]
	}
	return all
}

// gpusInUse returns the GPU indexes owned by the machine's live instances
// (suanli.Instance.OwnsGPUs), other than those in except.
func (tx *Tx) gpusInUse(ctx context.Context, machineID int64, except ...int64) ([]int, error) {
	rows, err := tx.query(ctx, `SELECT id, gpu_indexes, status FROM instances WHERE machine_id = ? AND status <> ?`,
		machineID, suanli.StatusDestroyed)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	used := []int{}
	for rows.Next() {
		var id int64
		var idx, status string
		if err := rows.Scan(&id, &idx, &status); err != nil {
			return nil, err
		}
		if !(&suanli.Instance{Status: status}).OwnsGPUs() || slices.Contains(except, id) {
			continue
		}
		var xs []int
		if err := json.Unmarshal([]byte(idx), &xs); err != nil {
			return nil, err
		}
		used = append(used, xs...)
	}
	return used, rows.Err()
}

// coresInUse returns the CPU cores and RAM (MB) owned by the machine's live
// instances (suanli.Instance.OwnsGPUs), other than those in except.
func (tx *Tx) coresInUse(ctx context.Context, machineID int64, except ...int64) (cores int, ramMB int64, err error) {
	rows, err := tx.query(ctx, `SELECT id, cpu_cores, ram_mb, status FROM instances WHERE machine_id = ? AND status <> ?`,
		machineID, suanli.StatusDestroyed)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var c int
		var id, r int64
		var status string
		if err := rows.Scan(&id, &c, &r, &status); err != nil {
			return 0, 0, err
		}
		if (&suanli.Instance{Status: status}).OwnsGPUs() && !slices.Contains(except, id) {
			cores, ramMB = cores+c, ramMB+r
		}
	}
	return cores, ramMB, rows.Err()
}

// UpdateListing stores a machine's listing and bumps its desired version.
func (s *DB) UpdateListing(ctx context.Context, id int64, l suanli.Listing, country, region string) (*suanli.Machine, error) {
	listing, _ := json.Marshal(l)
	err := s.withTx(ctx, func(tx *Tx) error {
		res, err := tx.exec(ctx, `UPDATE machines SET listing = ?, country = ?, region = ? WHERE id = ?`, string(listing), country, region, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("machine", id)
		}
		return tx.noteChange(ctx, ChangeListing, id)
	})
	if err != nil {
		return nil, err
	}
	return s.FindMachineByID(ctx, id)
}

// Heartbeat is what a sync changes on a machine.
type Heartbeat struct {
	At           time.Time
	Status       string
	AgentVersion string
	Runtime      string
	Hardware     *suanli.Hardware // nil: unchanged
}

// RecordHeartbeat stores a machine's heartbeat (and hardware when sent) at
// once; beats that change nothing go through RecordBeats in batches.
func (s *DB) RecordHeartbeat(ctx context.Context, id int64, h Heartbeat) error {
	return s.withTx(ctx, func(tx *Tx) error {
		// A status or hardware change is on the change feed (other replicas
		// reload the machine's offer); a plain heartbeat is not.
		var was string
		if err := tx.queryRow(ctx, `SELECT status FROM machines WHERE id = ?`, id).Scan(&was); err != nil && !isNoRows(err) {
			return err
		}
		if h.Hardware != nil || was != h.Status {
			if err := tx.noteChange(ctx, ChangeStatus, id); err != nil {
				return err
			}
		}
		if h.Hardware != nil {
			hw, _ := json.Marshal(h.Hardware)
			sim := false
			for _, g := range h.Hardware.GPUs {
				sim = sim || g.Simulated
			}
			if _, err := tx.exec(ctx, `UPDATE machines SET hardware = ?, simulated = ? WHERE id = ?`, string(hw), sim, id); err != nil {
				return err
			}
		}
		_, err := tx.exec(ctx, `UPDATE machines SET last_heartbeat = ?, status = ?, agent_version = ?, runtime = ? WHERE id = ?`,
			us(h.At), h.Status, h.AgentVersion, h.Runtime, id)
		if err != nil {
			return err
		}
		return tx.upsertBeat(ctx, id, us(h.At))
	})
}

// SetMachineStatus changes a machine's lease status (online/suspect/offline).
func (s *DB) SetMachineStatus(ctx context.Context, id int64, status string) error {
	return s.withTx(ctx, func(tx *Tx) error {
		if _, err := tx.exec(ctx, `UPDATE machines SET status = ? WHERE id = ?`, status, id); err != nil {
			return err
		}
		return tx.noteChange(ctx, ChangeStatus, id)
	})
}

// DesiredVersion returns the machine's desired-state version.
func (s *DB) DesiredVersion(ctx context.Context, id int64) (int64, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT desired_version FROM machines WHERE id = ?`), id).Scan(&v)
	if isNoRows(err) {
		return 0, notFound("machine", id)
	}
	return v, err
}

// bumpDesired marks a change to what the machine's agent should run, and
// so to its offer: its agent is woken, on whichever replica it waits.
func (tx *Tx) bumpDesired(ctx context.Context, machineID int64) error {
	if _, err := tx.exec(ctx, `UPDATE machines SET desired_version = desired_version + 1 WHERE id = ?`, machineID); err != nil {
		return err
	}
	return tx.noteChange(ctx, ChangeDesired, machineID)
}

// MachineUsage returns what a machine's live instances hold now.
func (s *DB) MachineUsage(ctx context.Context, id int64) (gpus []int, cores int, ramMB int64, err error) {
	err = s.read(ctx, func(tx *Tx) error {
		if gpus, err = tx.gpusInUse(ctx, id); err != nil {
			return err
		}
		cores, ramMB, err = tx.coresInUse(ctx, id)
		return err
	})
	return gpus, cores, ramMB, err
}

// Host events counted for the reliability score.
const (
	HostStarted     = "started_count"
	HostLost        = "lost_count"
	HostFailedStart = "failed_starts"
)

// CountHostEvent adds one to a machine's reliability counter.
func (s *DB) CountHostEvent(ctx context.Context, machineID int64, event string) error {
	switch event {
	case HostStarted, HostLost, HostFailedStart:
	default:
		return fmt.Errorf("unknown host event %q", event)
	}
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE machines SET `+event+` = `+event+` + 1 WHERE id = ?`), machineID)
	return err
}

// ObserveHosts adds elapsed to every machine's observed time and to its
// online time, less the part of it offline says the machine was not online
// (machines missing from offline were online throughout), then recomputes
// reliability scores. It returns the machines whose score crossed a
// half-percent step, so that offers are refreshed without rewriting the
// index on every check.
func (s *DB) ObserveHosts(ctx context.Context, offline map[int64]time.Duration, elapsed time.Duration) ([]int64, error) {
	secs := int64(elapsed / time.Second)
	if secs <= 0 {
		return nil, nil
	}
	var changed []int64
	err := s.withTx(ctx, func(tx *Tx) error {
		rows, err := tx.query(ctx, `SELECT id, observed_s, online_s, started_count, lost_count, failed_starts, reliability FROM machines`)
		if err != nil {
			return err
		}
		type rec struct {
			id  int64
			h   suanli.HostRecord
			old float64
		}
		var all []rec
		for rows.Next() {
			var r rec
			var obs, on int64
			if err := rows.Scan(&r.id, &obs, &on, &r.h.Started, &r.h.Lost, &r.h.FailedStarts, &r.old); err != nil {
				rows.Close()
				return err
			}
			obs += secs
			on += max(0, secs-int64(offline[r.id]/time.Second))
			r.h.Observed, r.h.Online = time.Duration(obs)*time.Second, time.Duration(on)*time.Second
			all = append(all, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range all {
			score := r.h.Reliability()
			if math.Round(score*200) != math.Round(r.old*200) {
				changed = append(changed, r.id)
				if err := tx.noteChange(ctx, ChangeReliability, r.id); err != nil {
					return err
				}
			}
			if _, err := tx.exec(ctx, `UPDATE machines SET observed_s = ?, online_s = ?, reliability = ? WHERE id = ?`,
				int64(r.h.Observed/time.Second), int64(r.h.Online/time.Second), score, r.id); err != nil {
				return err
			}
		}
		return nil
	})
	return changed, err
}

// HostRecord returns a machine's reliability record.
func (s *DB) HostRecord(ctx context.Context, id int64) (suanli.HostRecord, error) {
	var h suanli.HostRecord
	var obs, on int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT observed_s, online_s, started_count, lost_count, failed_starts FROM machines WHERE id = ?`), id).
		Scan(&obs, &on, &h.Started, &h.Lost, &h.FailedStarts)
	h.Observed, h.Online = time.Duration(obs)*time.Second, time.Duration(on)*time.Second
	return h, err
}
