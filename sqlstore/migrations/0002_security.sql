ALTER TABLE accounts ADD COLUMN kind TEXT NOT NULL DEFAULT 'user';
ALTER TABLE accounts ADD COLUMN allowed_countries TEXT NOT NULL DEFAULT '';

ALTER TABLE api_keys ADD COLUMN kind TEXT NOT NULL DEFAULT 'live';
ALTER TABLE api_keys ADD COLUMN parent_id BIGINT NOT NULL DEFAULT 0;
UPDATE api_keys SET kind = 'agent' WHERE machine_id <> 0;
CREATE INDEX api_keys_account ON api_keys(account_id);
CREATE INDEX api_keys_parent ON api_keys(parent_id);

CREATE TABLE team_members (
	team_id    BIGINT NOT NULL REFERENCES accounts(id),
	account_id BIGINT NOT NULL REFERENCES accounts(id),
	role       TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (team_id, account_id)
);
CREATE INDEX team_members_account ON team_members(account_id);

CREATE TABLE invitations (
	id          INTEGER PRIMARY KEY,
	team_id     BIGINT NOT NULL REFERENCES accounts(id),
	hash        TEXT NOT NULL UNIQUE,
	role        TEXT NOT NULL,
	account     TEXT NOT NULL DEFAULT '',
	invited_by  BIGINT NOT NULL,
	created_at  BIGINT NOT NULL,
	expires_at  BIGINT NOT NULL,
	accepted_at BIGINT,
	accepted_by BIGINT NOT NULL DEFAULT 0,
	revoked_at  BIGINT
);
CREATE INDEX invitations_team ON invitations(team_id);

CREATE TABLE audit_events (
	seq        BIGINT PRIMARY KEY,
	at         BIGINT NOT NULL,
	actor_id   BIGINT NOT NULL DEFAULT 0,
	account_id BIGINT NOT NULL DEFAULT 0,
	key_id     BIGINT NOT NULL DEFAULT 0,
	action     TEXT NOT NULL,
	target     TEXT NOT NULL DEFAULT '',
	source     TEXT NOT NULL DEFAULT '',
	request_id TEXT NOT NULL DEFAULT '',
	result     TEXT NOT NULL DEFAULT '',
	detail     TEXT NOT NULL DEFAULT '',
	prev_hash  TEXT NOT NULL,
	hash       TEXT NOT NULL
);
CREATE INDEX audit_events_account ON audit_events(account_id, seq);
CREATE INDEX audit_events_actor ON audit_events(actor_id, seq);

CREATE TABLE audit_checkpoints (
	seq       BIGINT PRIMARY KEY,
	hash      TEXT NOT NULL,
	prev_seq  BIGINT NOT NULL,
	at        BIGINT NOT NULL,
	key_id    TEXT NOT NULL,
	signature TEXT NOT NULL
);

ALTER TABLE instances ADD COLUMN secrets BLOB;
ALTER TABLE instances ADD COLUMN secret_meta TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN allowed_countries TEXT NOT NULL DEFAULT '';
