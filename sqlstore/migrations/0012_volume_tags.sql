-- Cost tags on volumes (KEY=VALUE, a JSON object as instances.tags), so
-- that tag budgets and cost reports by tag count volume storage.
ALTER TABLE volumes ADD COLUMN tags TEXT NOT NULL DEFAULT '{}';
