-- Disk encryption keys of instances and volumes on machines that encrypt at
-- rest (diskkeys.go). Each key is sealed with the server's secret key. A row
-- lives while its instance or volume does: the transaction that destroys
-- the instance or deletes the volume deletes it, which is what makes the
-- agent's release a crypto-erase. Comments here must not contain semicolons.
CREATE TABLE disk_keys (
	kind       TEXT NOT NULL,
	object_id  BIGINT NOT NULL,
	sealed     BLOB NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (kind, object_id)
);
