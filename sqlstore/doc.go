// Package sqlstore is the one database/sql implementation of Suanli's
// storage: SQLite by default (a file, WAL, synchronous=FULL, one writer
// connection) and PostgreSQL through a small dialect value. It owns the schema
// (embedded, numbered migrations), transactions, and the rules that must hold
// inside one transaction: capacity re-checks when a plan is applied, meters
// settled into balanced double-entry ledger postings, idempotent usage and
// log ingestion.
//
// It must not decide placement, parse queries or talk HTTP; callers pass the
// time in (no wall clock here).
package sqlstore
