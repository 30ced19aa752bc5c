//! Read-only queries with which a case (or the reader, in spirit) observes
//! the resource: the floor, a part, the attempts. Each read runs on its own
//! autocommit session, so it sees the latest commits.

use super::READ_FLOOR;
use crate::cluster::{credentials, Endpoint};
use crate::db;
use crate::error::{Result, ResultExt};
use crate::vocabulary::{FenceMode, StoredPart, WriteAttempt};

/// Read-only queries with which a case observes the resource.
pub struct ResourceView {
    /// An autocommit session of its own: each read sees the latest commits.
    client: db::Session,
}

impl ResourceView {
    /// Connects an observer session to `res26`.
    pub fn connect() -> Result<ResourceView> {
        ResourceView::connect_to(&Endpoint::lab()?)
    }

    /// Connects an observer session to `res26` on `server`.
    pub fn connect_to(server: &Endpoint) -> Result<ResourceView> {
        Ok(ResourceView { client: db::session(server, credentials::ROLE, db::RES_DB, "lab observer", None)? })
    }

    /// The scope's `fence_floor.max_token`.
    pub fn floor(&mut self, scope: &str) -> Result<i64> {
        Ok(self.client.query_one(READ_FLOOR, &[&scope]).context("reading fence_floor")?.get(0))
    }

    /// A stored part as a transcript shows it, e.g. `rows=201(B) by holder-b
    /// token=2`, or `absent` when it was never written.
    pub fn part_text(&mut self, scope: &str, part: &str) -> Result<String> {
        Ok(self.part(scope, part)?.map_or("absent".into(), |p| p.to_string()))
    }

    /// A stored part, or `None` when it was never written.
    pub fn part(&mut self, scope: &str, part: &str) -> Result<Option<StoredPart>> {
        // The columns part_from reads, in its order.
        let row = self
            .client
            .query_opt("SELECT scope, part, content, writer, token FROM report_part WHERE scope = $1 AND part = $2", &[&scope, &part])
            .context("reading report_part")?;
        row.map(|r| part_from(&r)).transpose()
    }

    /// How many attempts by `writer` were accepted (`true`) or refused (`false`).
    pub fn attempts(&mut self, writer: &str, accepted: bool) -> Result<i64> {
        Ok(self
            .client
            .query_one("SELECT count(*) FROM write_attempt WHERE writer = $1 AND accepted = $2", &[&writer, &accepted])
            .context("counting write attempts")?
            .get(0))
    }

    /// How many of `writer`'s attempts on `part` were accepted.
    pub fn accepted_of(&mut self, writer: &str, part: &str) -> Result<i64> {
        Ok(self
            .client
            .query_one("SELECT count(*) FROM write_attempt WHERE writer = $1 AND part = $2 AND accepted", &[&writer, &part])
            .context("counting write attempts")?
            .get(0))
    }

    /// The tokens of accepted attempts on `scope`, in the order they were recorded.
    pub fn accepted_tokens(&mut self, scope: &str) -> Result<Vec<i64>> {
        let rows = self
            .client
            .query("SELECT token FROM write_attempt WHERE scope = $1 AND accepted ORDER BY id", &[&scope])
            .context("reading accepted write attempts")?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Every write attempt on `scope`, in the order they were recorded
    /// (`id`; for accepted writes, the order of acceptance: see
    /// RECORD_ATTEMPT): who wrote which part with which token, whether it
    /// was accepted, and the floor the attempt saw (`floor_after`).
    pub fn attempts_on(&mut self, scope: &str) -> Result<Vec<WriteAttempt>> {
        let rows = self.client.query(ATTEMPTS, &[]).context("reading write_attempt")?;
        let all = rows.iter().map(|r| attempt_from(r, 0.0)).collect::<Result<Vec<_>>>()?;
        Ok(all.into_iter().filter(|a| a.scope == scope).collect())
    }

    /// The server process of `who`'s session on `res26` (its
    /// `application_name`), as `pg_stat_activity` lists it; `None` once the
    /// session is gone.
    pub fn session_of(&mut self, who: &str) -> Result<Option<i32>> {
        let row = self
            .client
            .query_opt("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1", &[&who])
            .context("reading pg_stat_activity")?;
        Ok(row.map(|r| r.get(0)))
    }

    /// A session's state (`active`, `idle`, `idle in transaction`, …) and
    /// how long, by the server's clock, it has been in its current
    /// statement or transaction wait (`clock_timestamp() - state_change`).
    pub fn session_state(&mut self, pid: i32) -> Result<Option<(String, f64)>> {
        let row = self
            .client
            .query_opt(
                "SELECT state, extract(epoch FROM clock_timestamp() - state_change)::float8 * 1000 FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .context("reading pg_stat_activity")?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    /// The sessions that block `pid`'s lock wait (`pg_blocking_pids`).
    pub fn blocking_pids(&mut self, pid: i32) -> Result<Vec<i32>> {
        Ok(self.client.query_one("SELECT pg_blocking_pids($1)", &[&pid]).context("reading pg_blocking_pids")?.get(0))
    }

    /// Whether some transaction holds the scope's floor row lock right now:
    /// `FOR UPDATE NOWAIT` fails at once with lock_not_available (55P03)
    /// instead of waiting. When the row is free, this autocommit statement
    /// takes the lock and lets it go at its own end.
    pub fn floor_locked(&mut self, scope: &str) -> Result<bool> {
        match self.client.query_opt("SELECT 1 FROM fence_floor WHERE scope = $1 FOR UPDATE NOWAIT", &[&scope]) {
            Ok(_) => Ok(false),
            Err(e) if e.code() == Some(&postgres::error::SqlState::LOCK_NOT_AVAILABLE) => Ok(true),
            Err(e) => Err(e).context("probing the floor row lock"),
        }
    }

    /// How many attempts `writer` made, accepted or not.
    pub fn attempts_by(&mut self, writer: &str) -> Result<i64> {
        Ok(self.attempts(writer, true)? + self.attempts(writer, false)?)
    }

    /// The wait event of a server process, as `pg_stat_activity` shows it:
    /// `Some("Lock")` while it queues for a row lock.
    pub fn wait_event_type(&mut self, pid: i32) -> Result<Option<String>> {
        let row = self
            .client
            .query_opt("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", &[&pid])
            .context("reading pg_stat_activity")?;
        Ok(row.and_then(|r| r.get(0)))
    }

    /// The wait of a server process as `pg_stat_activity` shows it,
    /// `wait_event_type/wait_event`: `Lock/advisory` while it queues for an
    /// advisory lock, `Lock/transactionid` while it waits for the
    /// transaction that holds a row it needs; `none` when it waits for
    /// nothing.
    pub fn wait_event(&mut self, pid: i32) -> Result<String> {
        let row = self
            .client
            .query_opt("SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE pid = $1", &[&pid])
            .context("reading pg_stat_activity")?;
        Ok(row.and_then(|r| r.get(0)).unwrap_or_else(|| "none".into()))
    }

    /// Who holds and who waits for the scope's advisory lock (the lock of
    /// FENCED_SCOPE_SHARED), as `pg_locks` shows it, by `application_name`:
    /// `holder-a ShareLock granted, holder-b ExclusiveLock waiting`, the
    /// holders first; `none` when nobody does. The lock's key is
    /// `(fence_lock_space(), hashtext(scope))`, which `pg_locks` shows as
    /// `classid`, `objid` and `objsubid = 2` (the two-key form).
    pub fn scope_lock(&mut self, scope: &str) -> Result<String> {
        let row = self
            .client
            .query_one(
                "SELECT coalesce(string_agg(a.application_name || ' ' || l.mode || CASE WHEN l.granted THEN ' granted' ELSE ' waiting' END,
                                            ', ' ORDER BY l.granted DESC, a.application_name), 'none')
                   FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                  WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND l.classid = fence_lock_space()::oid AND l.objid = hashtext($1)::oid AND l.objsubid = 2",
                &[&scope],
            )
            .context("reading pg_locks")?;
        Ok(row.get(0))
    }

    /// The sessions that block server process `pid`, by `application_name`
    /// (`holder-a`, `lab part holder`), as `pg_blocking_pids` sees them;
    /// `none` when nothing blocks it.
    pub fn blocked_by(&mut self, pid: i32) -> Result<String> {
        let row = self
            .client
            .query_one(
                "SELECT coalesce(string_agg(application_name, ', ' ORDER BY application_name), 'none')
                   FROM pg_stat_activity WHERE pid = ANY (pg_blocking_pids($1))",
                &[&pid],
            )
            .context("reading pg_blocking_pids")?;
        Ok(row.get(0))
    }
}

// ANCHOR: load_sql
/// Every write attempt, in the order of recording, with the server's time
/// of it in ms since the epoch (the parent's calls use the same clock).
///
/// `floor_after` is the scope's floor as the recording statement read it;
/// for `id` order to be the order of these reads, the recording statement
/// reads the floor under a share lock of the floor row (`FOR SHARE`):
/// otherwise a refused attempt recorded while an accepted one has not yet
/// committed would read the older floor after the newer one (a false
/// regression). A history reads it in the same snapshot as its final
/// parts (`crate::history`).
pub const ATTEMPTS: &str = "
    SELECT id, scope, part, writer, token, mode, accepted, floor_after,
           extract(epoch FROM attempted_at)::float8 * 1000
      FROM write_attempt
     ORDER BY id";
// ANCHOR_END: load_sql

/// A row of [`ATTEMPTS`] (or of a query with its columns) as a
/// [`WriteAttempt`], its time in ms from `origin_unix_ms`: the one reader
/// of `write_attempt`. A mode the lab does not know is an error naming the row.
pub fn attempt_from(row: &postgres::Row, origin_unix_ms: f64) -> Result<WriteAttempt> {
    let (id, mode): (i64, String) = (row.get(0), row.get(5));
    let at: f64 = row.get(8);
    Ok(WriteAttempt {
        id,
        scope: row.get(1),
        part: row.get(2),
        writer: row.get(3),
        token: row.get(4),
        mode: FenceMode::from_name(&mode).map_err(|e| format!("write_attempt {id}: {e}"))?,
        accepted: row.get(6),
        floor_after: row.get(7),
        at_ms: at - origin_unix_ms,
    })
}

/// A row of `report_part` with the columns `scope, part, content, writer,
/// token`, in that order, as a [`StoredPart`]: the one reader of the table.
pub fn part_from(row: &postgres::Row) -> Result<StoredPart> {
    let read = || -> std::result::Result<StoredPart, postgres::Error> {
        Ok(StoredPart { scope: row.try_get(0)?, part: row.try_get(1)?, content: row.try_get(2)?, writer: row.try_get(3)?, token: row.try_get(4)? })
    };
    read().context("reading a report_part row")
}
