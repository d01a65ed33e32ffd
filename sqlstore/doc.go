// Package sqlstore is the one database/sql implementation of Suanli's
// storage: SQLite by default (a file, WAL, synchronous=FULL, one writer
// connection) and PostgreSQL through a small dialect value. It owns the schema
// (embedded, numbered migrations), transactions, and the rules that must hold
// inside one transaction: capacity re-checks when a plan is applied, meters
// settled into balanced double-entry ledger postings, idempotent usage and
// log ingestion.
//
// Dialects (db.go): the SQL is written once with ? placeholders; the
// Dialect rewrites placeholders and a few words of DDL (PostgreSQL's
// INTEGER is 32 bits: every INTEGER becomes BIGINT). A writing transaction
// has the database to itself on both: SQLite begins IMMEDIATE on its one
// writer connection; PostgreSQL takes a transaction-scoped advisory lock per
// database and schema, which also serialises server processes sharing it.
// Copy (copy.go) moves a whole store between databases, verified.
//
// Billing (docs/billing.md): status changes settle the meters they touch
// inline; the periodic hour close (CloseBooks, closes.go) settles every
// active meter from an in-memory billing.Book in one transaction with one
// posting per ledger account, without writing meter rows; the sub-ledger
// (subledger.go) derives each close's per-instance lines from meter spans and
// the close calendar, and every read of charges (charges.go) merges them with
// the ledger's rows. The Book and the calendar are the only state it keeps in
// memory; both are rebuilt from the database.
//
// Heartbeats (beats.go): a machine's last heartbeat is the later of
// machines.last_heartbeat (written by syncs that change something) and its
// row in machine_heartbeats, which the control plane's heartbeat table
// writes in batches (RecordBeats); every read takes the later.
//
// It must not decide placement, parse queries or talk HTTP; callers pass the
// time in (no wall clock here).
package sqlstore
