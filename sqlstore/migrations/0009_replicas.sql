-- Several server replicas on one database (leases.go, changes.go).
-- A lease row names the replica that runs the singleton loops and its term,
-- the fencing token a close checks. The change feed tells every replica
-- which machines' offers to reload. Comments here must not contain semicolons.
CREATE TABLE leases (
	name        TEXT PRIMARY KEY,
	holder      TEXT NOT NULL,
	term        BIGINT NOT NULL,
	expires_at  BIGINT NOT NULL,
	acquired_at BIGINT NOT NULL
);
CREATE TABLE changes (
	id         INTEGER PRIMARY KEY, -- the sequence number: named id like every serial key (suanli migrate resets it)
	kind       TEXT NOT NULL,
	machine_id BIGINT NOT NULL DEFAULT 0,
	origin     TEXT NOT NULL DEFAULT '',
	at         BIGINT NOT NULL
);
CREATE INDEX changes_at ON changes (at);
-- The lease term of the replica that made each close (0: no lease).
ALTER TABLE bill_closes ADD COLUMN term BIGINT NOT NULL DEFAULT 0;

-- Agent tasks (exec, pre-flight) relayed between replicas: the replica that
-- took the request posts the task, whichever replica the machine's agent
-- syncs with lists it and posts the result back. Rows live while the
-- request waits.
CREATE TABLE agent_tasks (
	id         TEXT PRIMARY KEY,
	machine_id BIGINT NOT NULL,
	origin     TEXT NOT NULL,
	task       TEXT NOT NULL,
	result     TEXT,
	created_at BIGINT NOT NULL
);
CREATE INDEX agent_tasks_machine ON agent_tasks (machine_id)
