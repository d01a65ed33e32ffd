CREATE TABLE accounts (
	id         INTEGER PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	email      TEXT NOT NULL DEFAULT '',
	role       TEXT NOT NULL,
	created_at BIGINT NOT NULL
);

CREATE TABLE api_keys (
	id             INTEGER PRIMARY KEY,
	account_id     BIGINT NOT NULL REFERENCES accounts(id),
	name           TEXT NOT NULL DEFAULT '',
	prefix         TEXT NOT NULL,
	hash           TEXT NOT NULL UNIQUE,
	scopes         TEXT NOT NULL,
	machine_id     BIGINT NOT NULL DEFAULT 0,
	created_at     BIGINT NOT NULL,
	expires_at     BIGINT NOT NULL,
	revoked_at     BIGINT,
	last_used_at   BIGINT,
	last_used_addr TEXT NOT NULL DEFAULT ''
);

CREATE TABLE join_tokens (
	hash       TEXT PRIMARY KEY,
	account_id BIGINT NOT NULL REFERENCES accounts(id),
	expires_at BIGINT NOT NULL,
	used_at    BIGINT,
	machine_id BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE machines (
	id              INTEGER PRIMARY KEY,
	owner_id        BIGINT NOT NULL REFERENCES accounts(id),
	hardware        TEXT NOT NULL,
	simulated       BOOLEAN NOT NULL,
	status          TEXT NOT NULL,
	last_heartbeat  BIGINT NOT NULL,
	agent_version   TEXT NOT NULL DEFAULT '',
	runtime         TEXT NOT NULL DEFAULT '',
	country         TEXT NOT NULL DEFAULT '',
	region          TEXT NOT NULL DEFAULT '',
	geolocation     TEXT NOT NULL DEFAULT '',
	datacenter      BOOLEAN NOT NULL DEFAULT FALSE,
	verified        BOOLEAN NOT NULL DEFAULT FALSE,
	inet_up_mbps    DOUBLE PRECISION NOT NULL DEFAULT 0,
	inet_down_mbps  DOUBLE PRECISION NOT NULL DEFAULT 0,
	reliability     DOUBLE PRECISION NOT NULL DEFAULT 0,
	listing         TEXT NOT NULL,
	desired_version BIGINT NOT NULL DEFAULT 1,
	created_at      BIGINT NOT NULL
);
CREATE INDEX machines_owner ON machines(owner_id);

CREATE TABLE instances (
	id             INTEGER PRIMARY KEY,
	account_id     BIGINT NOT NULL REFERENCES accounts(id),
	machine_id     BIGINT NOT NULL REFERENCES machines(id),
	host_id        BIGINT NOT NULL,
	label          TEXT NOT NULL DEFAULT '',
	image          TEXT NOT NULL,
	cmd            TEXT NOT NULL,
	env            TEXT NOT NULL,
	disk_gb        BIGINT NOT NULL,
	gpu_name       TEXT NOT NULL DEFAULT '',
	gpu_count      BIGINT NOT NULL,
	gpu_indexes    TEXT NOT NULL,
	cpu_cores      BIGINT NOT NULL,
	ram_mb         BIGINT NOT NULL,
	rental_type    TEXT NOT NULL,
	bid            BIGINT NOT NULL DEFAULT 0,
	rates          TEXT NOT NULL,
	simulated      BOOLEAN NOT NULL,
	status         TEXT NOT NULL,
	status_message TEXT NOT NULL DEFAULT '',
	desired        TEXT NOT NULL,
	exit_code      BIGINT,
	created_at     BIGINT NOT NULL,
	started_at     BIGINT,
	destroyed_at   BIGINT,
	updated_at     BIGINT NOT NULL,
	version        BIGINT NOT NULL DEFAULT 1
);
CREATE INDEX instances_account ON instances(account_id);
CREATE INDEX instances_machine ON instances(machine_id, status);

CREATE TABLE instance_events (
	id          INTEGER PRIMARY KEY,
	instance_id BIGINT NOT NULL,
	at          BIGINT NOT NULL,
	status      TEXT NOT NULL,
	message     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX instance_events_instance ON instance_events(instance_id, id);

CREATE TABLE instance_logs (
	instance_id BIGINT PRIMARY KEY,
	base        BIGINT NOT NULL DEFAULT 0,
	data        BLOB NOT NULL
);

CREATE TABLE meters (
	id          INTEGER PRIMARY KEY,
	instance_id BIGINT NOT NULL,
	account_id  BIGINT NOT NULL,
	host_id     BIGINT NOT NULL,
	kind        TEXT NOT NULL,
	rate        BIGINT NOT NULL,
	period_us   BIGINT NOT NULL,
	fee_bp      BIGINT NOT NULL DEFAULT 0,
	active      BOOLEAN NOT NULL,
	since       BIGINT NOT NULL,
	remainder   BIGINT NOT NULL DEFAULT 0,
	UNIQUE (instance_id, kind)
);
CREATE INDEX meters_active ON meters(active);

CREATE TABLE ledger_txns (
	id          INTEGER PRIMARY KEY,
	kind        TEXT NOT NULL,
	account_id  BIGINT NOT NULL DEFAULT 0,
	instance_id BIGINT NOT NULL DEFAULT 0,
	amount      BIGINT NOT NULL,
	from_us     BIGINT NOT NULL DEFAULT 0,
	to_us       BIGINT NOT NULL DEFAULT 0,
	quantity    TEXT NOT NULL DEFAULT '',
	memo        TEXT NOT NULL DEFAULT '',
	created_at  BIGINT NOT NULL
);
CREATE INDEX ledger_txns_account ON ledger_txns(account_id, id);
CREATE INDEX ledger_txns_instance ON ledger_txns(instance_id);

CREATE TABLE postings (
	id      INTEGER PRIMARY KEY,
	txn_id  BIGINT NOT NULL REFERENCES ledger_txns(id),
	account TEXT NOT NULL,
	amount  BIGINT NOT NULL
);
CREATE INDEX postings_txn ON postings(txn_id);

CREATE TABLE ledger_balances (
	account TEXT PRIMARY KEY,
	balance BIGINT NOT NULL
);

CREATE TABLE usage_counters (
	instance_id BIGINT PRIMARY KEY,
	machine_id  BIGINT NOT NULL,
	last_seq    BIGINT NOT NULL,
	tx_bytes    BIGINT NOT NULL,
	rx_bytes    BIGINT NOT NULL
);

CREATE TABLE settings (
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
