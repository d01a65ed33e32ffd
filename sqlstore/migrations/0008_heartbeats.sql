-- Heartbeat fan-in (issue 12): the control plane keeps heartbeats in memory
-- and writes every machine's last one here in batches (RecordBeats), one
-- narrow row per machine, so that a flush of 50,000 beats does not rewrite
-- 50,000 wide machine rows. A machine's last heartbeat is the later of this
-- row and machines.last_heartbeat (which a sync that changed something
-- still writes). No foreign key: a batch is never refused for one machine.
CREATE TABLE machine_heartbeats (
	machine_id     INTEGER PRIMARY KEY,
	last_heartbeat BIGINT NOT NULL
);
INSERT INTO machine_heartbeats (machine_id, last_heartbeat) SELECT id, last_heartbeat FROM machines;
