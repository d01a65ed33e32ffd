// Package market owns offer search: the query language of DESIGN §5 (Parse,
// ParseOrder, the default filters), the in-memory offer index the control
// plane keeps fresh on every listing, rental, release and heartbeat change
// (Index), the rules that derive per-search values (dph_total for the
// searched storage size, the per-dollar ratios, rentable per Viewer), and
// the explanation of why offers did not match.
//
// It takes plain data (offers) and returns plain data (results with
// reasons). It must not do I/O, read a clock, log, or import other Suanli
// subpackages; the store rebuilds the index by Putting every offer, and the
// HTTP layer maps its EINVALID errors to 400s.
package market
