// Package audit owns the tamper-evident audit log (DESIGN §7): every
// mutation is appended as an entry of a SHA-256 hash chain (each entry's
// hash covers its fields and the previous entry's hash), and the chain's
// head is signed with the server's ed25519 key in a checkpoint at least
// every minute. Verify walks the chain and the checkpoints and names every
// edited, deleted, reordered, inserted or truncated entry it finds.
//
// Retention: entries older than the retention (186 days, six calendar
// months, by default) are purged up to a checkpoint, which stays as the
// anchor the next entry chains from; the purge is itself an entry, so that
// a later Verify can tell an audited purge from a deletion.
//
// Limits, stated plainly: the chain is unkeyed, so someone who can write
// the database can append well-formed entries after the newest checkpoint,
// or delete the entries written since it (at most one checkpoint interval);
// everything a checkpoint covers is fixed by its signature. The newest
// checkpoint is also written to a head file outside the database, so that
// truncating entries and checkpoints together is detected too.
//
// It stores nothing itself (Store, implemented by sqlstore, does) and
// speaks no HTTP.
package audit
