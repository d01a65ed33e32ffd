// Package control is the control plane's service layer: it composes the
// store (sqlstore), the offer index (market), placement (sched) and the
// billing rules into the suanli service interfaces that the HTTP API, the
// Vast compatibility layer and the tests call. It also runs the control
// plane's loops: the hour close that settles running meters into the ledger
// (on the hour by default; costs it shows are always settled plus accrued)
// and host leases (online → suspect → offline, instances lost).
//
// Heartbeats (heartbeats.go, leases.go): a sync that changes nothing, and
// every beat of the light UDP channel (package heartbeat), is recorded
// only in the in-memory table Beats; RunHeartbeats, on every replica,
// writes the beats heard to the store in one batch per BeatFlushInterval
// (1 s). Syncs that change something write at once. The lease checker
// reads the persisted times (so it sees every replica's agents, at most a
// flush late), asks the store only for machines silent past suspect_after,
// and reads every machine once per LeaseRescanInterval; every close first
// flushes this replica's table (sqlstore.DB.SetBeforeClose), so compute is
// billed up to the last heartbeat heard and never past one a machine did
// not send. A dead agent is suspect within suspect_after + one lease tick
// of its last beat; a live one never is, as long as suspect_after exceeds
// the heartbeat interval plus the flush interval.
//
// It owns authentication of secrets into a Principal (API keys, temporary
// tokens, instance tokens; team selection narrows a principal to its role)
// and every ownership check: another tenant's object is ENOTFOUND. It seals
// instance secrets before the store sees them and opens them only for the
// instance's agent, and it records its own mutations (lease losses) in the
// audit log. It must not speak HTTP.
package control
