ALTER TABLE instances ADD COLUMN project TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN tags TEXT NOT NULL DEFAULT '{}';
ALTER TABLE instances ADD COLUMN guards TEXT NOT NULL DEFAULT '{}';
ALTER TABLE instances ADD COLUMN stopped_at BIGINT;

CREATE TABLE budgets (
	id             INTEGER PRIMARY KEY,
	account_id     BIGINT NOT NULL REFERENCES accounts(id),
	name           TEXT NOT NULL,
	scope          TEXT NOT NULL,
	amount         BIGINT NOT NULL,
	period         TEXT NOT NULL,
	start_us       BIGINT NOT NULL DEFAULT 0,
	end_us         BIGINT NOT NULL DEFAULT 0,
	thresholds     TEXT NOT NULL,
	action         TEXT NOT NULL,
	webhook_url    TEXT NOT NULL DEFAULT '',
	webhook_secret TEXT NOT NULL DEFAULT '',
	created_at     BIGINT NOT NULL,
	UNIQUE (account_id, name)
);

CREATE TABLE alerts (
	id          INTEGER PRIMARY KEY,
	account_id  BIGINT NOT NULL,
	kind        TEXT NOT NULL,
	budget_id   BIGINT NOT NULL DEFAULT 0,
	instance_id BIGINT NOT NULL DEFAULT 0,
	threshold   BIGINT NOT NULL DEFAULT 0,
	period_key  TEXT NOT NULL DEFAULT '',
	message     TEXT NOT NULL,
	delivery    TEXT NOT NULL DEFAULT '',
	created_at  BIGINT NOT NULL
);
CREATE INDEX alerts_account ON alerts(account_id, id);
CREATE UNIQUE INDEX alerts_once ON alerts(budget_id, period_key, threshold) WHERE budget_id <> 0;

CREATE TABLE idempotency_keys (
	account_id BIGINT NOT NULL,
	key        TEXT NOT NULL,
	method     TEXT NOT NULL,
	path       TEXT NOT NULL,
	body_hash  TEXT NOT NULL,
	status     BIGINT NOT NULL,
	response   BLOB NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (account_id, key)
);
CREATE INDEX idempotency_created ON idempotency_keys(created_at);
