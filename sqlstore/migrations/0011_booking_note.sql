-- Why a booking was made the way it was (a deferred job's choice and its
-- saving, the window a query picked, a recurring rental's run), written
-- once when it is booked. message follows the booking's status and is
-- overwritten at the start and at the end, so the two are kept apart.
ALTER TABLE bookings ADD COLUMN note TEXT NOT NULL DEFAULT '';
