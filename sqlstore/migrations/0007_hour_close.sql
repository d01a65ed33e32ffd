-- The hour close (package billing): meters carry the close their row was
-- written against, and a flag that tells the close which rows changed since
-- it last read them. Comments here must not contain semicolons.
ALTER TABLE meters ADD COLUMN close_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE meters ADD COLUMN dirty BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX meters_dirty ON meters(id) WHERE dirty;
CREATE INDEX meters_account ON meters(account_id);
CREATE INDEX meters_host ON meters(host_id);

-- One row per close: the calendar the sub-ledger derives lines from, and
-- what the close posted, for the audit. Ids are explicit and contiguous.
CREATE TABLE bill_closes (
	id         BIGINT PRIMARY KEY,
	txn_id     BIGINT NOT NULL REFERENCES ledger_txns(id),
	through_us BIGINT NOT NULL,
	meters     BIGINT NOT NULL,
	lines      BIGINT NOT NULL,
	legs       BIGINT NOT NULL,
	written    BIGINT NOT NULL,
	amount     BIGINT NOT NULL,
	fees       BIGINT NOT NULL,
	digest     BIGINT NOT NULL,
	created_at BIGINT NOT NULL
);

-- A stretch of an active meter's life billed by closes (close_lo, close_hi],
-- recorded when the meter's row is written again, with the terms it had
-- then (a moved instance's meters change host and rate). amount is what
-- those closes charged it.
CREATE TABLE meter_spans (
	id         INTEGER PRIMARY KEY,
	meter_id   BIGINT NOT NULL REFERENCES meters(id),
	machine_id BIGINT NOT NULL,
	host_id    BIGINT NOT NULL,
	rate       BIGINT NOT NULL,
	period_us  BIGINT NOT NULL,
	fee_bp     BIGINT NOT NULL,
	since      BIGINT NOT NULL,
	remainder  BIGINT NOT NULL,
	close_lo   BIGINT NOT NULL,
	close_hi   BIGINT NOT NULL,
	amount     BIGINT NOT NULL
);
CREATE INDEX meter_spans_host ON meter_spans(host_id);
CREATE INDEX meter_spans_meter ON meter_spans(meter_id);

-- How far a close billed compute on a machine whose last heartbeat was
-- before the close (a silent host is billed to its last heartbeat, never
-- beyond). Absent: up to the close's time.
CREATE TABLE bill_caps (
	close_id   BIGINT NOT NULL,
	machine_id BIGINT NOT NULL,
	through_us BIGINT NOT NULL,
	PRIMARY KEY (machine_id, close_id)
);

-- The latest close: every transaction that writes a meter reads it (shared),
-- a close updates it (exclusive).
CREATE TABLE bill_state (
	id         BIGINT PRIMARY KEY,
	close_id   BIGINT NOT NULL,
	through_us BIGINT NOT NULL
);
INSERT INTO bill_state (id, close_id, through_us) VALUES (1, 0, 0);
