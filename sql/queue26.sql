-- The job queue of the bug zoo (F20-F28, lab/src/queue/), in `lease26`
-- beside the lease table: every load of `lease26` loads this file after
-- lease26.sql (db::LEASE_SCHEMA), so a reset between timelines empties
-- these tables rather than making them again. A job queue is a lease
-- store: a claim is a lease on one job, a heartbeat renews it, the rescuer
-- takes back the claims whose lease ran out. Its side effects go to the
-- resource in `res26`, through the same fence as the report's writes.

-- ANCHOR: job
CREATE TABLE job (
  id           bigint PRIMARY KEY,
  state        text NOT NULL DEFAULT 'available'
               CHECK (state IN ('available', 'running', 'done')),
  -- Who holds the claim, by name: what real queues record (a hostname, a
  -- worker id). A name is not an identity: a restarted worker reuses it.
  worker       text,
  -- The claim's token. It advances by one in the statement that claims the
  -- job and nothing else writes it (the bug token-given-back puts back a
  -- rescuer that does): every heartbeat, completion and side effect of a
  -- claim carries it, and each is refused once a newer claim exists.
  claim        bigint NOT NULL DEFAULT 0,
  -- When the current claim began, and until when its lease holds (now() at
  -- the claim or the last heartbeat, plus the ttl): both by the database's
  -- clock.
  started_at   timestamptz,
  locked_until timestamptz,
  -- The claim whose completion was accepted.
  done_claim   bigint,
  -- Observation only, never read by the queue's statements: the worker
  -- process (name and incarnation) that made the current claim, so the
  -- lab can tell a superseded incarnation from the current one even when
  -- both carry the same name and the same token.
  incarnation  text
);
-- ANCHOR_END: job

-- ANCHOR: queue_worker
-- The registry of live worker processes (the pruner's view of who is alive,
-- as in solid_queue's processes table): each worker beats its own row.
CREATE TABLE queue_worker (
  name    text PRIMARY KEY,
  beat_at timestamptz NOT NULL
);
-- ANCHOR_END: queue_worker

-- ANCHOR: job_event
-- Every operation on a job, accepted or not, with the incarnation that asked
-- and the one holding the job's current claim once it was done: the lab's
-- counts of harm (a stale completion accepted, a stale heartbeat accepted, a
-- job rescued while its worker was alive) are read from here. The queue
-- never reads it.
CREATE TABLE job_event (
  id          bigserial PRIMARY KEY,
  at          timestamptz NOT NULL DEFAULT clock_timestamp(),
  job         bigint NOT NULL,
  kind        text NOT NULL CHECK (kind IN ('claim', 'heartbeat', 'complete', 'rescue', 'release')),
  incarnation text NOT NULL,
  token       bigint,
  accepted    boolean NOT NULL,
  holder      text,
  -- A rescue or release only: whether the lease of the claim it took back
  -- was still running by the database's clock (a live job rescued).
  live        boolean
);
-- ANCHOR_END: job_event
