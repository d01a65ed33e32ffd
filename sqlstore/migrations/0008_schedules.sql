CREATE TABLE schedules (
	id         INTEGER PRIMARY KEY,
	account_id BIGINT NOT NULL REFERENCES accounts(id),
	cron       TEXT NOT NULL,
	query      TEXT NOT NULL DEFAULT '',
	gpus       BIGINT NOT NULL,
	hours      BIGINT NOT NULL,
	max_price  BIGINT NOT NULL DEFAULT 0,
	image      TEXT NOT NULL,
	cmd        TEXT NOT NULL DEFAULT '[]',
	active     BOOLEAN NOT NULL DEFAULT TRUE,
	last_error TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL
);
