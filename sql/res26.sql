-- The resource database `res26`: the report output store that the lease is
-- meant to protect. It never reads the lease table; it remembers only the
-- largest token it has accepted per scope (fence_floor).

-- ANCHOR: fence_floor
-- One row per scope: the largest token this resource has accepted for it.
-- A FENCED_SCOPE or FENCED_SCOPE_CTE write first takes this row's lock with
-- a conditional UPDATE; a FENCED_SCOPE_SHARED write rewrites it only to raise
-- it, under the scope's exclusive advisory lock (fenced_write_shared below).
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
-- FENCED_SCOPE_SHARED inserts it under the scope's advisory lock, in share
-- mode for a write under the floor's token and in exclusive mode for a raise,
-- which keeps that order between tokens (see fenced_write_shared);
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

-- ANCHOR: report_object
-- VERSION_CAS and CLAIM_FIRST: the scope's report as one object of a store
-- that cannot compare tokens, only its own version (S3's If-Match, GCS's
-- generation, etcd's mod_revision). Every accepted write of a part makes
-- `version` one larger, in the same statement as the part and its record.
-- `claim` is the token a CLAIM_FIRST holder wrote into the object's body:
-- the store keeps it and never compares it; holders read it. No row: the
-- object does not exist yet, and the first write creates it only if it is
-- still absent (If-None-Match: *).
CREATE TABLE report_object (scope text PRIMARY KEY, version bigint NOT NULL, claim bigint);
-- ANCHOR_END: report_object

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

-- ANCHOR: scope_lock_space
-- The first key of every scope's advisory lock, pg_advisory_xact_lock[_shared]
-- (fence_lock_space(), hashtext(scope)): a key space of the lab's own (nothing
-- else in res26 takes an advisory lock), so no other user of advisory locks
-- on this database can hold a scope's lock by accident. Two scopes whose names
-- hash alike share one lock: a raise in one then waits for writes in the
-- other too, a wait, never a write let through. IMMUTABLE and one SELECT, so
-- the planner inlines it: it costs nothing per call.
CREATE FUNCTION fence_lock_space() RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 26';
-- ANCHOR_END: scope_lock_space

-- ANCHOR: fenced_write_shared
-- FENCED_SCOPE_SHARED: the scope fence as a reader/writer discipline on the
-- scope's advisory lock, so that writes under the token already on the floor
-- run side by side and only a raise of the floor waits.
--
-- - A write whose token equals the floor is a *reader* of the floor: it holds
--   the scope's lock in share mode until it commits. Any number hold it at
--   once, and none of them rewrites fence_floor: no row lock, no WAL for the
--   fence (an advisory lock lives in the server's memory only).
-- - A write that raises the floor is a *writer*: it holds the lock in
--   exclusive mode until it commits. Granting it waits for every share
--   holder, that is, for every write still in flight under the old floor, to
--   commit; and a write under the old token that asks for the share lock
--   while the raise holds (or queues for) the exclusive one waits behind it,
--   then reads the raised floor and is refused. So in commit order no write
--   under the old token follows the raise: I3.
-- - The caller asks first in share mode (p_exclusive false). A write that
--   finds its token above the floor writes nothing and returns 'raise'; its
--   statement ends, and with it the transaction and the share lock; the
--   caller asks again with p_exclusive true, in a new transaction. A share
--   lock is never upgraded in place: two raisers, each holding the share lock
--   and each waiting for the other's to go, would wait for ever (PostgreSQL
--   would cancel one as a deadlock). Between the two calls nothing is held,
--   so the second decides afresh.
-- - A token below the floor is refused under either lock. The floor never
--   goes down, so that refusal would stand without any lock; it is decided
--   by the same statement as an acceptance only to be recorded the same way.
-- - A scope is fenced by one mode: a FENCED_SCOPE writer of the same scope
--   would move the floor without the advisory lock.
--
-- Returns what it decided: 'accepted' (the token is the floor, or became
-- it by this call's raise), 'refused' (the token is below the floor, or the
-- scope has no floor row), or 'raise' (the token is above the floor and
-- the call held only the share lock: nothing written or recorded).
CREATE FUNCTION fenced_write_shared(p_scope text, p_part text, p_content text, p_writer text,
                                    p_token bigint, p_mode text, p_exclusive boolean)
RETURNS text
-- VOLATILE: each statement of the body takes a snapshot of its own when it
-- starts (Read Committed), not the calling statement's; the read below rests
-- on that. (A STABLE function's statements would all see the caller's.)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  decided boolean;
  held text;
BEGIN
  -- The lock, in a step of its own before any statement that reads the
  -- floor. Both are transaction locks: held until this call's statement
  -- commits or rolls back (a killed session's server process rolls it back),
  -- never released early.
  IF p_exclusive THEN
    -- A raise: granted once no session holds the scope's lock in any mode,
    -- so every write in flight under the old floor has committed.
    PERFORM pg_advisory_xact_lock(fence_lock_space(), hashtext(p_scope));
    -- The raise itself, a statement begun after the lock was granted. No
    -- other session can be changing this row (other raisers wait for the
    -- lock, readers of the floor never write it), so it neither waits nor
    -- meets a newer version. `max_token < p_token`: a raise never lowers the
    -- floor; it finds a higher one when another raise committed between this
    -- writer's two calls.
    UPDATE fence_floor SET max_token = p_token WHERE scope = p_scope AND max_token < p_token;
  ELSE
    -- A write under the floor's token: shared with every other such write;
    -- waits only while a raise holds, or queues for, the exclusive lock.
    -- The normal path, so an assignment rather than PERFORM: PL/pgSQL
    -- evaluates a plain expression in place, with no query executor, and
    -- the lock function returns void, kept only as text.
    held := pg_advisory_xact_lock_shared(fence_lock_space(), hashtext(p_scope))::text;
  END IF;
  -- The read, the decision, the write and the record: one statement, begun
  -- after the lock was granted (and after this call's own raise), so its
  -- snapshot holds every raise committed before this writer could hold the
  -- lock, and no raise can commit until it does. Every sub-statement of a
  -- WITH shares that snapshot.
  WITH floor AS (
      -- The floor as of this statement's start: after the lock, so current;
      -- and the one comparison. A token at or below the floor is decided
      -- here, accepted only when it is the floor; a token above it (or a
      -- scope without a floor row) gives no row.
      SELECT max_token, max_token = p_token AS accepted
        FROM fence_floor WHERE scope = p_scope AND max_token >= p_token
  ), part AS (
      -- The data write, as UPSERT, only when accepted.
      INSERT INTO report_part (scope, part, content, writer, token)
      SELECT p_scope, p_part, p_content, p_writer, p_token FROM floor WHERE accepted
      ON CONFLICT (scope, part) DO UPDATE
         SET content = EXCLUDED.content, writer = EXCLUDED.writer,
             token = EXCLUDED.token, written_at = clock_timestamp()
  )
  -- The record of a decided attempt. Its id is drawn under the scope's
  -- lock, held to commit: share holders draw theirs while the floor is
  -- theirs, a raise after all of them and before any write under its
  -- token; so in id order accepted tokens never go down, and floor_after,
  -- the floor this statement read, is the floor's own history.
  INSERT INTO write_attempt (scope, part, writer, token, mode, accepted, floor_after)
  SELECT p_scope, p_part, p_writer, p_token, p_mode, accepted, max_token FROM floor
  RETURNING accepted INTO decided;
  IF FOUND THEN
    RETURN CASE WHEN decided THEN 'accepted' ELSE 'refused' END;
  END IF;
  IF NOT p_exclusive THEN
    -- Above the floor (or no floor row): only a writer of the floor may go on.
    RETURN 'raise';
  END IF;
  -- Under the exclusive lock, after the raise, nothing read: the scope has
  -- no floor row. Refused, and recorded with no floor.
  INSERT INTO write_attempt (scope, part, writer, token, mode, accepted, floor_after)
  VALUES (p_scope, p_part, p_writer, p_token, p_mode, false, NULL);
  RETURN 'refused';
END $$;
-- ANCHOR_END: fenced_write_shared
