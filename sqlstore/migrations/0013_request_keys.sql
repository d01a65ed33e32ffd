-- The idempotency key of the request that created an instance (instances.go,
-- control/place.go): a retry whose first try committed the instance but
-- died before its reply was recorded finds the instance instead of renting
-- again. A request claim names the server process that holds it (owner),
-- so that a restarted server takes over its dead predecessor's claims at once.
-- Comments here must not contain semicolons.
ALTER TABLE instances ADD COLUMN request_key TEXT NOT NULL DEFAULT '';
CREATE INDEX instances_request_key ON instances (account_id, request_key);
ALTER TABLE idempotency_keys ADD COLUMN owner TEXT NOT NULL DEFAULT '';
