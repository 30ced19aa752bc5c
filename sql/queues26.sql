-- queues26: the database of `lab queues` (real job-queue crates under the
-- nemesis). Besides the crate's own schema (its migrations make it) and the
-- resource of res26.sql (loaded beside this file), it holds the lab's record
-- of the run: one row per handler invocation, which is also the latch the
-- lab holds each invocation at, and one row per completion statement.

-- ANCHOR: queue_job
-- The jobs the lab enqueues, numbered 1..N, and how long each one's work
-- takes (from the seed). The crate's payload carries only the number; the
-- handler reads its work time here.
CREATE TABLE queue_job (
  job     int PRIMARY KEY,
  work_ms int NOT NULL CHECK (work_ms >= 0)
);
-- ANCHOR_END: queue_job

-- The resource's statements a handler runs for its side effect, as the lab
-- runs them (lab/src/resource/mod.rs: UNFENCED_WRITE, WRITE_SHARED),
-- written here by the lab before the workers start: one text for the lab's
-- writers and the crates' handlers, with no build of the lab inside the
-- crates' build.
CREATE TABLE queue_statement (
  name text PRIMARY KEY CHECK (name IN ('unfenced_write', 'write_shared')),
  sql  text NOT NULL
);

-- ANCHOR: queue_handler
-- One row per handler invocation, written by the handler as it starts (the
-- lab's sign that a worker process is running job `job` as claim `token`),
-- and the two latches the lab holds it at:
-- - `released`: the handler may do its work and write its side effect. The
--   nemesis stops or kills a worker process while it waits here, so a fault
--   always lands between the claim and the side effect;
-- - `proceed`: the handler, its side effect written (`written`: what the
--   resource said), may return to the crate, which then completes the job.
--   The lab holds a newer attempt here while a stale one completes.
CREATE TABLE queue_handler (
  id          bigserial PRIMARY KEY,
  job         int NOT NULL REFERENCES queue_job,
  incarnation text NOT NULL,          -- the worker process: worker-2#1
  token       bigint NOT NULL,        -- the value the handler fences with
  claim       text NOT NULL,          -- what the crate handed it, as text
  started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  released    boolean NOT NULL DEFAULT false,
  written     text CHECK (written IN ('accepted', 'refused')),
  proceed     boolean NOT NULL DEFAULT false,
  returned_at timestamptz
);
-- ANCHOR_END: queue_handler

-- ANCHOR: queue_completion
-- One row per job a completion statement of the crate's touched, and one
-- row with no job for a completion statement that touched none (a stale
-- attempt refused, or completing a job already gone). Written by the
-- crate-specific statement triggers that `lab-queues setup` installs on the
-- crate's job table: the crate's SQL is not changed, only watched.
-- `incarnation` is the completing session's application_name (each worker
-- process names its sessions after itself); `owner` is the crate's own
-- record of whose claim the job was, as the statement found it.
CREATE TABLE queue_completion (
  id          bigserial PRIMARY KEY,
  incarnation text NOT NULL,
  job         int,
  owner       text,
  at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- ANCHOR_END: queue_completion
