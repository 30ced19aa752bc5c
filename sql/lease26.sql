-- The lease database `lease26`. Only the lease service reads or writes it;
-- the protected resource lives in another database (res26.sql) so that it
-- cannot consult this table, even by accident.

-- ANCHOR: lease
CREATE TABLE lease (
  name        text PRIMARY KEY,
  holder      text NOT NULL,
  -- The fencing token. It advances only when a lease is acquired, and it is
  -- never reset: I2 (strictly increasing, never reused) rests on this column
  -- being written in the same statement that grants the lease.
  token       bigint NOT NULL CHECK (token > 0),
  -- Judged only against the database clock, now(): a holder never compares
  -- its own clock with this value. Release sets it to '-infinity'.
  expires_at  timestamptz NOT NULL
);
-- ANCHOR_END: lease
