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

-- ANCHOR: lease_event
-- Every change of a lease row, stamped with the server's clock at that
-- moment: an acquire (a new row, or a new token), a renewal (the same token,
-- a later expiry) or a release (expires_at = -infinity). Only the lab's
-- pictures of a run read it (./run.sh timeline F4); the lease's logic never
-- does, and the trigger fires only on a row that really changed (a refused
-- acquire or renewal changes nothing).
CREATE TABLE lease_event (
  id         bigserial PRIMARY KEY,
  at         timestamptz NOT NULL DEFAULT clock_timestamp(),
  name       text NOT NULL,
  holder     text NOT NULL,
  token      bigint NOT NULL,
  kind       text NOT NULL,
  expires_at timestamptz NOT NULL
);

CREATE FUNCTION record_lease_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO lease_event (name, holder, token, kind, expires_at)
  VALUES (NEW.name, NEW.holder, NEW.token,
          CASE WHEN TG_OP = 'INSERT' OR NEW.token <> OLD.token THEN 'acquire'
               WHEN NEW.expires_at = '-infinity' THEN 'release'
               ELSE 'renew' END,
          NEW.expires_at);
  RETURN NULL;
END $$;

CREATE TRIGGER lease_event AFTER INSERT OR UPDATE ON lease
  FOR EACH ROW EXECUTE FUNCTION record_lease_event();
-- ANCHOR_END: lease_event
