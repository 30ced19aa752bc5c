//! What every job's handler does, whatever the crate that called it: the
//! same steps, so that the crates differ only in what they hand the
//! handler and in what they do with its result.
//!
//! 1. Say it started: a `queue_handler` row with the job, this worker
//!    process and the token the handler will fence with.
//! 2. Wait until the lab releases it (`released`). The nemesis stops or
//!    kills the process while it waits here, so a fault lands between the
//!    claim and the side effect, where a GC pause or a slow disk would.
//! 3. Work for the job's `work_ms`.
//! 4. Write the side effect: the job's part `result` in scope `job-N`,
//!    unfenced (an upsert, last writer wins) or fenced (`fenced_write_shared`
//!    with the token), and record what the resource said.
//! 5. Wait until the lab lets it return (`proceed`), then return, and the
//!    crate completes the job.

use crate::Fence;
use sqlx::PgPool;
use std::time::Duration;

/// The part every job writes in its scope.
const PART: &str = "result";

/// How often a handler asks whether its latch is open. A read of one row
/// by its key: the handler waits on the database's state, as the lab's
/// holders wait on their release line.
const LATCH_POLL: Duration = Duration::from_millis(10);

/// The mode names the resource records in `write_attempt.mode`.
const UNFENCED: &str = "unfenced";
const FENCED: &str = "fenced-scope-shared";

/// The resource's statements, as the lab runs them (`UNFENCED_WRITE`,
/// `WRITE_SHARED` in lab/src/resource/mod.rs), read once per worker process
/// from `queue_statement`, where the lab writes them before any worker
/// starts.
#[derive(Clone, Debug)]
pub struct Statements {
    unfenced_write: String,
    write_shared: String,
}

impl Statements {
    /// Reads them; a missing one is an error, never a default.
    pub async fn load(pool: &PgPool) -> Result<Statements, String> {
        let read = |name: &'static str| async move {
            // The statement the lab wrote under `name`.
            sqlx::query_as::<_, (String,)>("SELECT sql FROM queue_statement WHERE name = $1")
                .bind(name)
                .fetch_optional(pool)
                .await
                .map_err(|e| format!("reading the statement {name}: {e}"))?
                .map(|(sql,)| sql)
                .ok_or_else(|| format!("queue_statement has no {name}: the lab writes it before the workers start"))
        };
        Ok(Statements { unfenced_write: read("unfenced_write").await?, write_shared: read("write_shared").await? })
    }
}

/// One invocation of a handler: the job, and the claim the crate handed.
pub struct Invocation<'a> {
    /// A pool of this worker process's sessions.
    pub pool: &'a PgPool,
    /// The resource's statements.
    pub statements: &'a Statements,
    /// This worker process's name.
    pub me: &'a str,
    /// The lab's number of the job (the payload).
    pub job: i32,
    /// The token derived from the claim (each crate says how).
    pub token: i64,
    /// What the crate handed, as text for the record (`attempts=2 …`).
    pub claim: String,
    /// Whether to fence the side effect.
    pub fence: Fence,
}

/// The job's scope in the resource: `job-N`.
pub fn scope(job: i32) -> String {
    format!("job-{job}")
}

/// Runs the handler's steps. An error is the handler's failure, which the
/// crate handles as it handles any failed job (the lab counts it).
pub async fn run(inv: Invocation<'_>) -> Result<(), String> {
    let db = |what: &'static str| move |e: sqlx::Error| format!("{what}: {e}");
    // 1. The start, and the job's work time.
    let (id, work_ms): (i64, i32) = sqlx::query_as(
        // The invocation's row (its latches closed) and the job's work time,
        // in one statement: the lab sees the row as soon as it commits.
        "WITH started AS (
             INSERT INTO queue_handler (job, incarnation, token, claim) VALUES ($1, $2, $3, $4) RETURNING id, job)
         SELECT started.id, queue_job.work_ms FROM started JOIN queue_job USING (job)",
    )
    .bind(inv.job)
    .bind(inv.me)
    .bind(inv.token)
    .bind(&inv.claim)
    .fetch_one(inv.pool)
    .await
    .map_err(db("recording the handler's start"))?;
    // 2. The first latch.
    wait_latch(inv.pool, id, Latch::Released).await?;
    // 3. The work.
    tokio::time::sleep(Duration::from_millis(work_ms.max(0) as u64)).await;
    // ANCHOR: side_effect
    // 4. The side effect.
    let content = format!("done by {}", inv.me);
    let written = match inv.fence {
        Fence::None => {
            // The resource's own unfenced write (UNFENCED_WRITE): upsert and
            // record, one autocommit statement, the token stored unread.
            // AssertSqlSafe: the lab's own constant, with bind parameters;
            // nothing of a job's is spliced into its text.
            sqlx::query(sqlx::AssertSqlSafe(inv.statements.unfenced_write.clone()))
                .bind(scope(inv.job))
                .bind(PART)
                .bind(&content)
                .bind(inv.me)
                .bind(inv.token)
                .bind(UNFENCED)
                .execute(inv.pool)
                .await
                .map_err(db("writing the side effect"))?;
            "accepted".to_owned()
        }
        Fence::Token => fenced_write(inv.pool, &inv.statements.write_shared, inv.job, &content, inv.me, inv.token).await?,
    };
    // ANCHOR_END: side_effect
    sqlx::query(
        // What the resource said, for the lab: the sign that the side
        // effect is written.
        "UPDATE queue_handler SET written = $2 WHERE id = $1",
    )
    .bind(id)
    .bind(&written)
    .execute(inv.pool)
    .await
    .map_err(db("recording the side effect"))?;
    // 5. The second latch, then back to the crate.
    wait_latch(inv.pool, id, Latch::Proceed).await?;
    sqlx::query(
        // The handler's return: the crate's completion comes next.
        "UPDATE queue_handler SET returned_at = clock_timestamp() WHERE id = $1",
    )
    .bind(id)
    .execute(inv.pool)
    .await
    .map_err(db("recording the handler's return"))?;
    Ok(())
}

// ANCHOR: fenced_write
/// The fenced side effect: the lab's `fenced_write_shared` (sql/res26.sql),
/// first in share mode, and again exclusively when the token is above the
/// scope's floor (`raise`), as the lab's FENCED_SCOPE_SHARED writer does.
/// Returns `accepted` or `refused`.
async fn fenced_write(pool: &PgPool, write_shared: &str, job: i32, content: &str, me: &str, token: i64) -> Result<String, String> {
    for exclusive in [false, true] {
        let (said,): (String,) = sqlx::query_as(sqlx::AssertSqlSafe(write_shared.to_owned()))
            .bind(scope(job))
            .bind(PART)
            .bind(content)
            .bind(me)
            .bind(token)
            .bind(FENCED)
            .bind(exclusive)
            .fetch_one(pool)
            .await
            .map_err(|e| format!("the fenced write: {e}"))?;
        match said.as_str() {
            "accepted" | "refused" => return Ok(said),
            "raise" if !exclusive => continue,
            other => return Err(format!("fenced_write_shared said {other:?} (exclusive: {exclusive})")),
        }
    }
    unreachable!("the exclusive call returns or fails")
}
// ANCHOR_END: fenced_write

/// The handler's two latches.
#[derive(Clone, Copy)]
enum Latch {
    Released,
    Proceed,
}

/// Waits until the lab opens `latch` of invocation `id`.
async fn wait_latch(pool: &PgPool, id: i64, latch: Latch) -> Result<(), String> {
    let sql = match latch {
        // The latch as the lab last set it: one row by its key.
        Latch::Released => "SELECT released FROM queue_handler WHERE id = $1",
        Latch::Proceed => "SELECT proceed FROM queue_handler WHERE id = $1",
    };
    loop {
        let (open,): (bool,) = sqlx::query_as(sql).bind(id).fetch_one(pool).await.map_err(|e| format!("reading a latch: {e}"))?;
        if open {
            return Ok(());
        }
        tokio::time::sleep(LATCH_POLL).await;
    }
}
