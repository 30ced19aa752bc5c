-- The resource database `res26`: the report output store that the lease is
-- meant to protect. It never reads the lease table; it remembers only the
-- largest token it has accepted per scope (fence_floor).

-- ANCHOR: fence_floor
-- One row per scope: the largest token this resource has accepted for it.
-- Every fenced write first takes this row's lock with a conditional UPDATE.
CREATE TABLE fence_floor (scope text PRIMARY KEY, max_token bigint NOT NULL);
-- ANCHOR_END: fence_floor

-- ANCHOR: report_part
CREATE TABLE report_part (
  scope text, part text, content text NOT NULL, writer text NOT NULL,
  token bigint NOT NULL, written_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (scope, part)
);
-- ANCHOR_END: report_part

-- ANCHOR: write_attempt
-- Every write attempt, accepted or refused, in every resource mode: the
-- record that lets a case (or a reader with psql) count refused stale writes.
-- For FENCED_SCOPE an accepted attempt is inserted inside the write's own
-- transaction, under the fence_floor row lock, so `id` order is acceptance order;
-- FENCED_SCOPE_CTE, FENCED_ROW and UNFENCED insert it in the write's own statement.
-- floor_after is the scope's fence_floor as the inserting statement read it
-- (NULL for a scope with no floor row): the chaos checker (F15) reads floor
-- regressions from it.
CREATE TABLE write_attempt (
  id           bigserial PRIMARY KEY,
  scope        text NOT NULL,
  part         text NOT NULL,
  writer       text NOT NULL,
  token        bigint NOT NULL,
  mode         text NOT NULL,
  accepted     boolean NOT NULL,
  floor_after  bigint,
  attempted_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- ANCHOR_END: write_attempt

-- ANCHOR: publication
-- F9's stand-in for an external publisher ("the daily report is ready"). It
-- knows nothing of tokens: it deduplicates by business key only. The
-- source_version column is used only by the versioned rule that F9 shows as
-- the remedy (the downstream keeping the newest version per key: the
-- per-row fence's shape, which does not check a key's first publication).
CREATE TABLE publication (
  business_key   text PRIMARY KEY,
  content        text NOT NULL,
  publisher      text NOT NULL,
  source_version bigint NOT NULL,
  published_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- ANCHOR_END: publication

-- ANCHOR: scope_seed
-- A scope exists before its first write: the fenced UPDATE needs a row to
-- lock and compare against, and 0 is below every token the lease can issue.
INSERT INTO fence_floor (scope, max_token) VALUES ('daily-report', 0);
-- ANCHOR_END: scope_seed
