//! The protected resource: the report output store in `res26`. (The book
//! and the code call this side "the resource"; `report_part` is its data.)
//!
//! It exposes one operation, `write(scope, part, content, writer, token)`,
//! which returns whether the write was accepted. It never calls the lease
//! service and never reads the lease table; all it knows is the largest token
//! it has accepted per scope (`fence_floor`). That is the Chubby §2.4 shape:
//! the receiver compares a sequencer with the newest one it has seen, with no
//! session to the lock service.
//!
//! `FenceMode::FencedScope` is the real design, and `FencedScopeCte` is the
//! same guarantee in one statement. `FencedScopeShared` keeps it without
//! queueing writes under one token: a reader/writer discipline on the
//! scope's advisory lock (`fenced_write_shared` in sql/res26.sql). Three
//! are broken on purpose and exist so that the negative controls really
//! run them: F5 (`Unfenced`), F6(a) (`CheckThenWrite`), F7 (`FencedRow`).
//! The last two keep the report as one object of a store that compares
//! only its own version (F34): `VersionCas`, broken as the optimistic loop
//! of such a store's clients is, and `ClaimFirst`, which refuses a stale
//! holder without ever comparing a token in the store. [`view`] holds the
//! read-only queries with which a case observes the resource.
//!
//! Why this file stays whole: the real fences and every broken mode are
//! written side by side, statement beside statement, so that the
//! differences the negative controls rest on are read in one place.

pub mod view;

pub use view::{attempt_from, part_from, ResourceView, ATTEMPTS};

use crate::cluster::{credentials, Endpoint};
use crate::db;
use crate::error::{Result, ResultExt};
use crate::vocabulary::FenceMode;
use postgres::{GenericClient, Statement};
use std::collections::HashMap;

/// One write request: the arguments of `write(scope, part, content, writer, token)`.
#[derive(Clone, Copy, Debug)]
pub struct PartWrite<'a> {
    /// The fenced scope, e.g. `daily-report`.
    pub scope: &'a str,
    /// The part within the scope, e.g. `summary` or `detail`.
    pub part: &'a str,
    /// The report content, e.g. `rows=201(B)`.
    pub content: &'a str,
    /// The holder that writes, e.g. `holder-b`.
    pub writer: &'a str,
    /// The fencing token of the writer's grant.
    pub token: i64,
}

// ANCHOR: gap
/// A hook run inside a write at the point where a race can strike: for
/// `FencedScope` inside the fence, after the floor UPDATE, the data write
/// and its audit row and before the commit (nothing visible to anyone yet,
/// the floor row still locked); for `CheckThenWrite` after the check and
/// before the writes. F6 and F8 force interleavings with it from threads;
/// a holder process stops in it on request (F10, F11: `--wait inside-fence`).
/// `FencedScopeCte` has no such point: its fence and data write are one
/// statement, so F6 stops it from outside (see `cases::common::PartHold`),
/// and a store in that mode refuses to run with a gap installed.
/// `FencedScopeShared` is one statement too, stopped the same way inside
/// it; its gap lies between its two calls, when the first found its token
/// above the floor and nothing is held (F6 races a raise into it).
/// `VersionCas` and `ClaimFirst` stop in it after reading the report
/// object and before the put (or the claim) that is conditional on it (F34).
pub type Gap = Box<dyn FnMut() + Send>;
// ANCHOR_END: gap

// ANCHOR: fence_sql
/// The compare and the advance of the scope fence are one statement.
///
/// It takes the `fence_floor` row lock and keeps it until commit, so writers of
/// one scope queue here and their data writes happen in floor order. Under
/// Read Committed, an UPDATE that finds the row locked by a concurrent
/// transaction waits, and once that one commits it re-evaluates the WHERE on
/// the *new* row version: a waiter sees the advanced floor, not its snapshot.
/// Equal tokens pass (`<=`): one grant may write many times.
const ADVANCE_FENCE: &str =
    "UPDATE fence_floor SET max_token = $1 WHERE scope = $2 AND max_token <= $1";
// ANCHOR_END: fence_sql

// ANCHOR: upsert_sql
/// The data write: insert the part or overwrite it, whoever wrote it before.
/// Safe only behind ADVANCE_FENCE in the same transaction (FENCED_SCOPE).
/// UNFENCED runs the same upsert with nothing before it (UNFENCED_WRITE).
const UPSERT: &str = "
    INSERT INTO report_part (scope, part, content, writer, token)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (scope, part) DO UPDATE
       SET content = EXCLUDED.content, writer = EXCLUDED.writer,
           token = EXCLUDED.token, written_at = clock_timestamp()";
// ANCHOR_END: upsert_sql

// ANCHOR: cte_sql
/// FENCED_SCOPE_CTE: ADVANCE_FENCE, UPSERT and the audit record as one
/// autocommit statement, a data-modifying CTE: one round trip, one commit.
///
/// - `fence` is ADVANCE_FENCE itself: it takes the scope's `fence_floor` row
///   lock and holds it until the statement commits, which in autocommit is
///   the end of this statement. A concurrent writer of the scope queues on
///   that lock and, under Read Committed, re-evaluates `max_token <= $5`
///   against the row version the first one committed, as in FENCED_SCOPE:
///   the lock serialises writers exactly as the transaction form does, only
///   its holding ends at the statement's commit instead of an explicit one.
/// - `RETURNING scope` is the one channel by which the fence's outcome
///   reaches its siblings: every sub-statement of a WITH runs on the same
///   snapshot, so none of them could see the floor's new value by reading
///   the table (PostgreSQL manual, "Data-Modifying Statements in WITH"). `part` selects its one row FROM `fence`, so the upsert runs
///   only when the floor row was updated, under its lock, into the scope
///   whose floor was advanced; a refused write inserts nothing.
/// - `attempt` always inserts one row (FROM the one-row `(SELECT) AS one`,
///   not FROM fence), so a refused write is recorded in the same statement;
///   its `accepted` is whether `fence` returned the row. The primary SELECT
///   reads `fence`, so the UPDATE runs first and the audit row's id is
///   drawn under the floor row lock: for accepted writes, `id` order is
///   still acceptance order.
/// - Data-modifying CTEs run to completion whether or not the primary query
///   reads them, and commit or fail together: no other session ever sees
///   the floor advanced without the part written.
/// - The upsert's conflict check sees rows committed after the snapshot (a
///   part written by the writer this one queued behind): Read Committed's
///   ON CONFLICT DO UPDATE locks and overwrites the newest version.
/// - `floor_after` (what the chaos checker reads, as in RECORD_ATTEMPT) is
///   the floor `fence` set, read from its RETURNING for the reason above.
///   A refused write read no row there and reads the floor itself, `FOR
///   SHARE` and below the insert, as RECORD_ATTEMPT does and for the same
///   reason: the lock read sees the newest committed floor, not this
///   statement's snapshot of it, and the id is drawn after it. An accepted
///   write skips that read (`NOT EXISTS`), since its own `fence` holds the
///   row.
const FENCE_AND_WRITE: &str = "
    WITH fence AS (
        UPDATE fence_floor SET max_token = $5
         WHERE scope = $1 AND max_token <= $5
        RETURNING scope, max_token
    ), part AS (
        INSERT INTO report_part (scope, part, content, writer, token)
        SELECT fence.scope, $2, $3, $4, $5 FROM fence
        ON CONFLICT (scope, part) DO UPDATE
           SET content = EXCLUDED.content, writer = EXCLUDED.writer,
               token = EXCLUDED.token, written_at = clock_timestamp()
    ), attempt AS (
        INSERT INTO write_attempt (scope, part, writer, token, mode, accepted, floor_after)
        SELECT $1, $2, $4, $5, $6, EXISTS (SELECT FROM fence),
               COALESCE((SELECT max_token FROM fence WHERE fence.scope = $1), f.max_token)
          FROM (SELECT) AS one
          LEFT JOIN (SELECT max_token FROM fence_floor
                      WHERE scope = $1 AND NOT EXISTS (SELECT FROM fence) FOR SHARE) AS f ON true
    )
    SELECT EXISTS (SELECT FROM fence)";
// ANCHOR_END: cte_sql

// ANCHOR: row_fence_sql
/// FENCED_ROW: the comparison rides on the upsert's conflict branch, so it
/// only constrains a row that already exists. A part that the newer holder
/// has not written yet goes down the INSERT branch, with no old token to
/// compare against (F7).
///
/// The audit record is in the same autocommit statement: `part` returns a
/// row only when it inserted or updated one, so `accepted` is whether the
/// conflict branch's WHERE let the write through. One round trip and one
/// commit per write, like FENCED_SCOPE_CTE, so that `lab bench` compares
/// fences and not numbers of commits.
///
/// `floor_after` reads the scope's floor without a lock: no FENCED_ROW
/// write moves it, so the value is the one any reader sees, and a share
/// lock would cost each write a WAL record that the comparison with
/// UNFENCED must not carry.
const UPSERT_IF_ROW_TOKEN: &str = "
    WITH part AS (
        INSERT INTO report_part AS r (scope, part, content, writer, token)
        VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (scope, part) DO UPDATE
           SET content = EXCLUDED.content, writer = EXCLUDED.writer,
               token = EXCLUDED.token, written_at = clock_timestamp()
         WHERE r.token <= EXCLUDED.token
        RETURNING true
    )
    INSERT INTO write_attempt (scope, part, writer, token, mode, accepted, floor_after)
    VALUES ($1, $2, $4, $5, $6, EXISTS (SELECT FROM part),
            (SELECT max_token FROM fence_floor WHERE scope = $1))
    RETURNING accepted";
// ANCHOR_END: row_fence_sql

// ANCHOR: shared_sql
/// FENCED_SCOPE_SHARED: one call of `fenced_write_shared` (sql/res26.sql),
/// one autocommit statement, one round trip: the scope's advisory lock in
/// share mode (`$7` false) or exclusive mode (`$7` true, with the raise),
/// then the read of the floor, the decision, the data write and the record
/// in one statement that starts after the lock is granted. The function
/// returns what it decided ([`SharedOutcome`]); the statement's commit
/// releases the lock. Nothing here is in the calling statement but the
/// call: what the function's own statements see is decided inside it, each
/// with a snapshot of its own (the function is VOLATILE).
pub const WRITE_SHARED: &str = "SELECT fenced_write_shared($1, $2, $3, $4, $5, $6, $7)";
// ANCHOR_END: shared_sql

/// What one call of `fenced_write_shared` decided, as it returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedOutcome {
    /// `accepted`: the token is the floor (or became it by this call's
    /// raise, under the exclusive lock); written and recorded.
    Accepted,
    /// `refused`: the token is below the floor (or the scope has no floor
    /// row); recorded, nothing written.
    Refused,
    /// `raise`: the token is above the floor and the call held only the
    /// share lock: nothing written or recorded; ask again exclusively.
    Raise,
}

impl std::str::FromStr for SharedOutcome {
    type Err = String;
    fn from_str(text: &str) -> std::result::Result<SharedOutcome, String> {
        match text {
            "accepted" => Ok(SharedOutcome::Accepted),
            "refused" => Ok(SharedOutcome::Refused),
            "raise" => Ok(SharedOutcome::Raise),
            other => Err(format!("fenced_write_shared returned {other:?}, none of accepted, refused, raise")),
        }
    }
}

/// UNFENCED: UPSERT with no fence before it, and its audit record, in one
/// autocommit statement. The token is stored but never compared: the last
/// writer wins (F5). One round trip and one commit per write: the baseline
/// of `lab bench` is the cheapest unfenced write that keeps the record every
/// mode keeps, so a fenced mode's ratio to it is the price of its fence.
/// `floor_after` is read without a lock, as in FENCED_ROW: no UNFENCED
/// write moves the floor.
pub const UNFENCED_WRITE: &str = "
    WITH part AS (
        INSERT INTO report_part (scope, part, content, writer, token)
        VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (scope, part) DO UPDATE
           SET content = EXCLUDED.content, writer = EXCLUDED.writer,
               token = EXCLUDED.token, written_at = clock_timestamp()
    )
    INSERT INTO write_attempt (scope, part, writer, token, mode, accepted, floor_after)
    VALUES ($1, $2, $4, $5, $6, true,
            (SELECT max_token FROM fence_floor WHERE scope = $1))";

/// CHECK_THEN_WRITE's read: a snapshot of the floor that is already history
/// by the time the decision is acted on.
const READ_FLOOR: &str = "SELECT max_token FROM fence_floor WHERE scope = $1";

/// CHECK_THEN_WRITE's floor write: unconditional, so it can move the floor
/// backwards (F6a: from 2 to 1).
const SET_FLOOR: &str = "UPDATE fence_floor SET max_token = $1 WHERE scope = $2";

// ANCHOR: record_sql
/// The audit record of one attempt; see `write_attempt` in sql/res26.sql.
///
/// `floor_after` is the scope's floor read `FOR SHARE`, and the row's `id`
/// is drawn only after that read has its lock: the floor comes from a join
/// below the insert, and the insert's own projection, which evaluates the
/// `id` default (nextval), runs on the row the join returns. A floor row
/// that another writer has locked (a fenced write not yet committed) makes
/// the read wait for that commit and then see the new floor; while this
/// statement holds the share lock no writer can lock the row, so any writer
/// that advances the floor later also draws its id later. So in `id` order
/// the recorded floors are the floor's own history, and a step down among
/// them is a real regression (check-then-write's F6a), never an artefact of
/// two sessions recording at once. (Drawn first, as a VALUES row would draw
/// it, an id could wait on the lock while a later writer took the lock
/// first, wrote a larger floor and committed: the earlier id would then show
/// the later floor, a step down that never happened.) The LEFT JOIN keeps
/// the record for a scope with no floor row, with NULL. Inside a fenced
/// write's own transaction the row is already locked by its UPDATE, and the
/// read sees the floor that transaction set.
const RECORD_ATTEMPT: &str = "
    INSERT INTO write_attempt (scope, part, writer, token, mode, accepted, floor_after)
    SELECT $1, $2, $3, $4, $5, $6, f.max_token
      FROM (SELECT) AS one
      LEFT JOIN (SELECT max_token FROM fence_floor WHERE scope = $1 FOR SHARE) AS f ON true";
// ANCHOR_END: record_sql

// ANCHOR: object_sql
/// VERSION_CAS and CLAIM_FIRST's read (a GET): the report object's version
/// and the token claimed in its body; no row while the object is absent.
const READ_OBJECT: &str = "SELECT version, claim FROM report_object WHERE scope = $1";

/// VERSION_CAS and CLAIM_FIRST's write of a part (a conditional PUT), with
/// its record, in one autocommit statement: accepted only if the object's
/// version is still `$7`, or, with `$7` NULL, if the object is still absent
/// (put-if-absent). The store compares its own version and nothing else:
/// the token `$5` goes into the part and the record, never into a WHERE.
///
/// - `put` takes the object's row lock and keeps it until this statement
///   commits. A writer that finds it locked waits and, under Read
///   Committed, re-evaluates `version = $7` against the version the first
///   one committed: one conditional UPDATE is a compare-and-swap.
/// - `created` inserts the object only when no version was expected;
///   ON CONFLICT DO NOTHING refuses it when a concurrent writer created it.
/// - `done` is the new version, if either changed the object; `part` and
///   `attempt` read it, so the part is written and recorded only by an
///   accepted put, and the primary SELECT reads it first: the row lock is
///   taken before the record's id is drawn, so `id` order is acceptance
///   order, as in FENCED_SCOPE_CTE.
/// - A put that lost is not recorded: both modes go on after it (read and
///   put again, or claim again), and `write_attempt` keeps one row per
///   call of `write`, with its outcome. CLAIM_FIRST records its refusal
///   itself (RECORD_ATTEMPT); a VERSION_CAS write always ends accepted.
/// - `floor_after` is read without a lock, as in UNFENCED: no write of
///   these modes moves the floor.
const PUT_PART_IF_VERSION: &str = "
    WITH put AS (
        UPDATE report_object SET version = version + 1
         WHERE scope = $1 AND version = $7
        RETURNING version
    ), created AS (
        INSERT INTO report_object (scope, version) SELECT $1, 1 WHERE $7::bigint IS NULL
        ON CONFLICT (scope) DO NOTHING
        RETURNING version
    ), done AS (
        SELECT version FROM put UNION ALL SELECT version FROM created
    ), part AS (
        INSERT INTO report_part (scope, part, content, writer, token)
        SELECT $1, $2, $3, $4, $5 FROM done
        ON CONFLICT (scope, part) DO UPDATE
           SET content = EXCLUDED.content, writer = EXCLUDED.writer,
               token = EXCLUDED.token, written_at = clock_timestamp()
    ), attempt AS (
        INSERT INTO write_attempt (scope, part, writer, token, mode, accepted, floor_after)
        SELECT $1, $2, $4, $5, $6, true, (SELECT max_token FROM fence_floor WHERE scope = $1)
          FROM done
    )
    SELECT (SELECT version FROM done)";

/// CLAIM_FIRST's claim (a conditional PUT of the body with the token in
/// it): the token `$2` written into the object, only if its version is still
/// `$3` (or, with `$3` NULL, if it is still absent). It writes no part and
/// no record: it changes who may write next, not the report. Returns the
/// new version, or no row when the condition failed.
const CLAIM_IF_VERSION: &str = "
    WITH put AS (
        UPDATE report_object SET version = version + 1, claim = $2
         WHERE scope = $1 AND version = $3
        RETURNING version
    ), created AS (
        INSERT INTO report_object (scope, version, claim) SELECT $1, 1, $2 WHERE $3::bigint IS NULL
        ON CONFLICT (scope) DO NOTHING
        RETURNING version
    )
    SELECT version FROM put UNION ALL SELECT version FROM created";
// ANCHOR_END: object_sql

/// The report object as READ_OBJECT returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportObject {
    /// The store's version of the object.
    pub version: i64,
    /// The token a CLAIM_FIRST holder wrote into it, if any.
    pub claim: Option<i64>,
}

/// What a CLAIM_FIRST holder knows of a scope's object after its claim.
#[derive(Clone, Copy, Debug)]
struct Claim {
    /// The token it claimed with.
    token: i64,
    /// The version its own last write (the claim, or a part) made.
    version: i64,
}

/// The report store, in one mode, on its own connection to `res26`.
pub struct ResourceStore {
    /// Autocommit outside the transactions this type opens itself.
    client: db::Session,
    /// How writes are judged.
    mode: FenceMode,
    /// The hook at the race point; `None` in a normal write.
    gap: Option<Gap>,
    /// The statements this session has prepared, by their text: each is
    /// parsed and planned once per session. (Given a text, rust-postgres
    /// prepares an unnamed statement on every call: one more round trip per
    /// statement, and a parse and plan on the server each time.)
    prepared: HashMap<&'static str, Statement>,
    /// CLAIM_FIRST: this session's claim of each scope's object, by scope.
    /// (The object module's `writer` claims one object the same way for
    /// F29-F31; this is the claim of the chaos run's and the bench's report.)
    claims: HashMap<String, Claim>,
    /// VERSION_CAS, CLAIM_FIRST: the puts this session lost to another
    /// write and made again (they leave no row in `write_attempt`).
    lost_puts: u64,
}

// ANCHOR: idle_timeout_sql
/// How long the server lets this session sit inside an open transaction
/// before it ends the session (rolling the transaction back, releasing its
/// locks). A writer that stalls inside its fenced transaction holds the
/// scope's floor row lock, and every other writer of the scope waits for it
/// (F11); with this set from the lease's ttl, the server itself ends the
/// stall. `set_config(…, false)`: for the whole session, not one transaction.
const SET_IDLE_TIMEOUT: &str = "SELECT set_config('idle_in_transaction_session_timeout', $1, false)";
// ANCHOR_END: idle_timeout_sql

impl ResourceStore {
    /// Connects to `res26`; `who` names the session in `pg_stat_activity`.
    pub fn connect(mode: FenceMode, who: &str) -> Result<ResourceStore> {
        ResourceStore::connect_to(&Endpoint::lab()?, mode, who)
    }

    /// Connects to `res26` on `server` (a resource server on a host, F17–F19).
    pub fn connect_to(server: &Endpoint, mode: FenceMode, who: &str) -> Result<ResourceStore> {
        let client = db::session(server, credentials::ROLE, db::RES_DB, who, None)?;
        Ok(ResourceStore { client, mode, gap: None, prepared: HashMap::new(), claims: HashMap::new(), lost_puts: 0 })
    }

    /// Lets the server end this session when it sits idle inside a
    /// transaction for longer than `timeout` (see SET_IDLE_TIMEOUT).
    pub fn with_idle_timeout(mut self, timeout: std::time::Duration) -> Result<ResourceStore> {
        let ms = format!("{}ms", timeout.as_millis());
        self.client.query_one(SET_IDLE_TIMEOUT, &[&ms]).context("setting idle_in_transaction_session_timeout")?;
        Ok(self)
    }

    /// Judges this session's next writes in `mode` (the bench's one team
    /// of writers takes every mode in turn). The statements it prepared for
    /// other modes stay prepared; a claim it made (CLAIM_FIRST) stays its
    /// claim, and a put against a version another mode's write has moved
    /// since loses and claims again, as behind any other writer.
    pub fn set_mode(&mut self, mode: FenceMode) {
        self.mode = mode;
    }

    /// Installs the gap hook (F6, F8).
    pub fn with_gap(mut self, gap: impl FnMut() + Send + 'static) -> ResourceStore {
        self.gap = Some(Box::new(gap));
        self
    }

    /// The server process of this store's session, to find it in `pg_stat_activity`.
    pub fn backend_pid(&mut self) -> Result<i32> {
        Ok(self.client.query_one("SELECT pg_backend_pid()", &[])?.get(0))
    }

    /// `sql` as a statement this session has prepared (see `prepared`).
    fn prepared(&mut self, sql: &'static str) -> Result<Statement> {
        if let Some(statement) = self.prepared.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql).context("preparing a statement")?;
        self.prepared.insert(sql, statement.clone());
        Ok(statement)
    }

    /// Writes one part; `true` when the resource accepted it. Every attempt
    /// is recorded in `write_attempt`.
    pub fn write(&mut self, w: &PartWrite) -> Result<bool> {
        let mode = self.mode;
        let what = || format!("{mode} write of {}/{} by {} token={}", w.scope, w.part, w.writer, w.token);
        let result = match self.mode {
            FenceMode::FencedScope => self.write_fenced_scope(w),
            FenceMode::FencedScopeCte => self.write_fenced_scope_cte(w),
            FenceMode::FencedScopeShared => self.write_fenced_scope_shared(w),
            FenceMode::FencedRow => self.write_fenced_row(w),
            FenceMode::Unfenced => self.write_unfenced(w),
            FenceMode::CheckThenWrite => self.write_check_then_write(w),
            FenceMode::VersionCas => self.write_version_cas(w),
            FenceMode::ClaimFirst => self.write_claim_first(w),
        };
        result.with_context(what)
    }

    // ANCHOR: fenced_scope
    fn write_fenced_scope(&mut self, w: &PartWrite) -> Result<bool> {
        let (advance, upsert, record) = (self.prepared(ADVANCE_FENCE)?, self.prepared(UPSERT)?, self.prepared(RECORD_ATTEMPT)?);
        let mut tx = self.client.transaction()?;
        // Compare and advance in one statement; holds the floor row lock from
        // here to commit (see ADVANCE_FENCE).
        if tx.execute(&advance, &[&w.token, &w.scope])? == 0 {
            tx.rollback()?;
            // Refused: recorded after the rollback, on the autocommit session.
            record_attempt(&mut *self.client, &record, w, FenceMode::FencedScope, false)?;
            return Ok(false);
        }
        tx.execute(&upsert, &[&w.scope, &w.part, &w.content, &w.writer, &w.token])?;
        // Accepted: recorded inside the transaction, still under the floor
        // lock, so write_attempt.id follows the order of acceptance.
        record_attempt(&mut tx, &record, w, FenceMode::FencedScope, true)?;
        // Everything written, nothing committed, the floor row still locked.
        if let Some(gap) = self.gap.as_mut() {
            gap();
        }
        tx.commit()?;
        Ok(true)
    }
    // ANCHOR_END: fenced_scope

    // ANCHOR: fenced_scope_cte
    fn write_fenced_scope_cte(&mut self, w: &PartWrite) -> Result<bool> {
        if self.gap.is_some() {
            // A hook between the fence and the write cannot exist here;
            // running without it would fake the interleaving a case asked for.
            return Err("FENCED_SCOPE_CTE is one statement: there is no gap to stop it in".into());
        }
        // One autocommit statement: compare, advance, write and record, or
        // only record the refusal (see FENCE_AND_WRITE).
        let statement = self.prepared(FENCE_AND_WRITE)?;
        let row = self.client.query_one(&statement, &[&w.scope, &w.part, &w.content, &w.writer, &w.token, &FenceMode::FencedScopeCte.name()])?;
        Ok(row.get(0))
    }
    // ANCHOR_END: fenced_scope_cte

    // ANCHOR: fenced_scope_shared
    fn write_fenced_scope_shared(&mut self, w: &PartWrite) -> Result<bool> {
        // First as a reader of the floor (share lock): the normal path, one
        // round trip, whatever the token.
        match self.call_shared(w, false)? {
            SharedOutcome::Accepted => return Ok(true),
            SharedOutcome::Refused => return Ok(false),
            SharedOutcome::Raise => {}
        }
        // The token is above the floor. That call's statement has ended, and
        // its share lock with it: nothing is held here, and another writer
        // may raise the floor before the next call (F6 stops here).
        if let Some(gap) = self.gap.as_mut() {
            gap();
        }
        // Now as a writer of the floor, in a transaction of its own (never
        // an upgrade: see the function), deciding afresh.
        match self.call_shared(w, true)? {
            SharedOutcome::Accepted => Ok(true),
            SharedOutcome::Refused => Ok(false),
            SharedOutcome::Raise => Err("fenced_write_shared asked for a raise under the exclusive lock, which it holds".into()),
        }
    }
    // ANCHOR_END: fenced_scope_shared

    /// One call of `fenced_write_shared`, in share mode or exclusively.
    fn call_shared(&mut self, w: &PartWrite, exclusive: bool) -> Result<SharedOutcome> {
        let statement = self.prepared(WRITE_SHARED)?;
        let args: [&(dyn postgres::types::ToSql + Sync); 7] =
            [&w.scope, &w.part, &w.content, &w.writer, &w.token, &FenceMode::FencedScopeShared.name(), &exclusive];
        let decided: String = self.client.query_one(&statement, &args)?.get(0);
        Ok(decided.parse()?)
    }

    fn write_fenced_row(&mut self, w: &PartWrite) -> Result<bool> {
        // One autocommit statement, the write and its record; `accepted` is
        // false when the conflict branch's WHERE found a larger token.
        let statement = self.prepared(UPSERT_IF_ROW_TOKEN)?;
        let row = self.client.query_one(&statement, &[&w.scope, &w.part, &w.content, &w.writer, &w.token, &FenceMode::FencedRow.name()])?;
        Ok(row.get(0))
    }

    fn write_unfenced(&mut self, w: &PartWrite) -> Result<bool> {
        // One autocommit statement, the write and its record (UNFENCED_WRITE).
        let statement = self.prepared(UNFENCED_WRITE)?;
        self.client.execute(&statement, &[&w.scope, &w.part, &w.content, &w.writer, &w.token, &FenceMode::Unfenced.name()])?;
        Ok(true)
    }

    // ANCHOR: check_then_write
    fn write_check_then_write(&mut self, w: &PartWrite) -> Result<bool> {
        let record = self.prepared(RECORD_ATTEMPT)?;
        // Step 1, autocommit: read the floor. Nothing holds it still afterwards.
        let floor: i64 = self.client.query_one(READ_FLOOR, &[&w.scope])?.get(0);
        if w.token < floor {
            record_attempt(&mut *self.client, &record, w, FenceMode::CheckThenWrite, false)?;
            return Ok(false);
        }
        // Between the check and the writes, another writer may commit.
        if let Some(gap) = self.gap.as_mut() {
            gap();
        }
        // Steps 2 and 3, each autocommit: act on a decision that may be stale.
        self.client.execute(SET_FLOOR, &[&w.token, &w.scope])?;
        self.client.execute(UPSERT, &[&w.scope, &w.part, &w.content, &w.writer, &w.token])?;
        record_attempt(&mut *self.client, &record, w, FenceMode::CheckThenWrite, true)?;
        Ok(true)
    }
    // ANCHOR_END: check_then_write

    /// The puts this session lost and made again (VERSION_CAS, CLAIM_FIRST).
    pub fn lost_puts(&self) -> u64 {
        self.lost_puts
    }

    /// The report object of `scope` as it is now (a GET), `None` while absent.
    pub fn read_object(&mut self, scope: &str) -> Result<Option<ReportObject>> {
        let statement = self.prepared(READ_OBJECT)?;
        let row = self.client.query_opt(&statement, &[&scope]).context("reading the report object")?;
        Ok(row.map(|r| ReportObject { version: r.get(0), claim: r.get(1) }))
    }

    /// One conditional put of a part (PUT_PART_IF_VERSION): the version it
    /// made, or `None` when the version was no longer `expected`.
    fn put_part(&mut self, w: &PartWrite, expected: Option<i64>) -> Result<Option<i64>> {
        let statement = self.prepared(PUT_PART_IF_VERSION)?;
        let row = self.client.query_one(&statement, &[&w.scope, &w.part, &w.content, &w.writer, &w.token, &self.mode.name(), &expected])?;
        Ok(row.get(0))
    }

    // ANCHOR: version_cas
    fn write_version_cas(&mut self, w: &PartWrite) -> Result<bool> {
        // Read, put if unchanged, and on a conflict read again and retry:
        // the optimistic loop of an If-Match client (Kubernetes calls it
        // RetryOnConflict). A stale holder passes as soon as it reads after
        // the newer holder's write: the store never sees tokens.
        loop {
            // GET: the version as it is now.
            let expected = self.read_object(w.scope)?.map(|o| o.version);
            // Between the read and the put, another writer may put.
            if let Some(gap) = self.gap.as_mut() {
                gap();
            }
            // PUT if the version is unchanged.
            if self.put_part(w, expected)?.is_some() {
                return Ok(true);
            }
            self.lost_puts += 1;
        }
    }
    // ANCHOR_END: version_cas

    // ANCHOR: claim_first
    fn write_claim_first(&mut self, w: &PartWrite) -> Result<bool> {
        loop {
            let claimed = match self.claims.get(w.scope) {
                Some(claim) if claim.token == w.token => Some(claim.version),
                _ => self.claim(w)?,
            };
            let Some(version) = claimed else {
                // A larger token claimed the object: refused, and recorded.
                let record = self.prepared(RECORD_ATTEMPT)?;
                record_attempt(&mut *self.client, &record, w, FenceMode::ClaimFirst, false)?;
                return Ok(false);
            };
            // PUT conditional on the version this holder's own last write
            // (or its claim) made, never on one read just now.
            if let Some(next) = self.put_part(w, Some(version))? {
                self.claims.insert(w.scope.to_owned(), Claim { token: w.token, version: next });
                return Ok(true);
            }
            // Another write came in between: claim again. Another holder's
            // claim refuses this one there; a write under this same token
            // (another writer of the holding) lets it go on.
            self.claims.remove(w.scope);
            self.lost_puts += 1;
        }
    }

    /// Claims the scope's object for `w.token`: the version to put against,
    /// or `None` when a larger token holds the claim. An object already
    /// claimed by this token (another writer of the same holding) needs no
    /// new claim. A claim that lost to another write between its read and
    /// its put reads again: only a larger token's claim refuses a holder.
    fn claim(&mut self, w: &PartWrite) -> Result<Option<i64>> {
        let statement = self.prepared(CLAIM_IF_VERSION)?;
        loop {
            let object = self.read_object(w.scope)?;
            match object {
                Some(ReportObject { claim: Some(claim), .. }) if claim > w.token => return Ok(None),
                Some(ReportObject { claim: Some(claim), version }) if claim == w.token => {
                    self.claims.insert(w.scope.to_owned(), Claim { token: w.token, version });
                    return Ok(Some(version));
                }
                _ => {}
            }
            // Between the read and the claim, another holder may put.
            if let Some(gap) = self.gap.as_mut() {
                gap();
            }
            // PUT the token into the body, if the version is still the one read.
            let expected = object.map(|o| o.version);
            let row = self.client.query_opt(&statement, &[&w.scope, &w.token, &expected]).context("claiming the report object")?;
            if let Some(version) = row.map(|r| r.get::<_, i64>(0)) {
                self.claims.insert(w.scope.to_owned(), Claim { token: w.token, version });
                return Ok(Some(version));
            }
        }
    }
    // ANCHOR_END: claim_first
}

/// Inserts the audit record of one attempt with the prepared RECORD_ATTEMPT.
fn record_attempt(db: &mut impl GenericClient, record: &Statement, w: &PartWrite, mode: FenceMode, accepted: bool) -> Result<()> {
    db.execute(record, &[&w.scope, &w.part, &w.writer, &w.token, &mode.name(), &accepted])
        .context("recording the write attempt")?;
    Ok(())
}
