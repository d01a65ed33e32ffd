-- The idempotency key of the request that made a booking (forward.go), as
-- instances keep theirs (0013): a retry after a crash between the booking's
-- commit and its recorded reply finds the booking instead of booking and
-- holding escrow twice. Comments here must not contain semicolons.
ALTER TABLE bookings ADD COLUMN request_key TEXT NOT NULL DEFAULT '';
CREATE INDEX bookings_request_key ON bookings (account_id, request_key);
