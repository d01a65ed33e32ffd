// Package suanli holds the domain of the Suanli compute marketplace: the types
// every other package speaks (accounts, machines, offers, instances, money,
// ledger entries, the agent sync protocol), the service interfaces that have
// several implementations (the SQL store, the HTTP client), the error type with
// its codes, and the pure rules that need no I/O (money arithmetic, state
// transitions).
//
// It imports only the standard library. It must not know about HTTP, SQL,
// Docker or any wall clock: callers pass times in.
package suanli
