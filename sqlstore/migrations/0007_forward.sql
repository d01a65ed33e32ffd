-- The forward market (issue 11): future capacity windows and bookings.
CREATE TABLE windows (
	id             INTEGER PRIMARY KEY,
	machine_id     BIGINT NOT NULL,
	host_id        BIGINT NOT NULL,
	gpus           BIGINT NOT NULL,
	start_us       BIGINT NOT NULL,
	end_us         BIGINT NOT NULL,
	price_gpu      BIGINT NOT NULL,
	accept_bids    BIGINT NOT NULL DEFAULT 0,
	min_bid        BIGINT NOT NULL DEFAULT 0,
	cancel_before_s BIGINT NOT NULL DEFAULT 0,
	cancel_fee_bp  BIGINT NOT NULL DEFAULT 0,
	status         TEXT NOT NULL,
	created_at     BIGINT NOT NULL
);
CREATE INDEX windows_machine ON windows(machine_id, status, end_us);
CREATE INDEX windows_open ON windows(status, start_us);

CREATE TABLE bookings (
	id              INTEGER PRIMARY KEY,
	window_id       BIGINT NOT NULL,
	machine_id      BIGINT NOT NULL,
	host_id         BIGINT NOT NULL,
	account_id      BIGINT NOT NULL,
	gpus            BIGINT NOT NULL,
	start_us        BIGINT NOT NULL,
	end_us          BIGINT NOT NULL,
	price_gpu       BIGINT NOT NULL,
	cost            BIGINT NOT NULL,
	fee_bp          BIGINT NOT NULL,
	cancel_deadline BIGINT NOT NULL,
	cancel_fee_bp   BIGINT NOT NULL,
	status          TEXT NOT NULL,
	instance_id     BIGINT NOT NULL DEFAULT 0,
	image           TEXT NOT NULL DEFAULT '',
	cmd             TEXT NOT NULL DEFAULT '[]',
	refund          BIGINT NOT NULL DEFAULT 0,
	paid            BIGINT NOT NULL DEFAULT 0,
	started_at      BIGINT,
	ended_at        BIGINT,
	message         TEXT NOT NULL DEFAULT '',
	schedule_id     BIGINT NOT NULL DEFAULT 0,
	created_at      BIGINT NOT NULL
);
CREATE INDEX bookings_window ON bookings(window_id, status);
CREATE INDEX bookings_machine ON bookings(machine_id, status, end_us);
CREATE INDEX bookings_account ON bookings(account_id, status);
CREATE INDEX bookings_due ON bookings(status, start_us);
