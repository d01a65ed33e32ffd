package suanli

import "time"

// DeferredCreate asks to run a job of Hours on GPUs matching Query whenever
// it is cheapest before Deadline, at most MaxPrice per GPU-hour: in a
// published window (booked, price locked) or now on the market.
type DeferredCreate struct {
	Query    string    `json:"query"` // offer conditions on the machine, e.g. "gpu_name=RTX_4090"
	GPUs     int       `json:"gpus"`
	Hours    int       `json:"hours"`
	Deadline time.Time `json:"deadline"`
	MaxPrice Money     `json:"max_price,omitempty"` // per GPU-hour; 0: any
	Image    string    `json:"image"`
	Cmd      []string  `json:"cmd,omitempty"`
}

// DeferredPlan is the choice made for a deferred job and why.
type DeferredPlan struct {
	Booking     *Booking  `json:"booking,omitempty"`  // the window booked, or nil
	Instance    *Instance `json:"instance,omitempty"` // started now when that was cheapest
	Cost        Money     `json:"cost"`
	NowCost     Money     `json:"now_cost"` // the same hours on the cheapest matching offer now; 0: none
	Saving      Money     `json:"saving"`   // NowCost − Cost when a window won
	Considered  int       `json:"considered"`
	Explanation string    `json:"explanation"`
	// ValleyAt and ValleyPrice are where price history (the median listed
	// price per GPU-hour by UTC hour of day, over the last week) puts the
	// cheapest start before the deadline; nil when there is no history for
	// the GPU model. Informational: only a published window can hold a
	// later start, so a valley with no window is reported, not waited for.
	ValleyAt    *time.Time `json:"valley_at,omitempty"`
	ValleyPrice Money      `json:"valley_price,omitempty"`
}

// Schedule is a recurring rental: at every time its cron expression names
// (UTC), a run of Hours on GPUs matching Query, each booked ahead in a
// published window at most MaxPrice per GPU-hour.
type Schedule struct {
	ID        int64     `json:"id"`
	AccountID int64     `json:"account_id"`
	Cron      string    `json:"cron"`
	Query     string    `json:"query"`
	GPUs      int       `json:"gpus"`
	Hours     int       `json:"hours"`
	MaxPrice  Money     `json:"max_price,omitempty"`
	Image     string    `json:"image"`
	Cmd       []string  `json:"cmd,omitempty"`
	Active    bool      `json:"active"`
	LastError string    `json:"last_error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	NextRun   time.Time `json:"next_run"` // filled on reads
}

// ScheduleAhead is how far ahead a recurring rental's runs are booked.
const ScheduleAhead = 24 * time.Hour
