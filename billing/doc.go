// Package billing holds the pure parts of Suanli's settlement: the hour
// close, which settles every running meter into the double-entry ledger at
// once, and the sub-ledger, which itemizes what each close charged each
// instance.
//
// # The close
//
// A Book is the in-memory set of active time-based meters (compute while an
// instance runs, storage until it is destroyed), sorted by meter id, each
// with its settled-up-to time and carried remainder (DESIGN §4). Closing it
// at a time T is integer arithmetic over that slice — suanli.Accrue per
// meter, split into the provider's earnings and the platform fee — and its
// result is aggregated per ledger account: one posting per renter balance,
// one per provider's earnings, one for the platform fee. Compute meters are
// settled no further than their machine's last heartbeat (a silent host is
// billed to its last heartbeat, never beyond), and a machine's bound never
// goes back from one close to the next. Nothing in the Book changes until
// Apply, so a close whose store transaction fails leaves the Book as it was.
//
// # The sub-ledger
//
// A close does not write one row per charge. Each per-instance charge line
// is a pure function of the meter's span — its rate, period, fee and the
// (since, remainder) it had when its row was last written — and the close
// calendar (the closes' through times, or their bounds on the span's
// machine): the line of close k is
// Accrue(since → T_k) − Accrue(since → T_k−1), which is exactly what a
// row-per-posting settlement at each T_k would have written, because
// Accrue's remainder makes consecutive accruals sum to one. Span.Lines
// derives them; Close.Digest and Span digests let an audit prove that the
// lines re-derived today are the lines the close posted.
//
// The package does no I/O and reads no clock: the store (sqlstore) loads
// Books, writes closes in one transaction, records spans when a meter's row
// changes, and derives lines for reads.
package billing
