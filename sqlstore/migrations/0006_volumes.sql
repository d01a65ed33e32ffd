CREATE TABLE volumes (
	id         INTEGER PRIMARY KEY,
	account_id BIGINT NOT NULL REFERENCES accounts(id),
	machine_id BIGINT NOT NULL REFERENCES machines(id),
	host_id    BIGINT NOT NULL,
	name       TEXT NOT NULL,
	size_gb    BIGINT NOT NULL,
	rate       BIGINT NOT NULL,
	status     TEXT NOT NULL,
	project    TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	deleted_at BIGINT
);
CREATE INDEX volumes_account ON volumes(account_id);
CREATE INDEX volumes_machine ON volumes(machine_id);
ALTER TABLE instances ADD COLUMN volumes TEXT NOT NULL DEFAULT '[]';
