// Package control is the control plane's service layer: it composes the
// store (sqlstore), the offer index (market), placement (sched) and the
// billing rules into the suanli service interfaces that the HTTP API, the
// Vast compatibility layer and the tests call. It also runs the control
// plane's loops: settlement of meters into the ledger and host leases
// (online → suspect → offline, instances lost).
//
// It owns authentication of secrets into a Principal (API keys, temporary
// tokens, instance tokens; team selection narrows a principal to its role)
// and every ownership check: another tenant's object is ENOTFOUND. It seals
// instance secrets before the store sees them and opens them only for the
// instance's agent, and it records its own mutations (lease losses) in the
// audit log. It must not speak HTTP.
package control
