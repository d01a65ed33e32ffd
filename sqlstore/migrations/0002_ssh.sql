CREATE TABLE ssh_keys (
	id          INTEGER PRIMARY KEY,
	account_id  BIGINT NOT NULL REFERENCES accounts(id),
	name        TEXT NOT NULL DEFAULT '',
	public_key  TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	created_at  BIGINT NOT NULL,
	UNIQUE (account_id, fingerprint)
);

CREATE TABLE ip_allowlist (
	id         INTEGER PRIMARY KEY,
	account_id BIGINT NOT NULL REFERENCES accounts(id),
	cidr       TEXT NOT NULL,
	note       TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	UNIQUE (account_id, cidr)
);

CREATE TABLE machine_ssh (
	machine_id BIGINT PRIMARY KEY REFERENCES machines(id),
	host       TEXT NOT NULL DEFAULT '',
	port       BIGINT NOT NULL,
	host_key   TEXT NOT NULL,
	updated_at BIGINT NOT NULL
);
