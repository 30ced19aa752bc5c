//! apalis 1.0.0 on apalis-postgres 1.0.0, used through their public API.
//!
//! # What the crate promises
//!
//! apalis-postgres sells itself as a "Reliable job queue using Postgres as
//! the backend" with "Heartbeat and orphaned job re-enqueueing for robust
//! task processing" (its README). Its `Config::lock_tasks` says: "When
//! enabled, tasks are locked while being processed to prevent multiple
//! workers from processing the same task concurrently." The lock is a lease:
//! a claimed row of `apalis.jobs` carries `lock_by` (the worker's name) and
//! every worker's heartbeat refreshes `apalis.workers.last_seen`; any
//! worker's heartbeat re-enqueues the jobs of a worker not seen for
//! `orphaned_duration()` ("a 30-second heartbeat interval with `2` missed
//! heartbeats results in an orphan timeout of 60 seconds"). Nothing stops the
//! old holder: when it resumes, its handler runs on, and only its ack is
//! refused (`handle_result.sql` updates the row only `WHERE lock_by = $2`).
//! Measured with this adapter (two workers, one stopped with SIGSTOP in its
//! handler): another worker ran the job 1.9–2.0 s after the stop; resumed,
//! the old handler's unfenced write landed over the newer one (a fenced one
//! was refused), its ack changed no row, and the worker carried on without
//! an error, heartbeating and taking further jobs.
//!
//! # The crate's statements on `apalis.jobs` (its `queries/` folder)
//!
//! - fetch (`apalis.get_jobs`): Pending or retryable Failed rows →
//!   `Queued`, `lock_by = worker`, `lock_at = now()`; `attempts` unchanged;
//! - lock (`lock_by_id.sql`, the `TaskEvent::Lock` sent as the handler
//!   starts): → `Running`, `lock_at = now()`, `lock_by = worker`;
//! - ack (`handle_result.sql`, the `TaskEvent::Complete` sent as the
//!   handler returns): `status` (Done, Failed, Killed or Pending),
//!   `attempts = ` the attempt the worker reports, `last_result`,
//!   `done_at = NOW()`, only where `lock_by = worker`;
//! - orphan re-enqueue (`reenqueue_orphaned.sql`, in every heartbeat and at
//!   registration) and shutdown re-enqueue (`reenqueue_abandoned.sql`):
//!   → `Pending`, `lock_by = NULL`, `lock_at = NULL`, `attempts + 1`.
//!
//! # What this adapter configures, and why
//!
//! - one queue, [`QUEUE`], for `setup` and every worker (the default is the
//!   Rust type's path, which would tie the database to this file's module);
//! - `batch_size(1)`: a fetch claims one job, so no claimed job waits in a
//!   worker's buffer, unseen by the handler, while its lease runs;
//! - `concurrency(1)` (tower's `ConcurrencyLimitLayer`): one handler at a
//!   time, so the worker fetches again only after its handler returned;
//! - the lease as short as the crate allows: the orphan timeout is
//!   `heartbeat_interval × missed_heartbeats`, truncated to whole seconds
//!   (`orphaned_duration().as_secs()`); 0 s would re-enqueue every live job
//!   at every heartbeat. 1 s is not safe either: registration stamps a new
//!   worker's `last_seen` with the time in whole seconds (`register.sql`
//!   binds `Timestamp(now.as_secs())`), up to 1 s in the past, so until its
//!   first heartbeat another worker's heartbeat finds it dead and re-enqueues
//!   the job it just claimed (measured: both workers' first jobs re-enqueued
//!   under live handlers). So 2 s: [`HEARTBEAT`] 250 ms × [`MISSED`] 8,
//!   which leaves a new worker 0.75 s of slack and a running one 1.75 s;
//! - `poll_with_interval(`[`POLL`]`)`: apalis-postgres fetches when the
//!   worker is woken; without a strategy only the heartbeat wakes an idle
//!   worker, and the jobs a heartbeat re-enqueues send no `NOTIFY`;
//! - acks: apalis does not write an ack where the handler returns. The
//!   `TaskPersistLayer` sends a `TaskEvent::Complete` into a channel, and the
//!   backend drains whatever the channel holds, the next time the worker
//!   polls it, into one `handle_result.sql` statement (a batch). With one
//!   handler at a time and one job per fetch, the channel holds at most that
//!   one job's Lock and Complete, and the worker drains it (and commits)
//!   before it fetches again: one ack statement per result, written at once.
//!   `persist_results(true)` and `lock_tasks(true)` (the defaults) are set
//!   explicitly: without `persist_results` no ack is ever written and the
//!   job stays `Running` under a live worker for ever.
//!
//! The completion record: `setup` installs a statement trigger on
//! `apalis.jobs` (see [`TRIGGER_SQL`]) that writes `queue_completion` for
//! every ack statement, the crate's SQL unchanged.

use crate::handler::{self, Invocation, Statements};
use crate::{Fence, Server};
use apalis::prelude::{
    BackendExt, BoxDynError, Data, Event, EventListenerExt, FromRequest, Task, TaskSink, WorkerBuilder, WorkerBuilderExt,
};
use apalis_postgres::{Config, PostgresStorage};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use std::convert::Infallible;
use std::time::Duration;

/// The queue (`apalis.jobs.job_type`, `apalis.workers.worker_type`) of every
/// job and worker of the lab.
pub const QUEUE: &str = "lab-queues";

/// How often an idle worker asks for a job.
pub const POLL: Duration = Duration::from_millis(100);

/// The interval between a worker's heartbeats.
pub const HEARTBEAT: Duration = Duration::from_millis(250);

/// Heartbeats missed before a worker's jobs are re-enqueued: with
/// [`HEARTBEAT`], an orphan timeout of exactly 2 s, the shortest that does
/// not re-enqueue a new worker's first job (see the module docs; the crate
/// passes the timeout to SQL in whole seconds).
pub const MISSED: usize = 8;

/// Sessions of a worker's pool: the crate's own work (one statement at a
/// time: register, heartbeat, fetch or ack) and the handler's, with room.
const POOL_SIZE: u32 = 4;

/// The job's payload, as the crate stores it: JSON (`{"job":3}`) in the
/// `bytea` column `apalis.jobs.job`, which the completion trigger reads.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LabJob {
    /// The lab's number of the job (`queue_job.job`).
    pub job: i32,
}

// ANCHOR: config
/// The storage with the lab's config (see the module docs).
fn storage(pool: &PgPool) -> PostgresStorage<LabJob> {
    let config = Config::default()
        .queue(QUEUE)
        .batch_size(1)
        .heartbeat_interval(HEARTBEAT)
        .missed_heartbeats(MISSED)
        .lock_tasks(true)
        .persist_results(true);
    PostgresStorage::new(pool).with_config(config)
}
// ANCHOR_END: config

// ANCHOR: trigger
/// The completion record's SQL, each statement with why it is there.
///
/// The ack is `handle_result.sql`: one `UPDATE apalis.jobs` for a batch of
/// results, changing only rows `WHERE lock_by = $2` (the acking worker). It
/// is told apart from the crate's other updates of `apalis.jobs`:
/// - by its rows: it is the only statement that moves a row out of `Queued`
///   or `Running` while keeping `lock_by` (the fetch and the lock move rows
///   into `Queued`/`Running`; both re-enqueues clear `lock_by`);
/// - when it changed no row (a stale worker's ack, refused by `lock_by`),
///   by its text: `current_query()` (the client's statement, the file's text
///   as sqlx sends it) holds the join `INNER JOIN locked ON locked.id =
///   j.task_id`, which no other statement of the crate has. The zero-row
///   fetches of polling workers and the zero-row re-enqueues of every
///   heartbeat fire the statement trigger too, and are not recorded.
pub const TRIGGER_SQL: [(&str, &str); 2] = [
    (
        // Why: the record of one ack statement, run once per statement with
        // the rows as it found them (old_rows) and left them (new_rows).
        // `incarnation` is the acking session's application_name (each worker
        // names its sessions after itself); `job` comes from the payload the
        // crate stores as JSON bytes; `owner` is the row's lock_by as the
        // statement found it. An ack that changed no row is recorded once,
        // with no job: the crate refused it.
        "queue_completion_apalis function",
        "CREATE OR REPLACE FUNCTION public.queue_completion_apalis() RETURNS trigger
         LANGUAGE plpgsql AS $fn$
         DECLARE
           acked bigint;
         BEGIN
           INSERT INTO public.queue_completion (incarnation, job, owner)
           SELECT current_setting('application_name'),
                  (convert_from(o.job, 'UTF8')::jsonb ->> 'job')::int,
                  o.lock_by
             FROM old_rows o
             JOIN new_rows n ON n.id = o.id
            WHERE o.status IN ('Queued', 'Running')
              AND n.status NOT IN ('Queued', 'Running')
              AND n.lock_by IS NOT NULL
            ORDER BY o.id;
           GET DIAGNOSTICS acked = ROW_COUNT;
           IF acked = 0
              AND NOT EXISTS (SELECT 1 FROM new_rows)
              AND strpos(current_query(), 'INNER JOIN locked ON locked.id = j.task_id') > 0 THEN
             INSERT INTO public.queue_completion (incarnation, job, owner)
             VALUES (current_setting('application_name'), NULL, NULL);
           END IF;
           RETURN NULL;
         END
         $fn$",
    ),
    (
        // Why: watch every UPDATE statement on the crate's job table, even
        // one that changes no row (a refused ack changes none), with its
        // transition tables; the function above keeps only the acks.
        "queue_completion_apalis trigger",
        "CREATE TRIGGER queue_completion_apalis
           AFTER UPDATE ON apalis.jobs
           REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
           FOR EACH STATEMENT EXECUTE FUNCTION public.queue_completion_apalis()",
    ),
];
// ANCHOR_END: trigger

/// Makes the crate's schema with its own migrations, enqueues one job per
/// `queue_job` row through the crate's `TaskSink::push`, and installs the
/// completion record ([`TRIGGER_SQL`]).
pub async fn setup(server: &Server) -> Result<(), String> {
    let pool = server.pool("lab-queues setup", 2).await?;
    // The crate's migrations: schema `apalis`, its tables and functions, and
    // the extensions they use (hstore, pgcrypto: trusted, so the database's
    // owner `lab` may create them).
    PostgresStorage::<()>::setup(&pool).await.map_err(|e| format!("apalis-postgres migrations: {e}"))?;
    let jobs: Vec<(i32,)> = sqlx::query_as(
        // The lab's jobs, in order: each becomes one apalis task.
        "SELECT job FROM queue_job ORDER BY job",
    )
    .fetch_all(&pool)
    .await
    .map_err(|e| format!("reading queue_job: {e}"))?;
    let mut storage = storage(&pool);
    for (job,) in jobs {
        storage.push(LabJob { job }).await.map_err(|e| format!("enqueueing job {job}: {e}"))?;
    }
    for (what, sql) in TRIGGER_SQL {
        sqlx::query(sql).execute(&pool).await.map_err(|e| format!("installing {what}: {e}"))?;
    }
    pool.close().await;
    Ok(())
}

/// What the handler needs besides the job: shared by every invocation.
#[derive(Clone)]
struct Lab {
    pool: PgPool,
    statements: Statements,
    me: String,
    fence: Fence,
}

// ANCHOR: token
/// What apalis hands the handler about its claim, read from the task's
/// `ExecutionContext` (the fetched row, plus apalis's local attempt count).
///
/// The token is [`Claim::attempt`]: apalis's `Attempt`. It comes from the
/// database: the fetch returns the row's `attempts` (`TaskBuilder::attempt`),
/// and apalis's `LifecycleFuture` adds 1 locally as the handler starts, so
/// the handler sees `attempts + 1`. It increases with every claim of a job:
/// the fetch and the lock leave `attempts` alone, but every path that makes
/// a claimed job claimable again raises it: the orphan and shutdown
/// re-enqueues (`attempts = attempts + 1`), and a failure or retry ack
/// (`attempts = ` the failed claim's `attempts + 1`). So a claim after a
/// takeover sees at least one more than the claim it took over from.
///
/// Limits: the ack writes the attempt back instead of incrementing it, so
/// the order rests on the ack being refused to anyone but the row's
/// `lock_by`. And `lock_by_id.sql` (the Lock event, sent as a handler
/// starts) does not check `lock_by`: a worker paused after its fetch and
/// before its Lock was written, whose job was re-enqueued and fetched (not
/// yet locked) by another, would on resuming take the row's `lock_by` back;
/// its ack would then be accepted and, on failure, set `attempts` below the
/// newer claim's, so a later claim could repeat the newer claim's token.
/// The lab pauses workers in the handler, after its start is recorded,
/// which in practice is after the Lock is written (a separate, concurrent
/// statement, so not guaranteed). `lock_at` is no token: it is whole
/// seconds in the context, and the Lock rewrites it after the handler
/// started.
struct Claim {
    task_id: String,
    attempt: usize,
    lock_by: Option<String>,
    lock_at: Option<u64>,
}

impl FromRequest<Task<LabJob>> for Claim {
    type Error = Infallible;

    async fn from_request(task: &Task<LabJob>) -> Result<Self, Infallible> {
        Ok(Claim {
            task_id: task.task_id().map(|id| id.to_string()).unwrap_or_default(),
            attempt: task.attempt(),
            lock_by: task.lock_by().map(str::to_owned),
            lock_at: task.lock_at(),
        })
    }
}

impl Claim {
    /// The claim as text for `queue_handler.claim`.
    fn text(&self) -> String {
        format!(
            "task_id={} attempt={} lock_by={} lock_at={}",
            self.task_id,
            self.attempt,
            self.lock_by.as_deref().unwrap_or("-"),
            self.lock_at.map(|at| at.to_string()).unwrap_or_else(|| "-".into()),
        )
    }
}

/// The job's handler: the lab's steps, the claim's attempt as the token,
/// the steps' error as the job's failure (apalis acks it as `Failed`).
async fn run_job(job: LabJob, claim: Claim, lab: Data<Lab>) -> Result<(), BoxDynError> {
    let token = i64::try_from(claim.attempt).map_err(|e| format!("attempt {}: {e}", claim.attempt))?;
    handler::run(Invocation { pool: &lab.pool, statements: &lab.statements, me: &lab.me, job: job.job, token, claim: claim.text(), fence: lab.fence })
        .await
        .map_err(BoxDynError::from)
}
// ANCHOR_END: token

/// Runs one apalis worker named `name` (its `lock_by` and its sessions'
/// application_name) until the process is killed, or until the crate's
/// worker stops (a backend error makes `Worker::run` return), which ends
/// the process with it.
pub async fn work(server: &Server, name: &str, fence: Fence) -> Result<(), String> {
    let pool = server.pool(name, POOL_SIZE).await?;
    let lab = Lab { pool: pool.clone(), statements: Statements::load(&pool).await?, me: name.to_owned(), fence };
    let me = name.to_owned();
    let worker = WorkerBuilder::new(name)
        .backend(storage(&pool).poll_with_interval(POLL))
        .data(lab)
        .concurrency(1)
        .on_event(move |_, event| {
            if let Event::Error(e) = event {
                eprintln!("lab-queues {me}: a job failed: {e}");
            }
        })
        .build(run_job);
    // The worker's end, whatever it is, ends the process with it, as a
    // reader's `main` would: the lab starts a new worker process in the
    // slot, as a supervisor would, and counts the stop.
    match worker.run().await {
        Ok(()) => Err("the apalis worker stopped".to_owned()),
        Err(e) => Err(format!("the apalis worker stopped: {e}")),
    }
}
