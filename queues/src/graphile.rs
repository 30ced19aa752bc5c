//! graphile_worker 0.14.1 (a Rust port of Node's graphile-worker), used
//! through its public API.
//!
//! # What the crate promises
//!
//! Its README: "A PostgreSQL-backed job queue for Rust applications", with
//! "`SKIP LOCKED` job claiming" and "optional heartbeat-based dead-worker
//! recovery". Without that recovery a job claimed by a worker that dies stays
//! locked for ever (`is_available` is `locked_at IS NULL AND attempts <
//! max_attempts`). Its recovery guide calls recovery "an opt-in safety
//! mechanism for jobs that remain locked after a worker stops unexpectedly",
//! and says plainly what a paused worker gets: "If heartbeats keep failing or
//! hanging for longer than the threshold [...], any sweeper, including the
//! worker's own, treats the worker as inactive and recovers its jobs while
//! they may still be running." Nothing stops the old holder: its handler runs
//! on when it resumes, and nothing in its completion checks the claim.
//!
//! # The crate's statements on `graphile_worker._private_jobs`
//!
//! - claim (`get_job`, one autocommit statement): the first available job
//!   `FOR UPDATE SKIP LOCKED`, then `attempts + 1`, `locked_by = worker id`,
//!   `locked_at = now()` (the database's clock: `use_local_time` is left
//!   false), `RETURNING *`: the [`graphile_worker::Job`] the handler gets;
//! - completion (`complete_job`, for a job with no named queue, ours):
//!   `DELETE FROM _private_jobs WHERE id = $1`, by id alone. It does not
//!   check `locked_by`, so a resumed stale worker deletes the job out from
//!   under the worker that now holds it, and that worker's own completion
//!   then deletes nothing;
//! - failure (`fail_job`, a handler error): `last_error`, a backoff `run_at`,
//!   the lock cleared, only `WHERE id = $1 AND locked_by = worker id`: a
//!   stale failure is refused, a stale completion is not;
//! - recovery (the sweeper, `recover_dead_worker_jobs` in the crate's
//!   migrations): for every worker whose heartbeat is older than the sweep
//!   threshold (or that holds a lock that old and is not registered at all):
//!   `attempts = GREATEST(0, attempts - 1)`, `locked_by = NULL`, `locked_at =
//!   NULL`, `run_at = GREATEST(run_at, now() + recovery_delay)`, `last_error =
//!   'Job recovered after worker interruption'`; then the worker's row is
//!   deleted (its next heartbeat registers it again).
//!
//! Which statements delete jobs: in our runs only the completion. The others
//! are not reached: the completion batcher's `DELETE ... WHERE id = ANY(..)`
//! (only with `complete_job_batch_delay`, not set), `WorkerUtils::complete_jobs`
//! and `remove_job` (not called), `cleanup(DeletePermanentlyFailedJobs)` (not
//! called). `add_job` without a job key deletes nothing.
//!
//! # What this adapter configures, and why
//!
//! - one worker per process, `concurrency(1)`: one handler at a time;
//! - the worker's id: the crate draws it at random in `init()`
//!   (`graphile_worker_<18 hex>`) and has no setter. The adapter records
//!   `(worker id, process name)` in `public.queue_graphile_worker` (made by
//!   `setup`, see [`TRIGGER_SQL`]) before the worker runs,
//!   and the completion trigger maps `locked_by` through it, so that
//!   `queue_completion.owner` is a process name like `incarnation`;
//! - `poll_interval(`[`POLL`]`)`: new jobs wake workers through `LISTEN`, but
//!   a recovered job sends no `NOTIFY`; only a poll finds it;
//! - recovery on, short: heartbeat [`HEARTBEAT`], sweep every [`SWEEP`],
//!   threshold [`THRESHOLD`] (five heartbeats of slack for a live worker),
//!   [`RECOVERY_DELAY`] zero: a paused worker's job is claimable again
//!   [`THRESHOLD`] to [`THRESHOLD`] + [`SWEEP`] after its last heartbeat
//!   (measured: taken over 1.02 to 1.22 s after SIGSTOP). Its `run_at`
//!   becomes the sweep's `now()`, so it queues behind jobs added earlier;
//! - no lifecycle hooks: with any hook registered the sweeper recovers job
//!   by job through the hook path instead of `recover_dead_worker_jobs`;
//! - nothing else: in particular no `idle_in_transaction_session_timeout`.
//!   The sweep is one transaction holding a transaction-level advisory lock,
//!   so a worker stopped inside it would keep every other sweeper out until
//!   it resumes; the lab stops workers only where none of their sessions is
//!   inside a transaction (`stall_outside_transactions` in
//!   lab/src/queue/crates/run.rs), so that never happens in its runs;
//! - the token: see [`token`].
//!
//! The crate logs through `tracing` and this binary installs no subscriber:
//! its warnings (a failed heartbeat, "Recovered jobs from inactive workers")
//! are not printed. The record is in the database (`last_error`, the
//! triggers' rows).
//!
//! The completion record: `setup` installs a statement trigger on
//! `graphile_worker._private_jobs` ([`TRIGGER_SQL`]) that writes
//! `queue_completion` for every DELETE statement, the crate's SQL unchanged.

use crate::handler::{self, Invocation, Statements};
use crate::{Fence, Server};
use graphile_worker::{IntoTaskHandlerResult, Job, JobSpec, TaskHandler, WorkerContext, WorkerOptions, WorkerRecoveryConfig, WorkerUtils};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use std::time::Duration;

/// The crate's schema (its default, named explicitly).
pub const SCHEMA: &str = "graphile_worker";

/// How often an idle worker asks for a job.
pub const POLL: Duration = Duration::from_millis(50);

/// How often a worker refreshes its row in `_private_workers`.
pub const HEARTBEAT: Duration = Duration::from_millis(200);

/// How often every worker runs the recovery sweep.
pub const SWEEP: Duration = Duration::from_millis(200);

/// How old a heartbeat must be for its worker to count as dead.
pub const THRESHOLD: Duration = Duration::from_secs(1);

/// How long a recovered job waits before it may be claimed again.
pub const RECOVERY_DELAY: Duration = Duration::ZERO;

/// Sessions of a worker's pool: the crate's claim, completion, heartbeat,
/// sweep transaction and `LISTEN` session, and the handler's, with room.
const POOL_SIZE: u32 = 6;

/// The job's payload, as the crate stores it: JSON `{"job": 3}` in
/// `_private_jobs.payload`, which the completion trigger reads. The task
/// identifier is `report`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// The lab's number of the job (`queue_job.job`).
    pub job: i32,
}

/// What every handler invocation of this worker process needs, handed to the
/// crate as an extension.
#[derive(Clone, Debug)]
struct Lab {
    pool: PgPool,
    statements: Statements,
    name: String,
    fence: Fence,
}

impl TaskHandler for Report {
    const IDENTIFIER: &'static str = "report";

    async fn run(self, ctx: WorkerContext) -> impl IntoTaskHandlerResult {
        let Some(lab) = ctx.get_ext::<Lab>() else {
            return Err("the worker has no Lab extension".to_owned());
        };
        let job = ctx.job();
        let token = token(job)?;
        handler::run(Invocation { pool: &lab.pool, statements: &lab.statements, me: &lab.name, job: self.job, token, claim: claim(job), fence: lab.fence }).await
    }
}

// ANCHOR: token
/// The fencing token of a claim: `locked_at` in microseconds since the
/// epoch.
///
/// What the crate hands the handler, and why the rest will not do:
/// - `id`: the job's, the same on every claim;
/// - `attempts`: the claim adds 1, but the recovery sweep subtracts 1
///   (`recover_dead_worker_jobs`), so a job recovered from a paused worker is
///   claimed again with the same `attempts` as the paused claim;
/// - `revision`: bumped only when `add_job` replaces a job by key;
/// - `locked_by`: a worker id, not ordered.
///
/// `locked_at` is written by the claim statement itself, `now()` on the
/// database's clock (the worker keeps `use_local_time` false), at microsecond
/// precision. A later claim of the same job by another worker can only
/// happen after the sweeper cleared the earlier one (a failing handler
/// clears its own claim too, with a backoff), which it does only once the holder's
/// heartbeat (or, for an unregistered holder, the lock itself) is older than
/// [`THRESHOLD`]: so each later claim of a job carries a larger `locked_at`,
/// by about the threshold, unless the database's clock steps back by that
/// much between the two claims.
pub fn token(job: &Job) -> Result<i64, String> {
    job.locked_at().map(|at| at.timestamp_micros()).ok_or_else(|| format!("job {} was handed over with no locked_at", job.id()))
}
// ANCHOR_END: token

/// What the crate handed, as text for the record.
fn claim(job: &Job) -> String {
    let at = job.locked_at().map(|at| at.to_rfc3339()).unwrap_or_default();
    let by = job.locked_by().as_deref().unwrap_or("");
    format!("id={} attempts={} revision={} locked_at={at} locked_by={by}", job.id(), job.attempts(), job.revision())
}

// ANCHOR: trigger
/// The statements `setup` runs after the crate's migrations, each with why.
pub const TRIGGER_SQL: [(&str, &str); 3] = [
    (
        // Why: the crate draws its worker ids at random and lets no caller
        // choose them; the record needs whose claim a job was as a process
        // name. Each worker writes its row before its first claim.
        "queue_graphile_worker table",
        "CREATE TABLE public.queue_graphile_worker (
           worker_id   text PRIMARY KEY,
           incarnation text NOT NULL,
           at          timestamptz NOT NULL DEFAULT clock_timestamp()
         )",
    ),
    (
        // Why: the record of one DELETE statement on the crate's job table,
        // run once per statement with the rows it deleted (gone). In our runs
        // the only such statement is a worker's completion (complete_job:
        // `DELETE ... WHERE id = $1`). `incarnation` is the completing
        // session's application_name (each worker process names its sessions
        // after itself); `job` comes from the JSON payload; `owner` is the
        // row's locked_by as the statement found it, mapped to its process
        // name (the raw worker id if unmapped, NULL if the job was unlocked,
        // e.g. recovered and not yet claimed again). A statement that deleted
        // nothing (the job already gone) is recorded once, with no job.
        "queue_completion_graphile function",
        "CREATE OR REPLACE FUNCTION public.queue_completion_graphile() RETURNS trigger
         LANGUAGE plpgsql AS $fn$
         BEGIN
           INSERT INTO public.queue_completion (incarnation, job, owner)
           SELECT current_setting('application_name'),
                  (gone.payload ->> 'job')::int,
                  coalesce(w.incarnation, gone.locked_by)
             FROM gone
             LEFT JOIN public.queue_graphile_worker w ON w.worker_id = gone.locked_by
            ORDER BY gone.id;
           IF NOT FOUND THEN
             INSERT INTO public.queue_completion (incarnation, job, owner)
             VALUES (current_setting('application_name'), NULL, NULL);
           END IF;
           RETURN NULL;
         END
         $fn$",
    ),
    (
        // Why: watch every DELETE statement on the crate's job table, even
        // one that deletes no row (a statement trigger fires regardless): the
        // lab needs to know a worker's completion ran although it touched
        // nothing. AFTER, so it sees only what the statement did.
        "queue_completion_graphile trigger",
        "CREATE TRIGGER queue_completion_graphile
           AFTER DELETE ON graphile_worker._private_jobs
           REFERENCING OLD TABLE AS gone
           FOR EACH STATEMENT EXECUTE FUNCTION public.queue_completion_graphile()",
    ),
];
// ANCHOR_END: trigger

/// Makes the crate's schema (its own migrations), enqueues one `report` job
/// per row of `queue_job`, in job order, and installs the completion record.
pub async fn setup(server: &Server) -> Result<(), String> {
    let pool = server.pool("lab-queues-setup", 2).await?;
    let utils = WorkerUtils::new(pool.clone(), SCHEMA);
    utils.migrate().await.map_err(|e| format!("graphile_worker's migrations: {e}"))?;
    let jobs: Vec<(i32,)> = sqlx::query_as(
        // Why: the jobs to enqueue, in order, so the crate's claim order
        // (priority, then run_at) follows the job numbers.
        "SELECT job FROM queue_job ORDER BY job",
    )
    .fetch_all(&pool)
    .await
    .map_err(|e| format!("reading queue_job: {e}"))?;
    for (job,) in jobs {
        utils.add_job(Report { job }, JobSpec::default()).await.map_err(|e| format!("enqueuing job {job}: {e}"))?;
    }
    for (what, sql) in TRIGGER_SQL {
        sqlx::query(sql).execute(&pool).await.map_err(|e| format!("installing the {what}: {e}"))?;
    }
    pool.close().await;
    Ok(())
}

/// Runs one graphile worker for the process `name` until the process is
/// killed. If the crate's `Worker::run` fails (it stops on a failed claim or
/// completion statement, as when the server restarts), the process ends
/// with that error, as a reader's `main` would: the lab starts a new worker
/// process in the slot, as a supervisor would, and counts the stop. A
/// graceful shutdown (SIGINT or SIGTERM, the crate's own listeners) ends
/// the process too.
pub async fn work(server: &Server, name: &str, fence: Fence) -> Result<(), String> {
    let pool = server.pool(name, POOL_SIZE).await?;
    let statements = Statements::load(&pool).await?;
    run_worker(&pool, &statements, name, fence).await
}

/// The worker's life: build it, record its id, run it.
async fn run_worker(pool: &PgPool, statements: &Statements, name: &str, fence: Fence) -> Result<(), String> {
    // ANCHOR: worker
    let recovery = WorkerRecoveryConfig::default()
        .enabled(true)
        .heartbeat_interval(HEARTBEAT)
        .sweep_interval(SWEEP)
        .sweep_threshold(THRESHOLD)
        .recovery_delay(RECOVERY_DELAY);
    let worker = WorkerOptions::default()
        .pg_pool(pool.clone())
        .schema(SCHEMA)
        .concurrency(1)
        .poll_interval(POLL)
        .worker_recovery(recovery)
        .add_extension(Lab { pool: pool.clone(), statements: statements.clone(), name: name.to_owned(), fence })
        .define_job::<Report>()
        .init()
        .await
        .map_err(|e| format!("graphile_worker's init: {e}"))?;
    // ANCHOR_END: worker
    sqlx::query(
        // Why: the crate's worker id for this process name, before the worker
        // claims anything, so the completion trigger can map locked_by.
        "INSERT INTO public.queue_graphile_worker (worker_id, incarnation) VALUES ($1, $2)",
    )
    .bind(worker.worker_id())
    .bind(name)
    .execute(pool)
    .await
    .map_err(|e| format!("recording worker id {}: {e}", worker.worker_id()))?;
    worker.run().await.map_err(|e| format!("graphile_worker {} stopped: {e}", worker.worker_id()))
}
