-- The objects of F29-F33 (lab/src/object/), in `res26` beside the report's
-- tables: every load of `res26` loads this file after res26.sql
-- (db::RES_SCHEMA). A resource that cannot compare tokens.
-- Like an object store or a coordination service, it offers a
-- compare-and-swap on its own version instead: a write can be made
-- conditional on the version (GCS's generation, etcd's mod_revision) or on
-- the ETag (S3's If-Match) the writer read, or carry no condition at all.
-- Each condition is judged in the statement that writes: this is the
-- atomic reference the lab measures the others against.

-- ANCHOR: object
CREATE TABLE object (
  key      text PRIMARY KEY,
  -- The object's body. A holder that claims first writes its lease token
  -- into it (`token=2; …`); the store never reads what is inside.
  body     text NOT NULL,
  -- The store's own version: one more on every write, never repeated.
  version  bigint NOT NULL,
  -- S3's ETag of a single-part PUT: the MD5 of the body. The same body
  -- again, the same ETag again.
  etag     text NOT NULL,
  -- Who wrote it last: observation only.
  writer   text NOT NULL
);
-- ANCHOR_END: object

-- ANCHOR: object_attempt
-- Every write, accepted or not, with the condition it carried and the
-- writer's lease token, which the store never reads: the lab judges a
-- write stale by it afterwards.
CREATE TABLE object_attempt (
  id        bigserial PRIMARY KEY,
  key       text NOT NULL,
  writer    text NOT NULL,
  token     bigint NOT NULL,
  condition text NOT NULL CHECK (condition IN ('if-version', 'if-match', 'none')),
  expected  text,
  accepted  boolean NOT NULL,
  at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- ANCHOR_END: object_attempt
