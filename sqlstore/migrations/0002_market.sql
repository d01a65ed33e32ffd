-- The market (issue 5): preemption, queued starts, reservations, price history.
ALTER TABLE instances ADD COLUMN waiting_since BIGINT;
ALTER TABLE instances ADD COLUMN reserved_until BIGINT;
ALTER TABLE instances ADD COLUMN preempted_by BIGINT NOT NULL DEFAULT 0;

CREATE TABLE reservations (
	id            INTEGER PRIMARY KEY,
	instance_id   BIGINT NOT NULL,
	account_id    BIGINT NOT NULL,
	host_id       BIGINT NOT NULL,
	days          BIGINT NOT NULL,
	start_us      BIGINT NOT NULL,
	end_us        BIGINT NOT NULL,
	hourly_price  BIGINT NOT NULL,
	list_price    BIGINT NOT NULL,
	discount_bp   BIGINT NOT NULL,
	prepaid       BIGINT NOT NULL,
	cancel_fee_bp BIGINT NOT NULL,
	fee_bp        BIGINT NOT NULL,
	status        TEXT NOT NULL,
	refund        BIGINT NOT NULL DEFAULT 0,
	ended_at      BIGINT
);
CREATE INDEX reservations_instance ON reservations(instance_id, status);
CREATE INDEX reservations_due ON reservations(status, end_us);

CREATE TABLE preemptions (
	id             INTEGER PRIMARY KEY,
	machine_id     BIGINT NOT NULL,
	instance_id    BIGINT NOT NULL,
	by_instance_id BIGINT NOT NULL DEFAULT 0,
	gpu_name       TEXT NOT NULL DEFAULT '',
	at             BIGINT NOT NULL
);
CREATE INDEX preemptions_machine ON preemptions(machine_id, at);
CREATE INDEX preemptions_gpu ON preemptions(gpu_name, at);

CREATE TABLE price_points (
	id         INTEGER PRIMARY KEY,
	at         BIGINT NOT NULL,
	gpu_name   TEXT NOT NULL,
	kind       TEXT NOT NULL,
	price      BIGINT NOT NULL,
	machine_id BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX price_points_gpu ON price_points(gpu_name, at);

CREATE TABLE fill_samples (
	id          INTEGER PRIMARY KEY,
	at          BIGINT NOT NULL,
	gpu_name    TEXT NOT NULL,
	gpus_listed BIGINT NOT NULL,
	gpus_rented BIGINT NOT NULL
);
CREATE INDEX fill_samples_gpu ON fill_samples(gpu_name, at);
