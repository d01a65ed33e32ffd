-- The idempotency key of the request that made a booking or published a
-- window (forward.go), as instances keep theirs (0013): a retry after a crash
-- between the commit and its recorded reply finds what the first try made
-- instead of booking (and holding escrow) or publishing twice. Comments
-- here must not contain semicolons.
ALTER TABLE bookings ADD COLUMN request_key TEXT NOT NULL DEFAULT '';
CREATE INDEX bookings_request_key ON bookings (account_id, request_key);
ALTER TABLE windows ADD COLUMN request_key TEXT NOT NULL DEFAULT '';
CREATE INDEX windows_request_key ON windows (host_id, request_key);
