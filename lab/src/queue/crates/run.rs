//! One crate and one fence: a fresh `queues26`, the crate's setup, its
//! worker processes under the nemesis, every latch opened by the lab, and
//! then — once every job is completed and every live handler has returned
//! and completed — the record read and judged.
//!
//! The lab drives each handler through its two latches (see
//! queues/src/handler.rs) and so forces F4's schedule on every paused job:
//! 1. A's handler starts (the crate has claimed the job for A); the lab
//!    stops A's process (SIGSTOP, every thread) before it may write;
//! 2. the crate's own timeout gives the job to B; B's handler may write at
//!    once but may not return;
//! 3. once B's side effect is written, A is continued and released: its
//!    side effect comes after B's, and it returns and the crate completes
//!    the job for A;
//! 4. once the crate has run A's completion statement (a `queue_completion`
//!    row from A's session), B may return, and the crate completes for B.
//!
//! A delayed job goes through the same schedule with A running: every
//! worker process reaches the server through a delay proxy of its slot's,
//! and instead of stopping A the lab holds its proxy, so A's next request
//! and the crate's heartbeats stay on the wire until B has written.
//!
//! The restart comes first: every handler waits at its first latch until
//! each worker process has one there; then the server is stopped at once
//! and started again, and the waiting handlers are let go: whichever of
//! them the cut sessions failed, the crate must run again by itself. A
//! worker process that ends on its own is started again in its slot, as
//! a supervisor would, and counted.
//!
//! Every wait is on the database's state or the kernel's, with a bound.

use super::judge::{self, Completion, CrateCounts, CrateRecord, Handler};
use super::nemesis::{self, CrateFault, Plan};
use super::process::QueueProcess;
use crate::cluster::{Cluster, Endpoint};
use crate::error::Result;
use crate::fault::proxy::DelayProxy;
use crate::queue::chaos::judge::Effect;
use crate::{db, interrupt, poll};
use postgres::Client;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The database of a run.
pub const QUEUES_DB: &str = "queues26";

/// The lab's record of a run (sql/queues26.sql), loaded beside the resource.
pub const QUEUES_SCHEMA: &str = include_str!("../../../../sql/queues26.sql");

/// How long a paused job may wait for the crate to give it to another
/// worker process before the lab calls it never taken over and continues
/// the paused one: far above each crate's timeout as the adapters set it.
pub const TAKEOVER_BOUND: Duration = Duration::from_secs(30);

/// How long the restart may wait for every worker process to claim a job:
/// far above a worker's start.
const RESTART_BOUND: Duration = Duration::from_secs(60);

/// How many worker processes may end on their own in one run (each is
/// started again): one per slot at the restart, and room.
const MAX_EXITS: usize = 12;

/// How many times the lab stops a worker process before it finds none of
/// its sessions inside a transaction (see `stall_outside_transactions`).
const PAUSE_ATTEMPTS: usize = 20;

/// How long the run may go without a new handler or completion before the
/// jobs still not completed are counted lost. The restart's own time does
/// not count: the crate can do nothing while the server is down and
/// recovering (on a loaded machine that took 8 s here), so the bound starts
/// again once the server is back.
pub const DRAIN_BOUND: Duration = Duration::from_secs(30);

/// The crates under test, as `lab-queues --crate` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrateName {
    /// graphile_worker 0.14.1.
    Graphile,
    /// apalis 1.0.0 on apalis-postgres 1.0.0.
    Apalis,
}

impl CrateName {
    /// Both, in the order run.
    pub const ALL: [CrateName; 2] = [CrateName::Graphile, CrateName::Apalis];

    /// The name on the command line (`--crate`).
    pub fn name(self) -> &'static str {
        match self {
            CrateName::Graphile => "graphile",
            CrateName::Apalis => "apalis",
        }
    }

    /// The crate as published, with the version under test.
    pub fn published(self) -> &'static str {
        match self {
            CrateName::Graphile => "graphile_worker 0.14.1",
            CrateName::Apalis => "apalis-postgres 1.0.0",
        }
    }
}

/// Whether the handler fences its side effect, as `lab-queues --fence` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HandlerFence {
    /// An upsert: last writer wins.
    None,
    /// The claim's token through `fenced_write_shared`.
    Token,
}

impl HandlerFence {
    /// Both, in the order run.
    pub const ALL: [HandlerFence; 2] = [HandlerFence::None, HandlerFence::Token];

    /// The name on the command line (`--fence`).
    pub fn name(self) -> &'static str {
        match self {
            HandlerFence::None => "none",
            HandlerFence::Token => "token",
        }
    }
}

/// What a run is asked to do.
#[derive(Clone, Debug)]
pub struct CrateConfig {
    /// The seed of the nemesis and of the work times.
    pub seed: u64,
    /// How many jobs.
    pub jobs: usize,
    /// How many worker slots.
    pub workers: usize,
}

/// One run's outcome.
#[derive(Clone, Debug)]
pub struct CrateRun {
    /// The judge's counts.
    pub counts: CrateCounts,
    /// Faults that struck, by kind.
    pub struck: BTreeMap<CrateFault, usize>,
    /// Paused jobs the crate never gave to another worker process.
    pub never_taken_over: usize,
    /// Jobs whose later claims did not carry larger tokens.
    pub tokens_not_increasing: usize,
    /// For each paused job taken over, in milliseconds: from the moment the
    /// lab found the paused process stopped with no transaction open (after
    /// `stall_outside_transactions`) to the poll that first saw the newer
    /// attempt's side effect recorded (`written`, polled every
    /// [`poll::EVERY`]).
    pub takeover_ms: Vec<f64>,
    /// Handlers held at their first latch (claimed, nothing written) when
    /// the server restarted…
    pub restart_held: usize,
    /// …and of these, the ones that went on to return (their session came
    /// back under them) rather than fail.
    pub restart_returned: usize,
    /// Worker processes that ended on their own (and were started again).
    pub exited: Vec<String>,
    /// The run's time.
    pub took: Duration,
}

/// The `lab-queues` binary, in the target folder of its own that
/// `./run.sh queues` builds it in (`CARGO_TARGET_DIR=target/queues`: its
/// build never holds the lock on the lab's target/, and never compiles the
/// lab's library again).
pub fn binary() -> PathBuf {
    crate::paths::root().join("target/queues/debug/lab-queues")
}

/// One worker slot: its number and its current worker process.
struct Slot {
    index: usize,
    incarnation: u32,
    process: QueueProcess,
}

/// How a stalled job's stale attempt is kept from writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stall {
    /// Its worker process is stopped (SIGSTOP).
    Stopped,
    /// Its worker process runs; its slot's delay proxy holds every byte.
    Held,
}

/// A paused or delayed job's progress through F4's schedule.
struct Pause {
    /// How the stale attempt is kept back.
    stall: Stall,
    /// The stale attempt's handler row and slot.
    stale: i64,
    slot: usize,
    incarnation: String,
    stopped_at: Instant,
    /// The newer attempt's handler row, once the crate gave the job away.
    newer: Option<i64>,
    /// Set once A was continued: the last completion row before that.
    resumed: Option<(Instant, i64)>,
}

/// Everything one run holds.
struct Driver {
    config: CrateConfig,
    krate: CrateName,
    fence: HandlerFence,
    bin: PathBuf,
    server: Endpoint,
    /// The lab's cluster, for the restart.
    cluster: Cluster,
    db: Client,
    slots: Vec<Slot>,
    /// Each slot's delay proxy: every worker process of the slot connects
    /// through it (`lab-queues --proxy-port`).
    proxies: Vec<DelayProxy>,
    plan: Plan,
}

impl Driver {
    /// `lab-queues`' arguments that name the crate and the server.
    fn common_args(&self) -> Vec<String> {
        let socket = self.server.socket.as_ref().map(|s| s.display().to_string()).unwrap_or_default();
        vec!["--crate".into(), self.krate.name().into(), "--socket".into(), socket, "--port".into(), self.server.port.to_string(), "--db".into(), QUEUES_DB.into()]
    }

    /// Starts worker process `incarnation` of slot `index`.
    fn spawn_worker(&self, index: usize, incarnation: u32) -> Result<QueueProcess> {
        let name = format!("worker-{}#{incarnation}", index + 1);
        let mut args = vec!["worker".to_owned()];
        args.extend(self.common_args());
        args.extend(["--name".into(), name.clone(), "--fence".into(), self.fence.name().into()]);
        args.extend(["--proxy-port".into(), self.proxies[index].port().to_string()]);
        QueueProcess::spawn(&self.bin, &name, &args)
    }

    /// Starts the next worker process of `slot`, in place of the last.
    fn respawn(&mut self, slot: usize) -> Result<()> {
        let (index, next) = (self.slots[slot].index, self.slots[slot].incarnation + 1);
        self.slots[slot].process = self.spawn_worker(index, next)?;
        self.slots[slot].incarnation = next;
        Ok(())
    }

    /// A new session of the lab's, after the restart cut the last one.
    fn reconnect(&mut self) -> Result<()> {
        self.db = db::open(&self.server, crate::cluster::credentials::ROLE, QUEUES_DB, "lab queues", None)?;
        Ok(())
    }

    /// Lets a stale attempt go on: its latches open (it writes and returns
    /// as soon as it reads them), then its process continued or its held
    /// bytes sent on.
    fn let_go(&mut self, stall: Stall, slot: usize, stale: i64) -> Result<()> {
        // Both latches of the stale attempt, before it can read them.
        self.db.execute("UPDATE queue_handler SET released = true, proceed = true WHERE id = $1", &[&stale])?;
        match stall {
            Stall::Stopped => self.slots[slot].process.resume(),
            Stall::Held => {
                self.proxies[slot].release();
                Ok(())
            }
        }
    }

    /// The slot whose current worker process is `incarnation`.
    fn slot_of(&self, incarnation: &str) -> Result<usize> {
        self.slots.iter().position(|s| s.process.name == incarnation).ok_or_else(|| format!("no live worker process is {incarnation}").into())
    }

    /// Opens latches of handler row `id`.
    fn open(&mut self, id: i64, released: bool, proceed: bool) -> Result<()> {
        // The lab's side of a latch: the handler polls this row.
        self.db.execute("UPDATE queue_handler SET released = released OR $2, proceed = proceed OR $3 WHERE id = $1", &[&id, &released, &proceed])?;
        Ok(())
    }

    /// Stops the worker process of `slot` where no session of its has a
    /// transaction open. The crate runs its own statements beside the
    /// handler (apalis-postgres writes its Lock as the handler starts, in a
    /// transaction of its own); a process stopped inside one would hold the
    /// job's row lock until it resumes, and no other worker could take the
    /// job over: a different fault, which would never show a takeover. So:
    /// stop, let the server finish any statement in flight (a stopped client
    /// cannot start another), and if a session is idle in a transaction,
    /// continue the process until it is not, and stop it again.
    ///
    /// A held connection is the same: a transaction whose COMMIT waits in
    /// the proxy keeps its row locks (beside two busy loops, a delayed
    /// graphile_worker job went 30 s without a takeover until the lab held
    /// only outside transactions), so `stall` says which: stop the process,
    /// or hold its slot's proxy.
    fn stall_outside_transactions(&mut self, slot: usize, stall: Stall) -> Result<()> {
        let name = self.slots[slot].process.name.clone();
        for _ in 0..PAUSE_ATTEMPTS {
            match stall {
                Stall::Stopped => self.slots[slot].process.pause()?,
                Stall::Held => {
                    // From here every byte of the slot's process stays in
                    // its proxy. The handler reads its latch every few
                    // milliseconds, so bytes held is the sign it is stalled.
                    self.proxies[slot].hold();
                    if !self.proxies[slot].wait_until_held(poll::BOUND) {
                        return Err(format!("{name}'s proxy held nothing {:?} after it began to hold", poll::BOUND).into());
                    }
                }
            }
            let mut open = 0i64;
            let settled = poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
                // The stopped process's sessions, as the server sees them:
                // none still running a statement, and how many are inside a
                // transaction.
                let row = self.db.query_one(
                    "SELECT count(*) FILTER (WHERE state = 'active'),
                            count(*) FILTER (WHERE state LIKE 'idle in transaction%')
                       FROM pg_stat_activity WHERE application_name = $1",
                    &[&name],
                )?;
                open = row.get(1);
                Ok(row.get::<_, i64>(0) == 0)
            })?;
            if !settled {
                return Err(format!("{name}'s sessions still ran a statement {:?} after it was stopped", poll::BOUND).into());
            }
            if open == 0 {
                return Ok(());
            }
            match stall {
                Stall::Stopped => self.slots[slot].process.resume()?,
                Stall::Held => self.proxies[slot].release(),
            }
            let closed = poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
                // Continued until its transaction ends.
                let open: i64 = self.db.query_one("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'", &[&name])?.get(0);
                Ok(open == 0)
            })?;
            if !closed {
                return Err(format!("{name} kept a transaction open {:?} after it was continued", poll::BOUND).into());
            }
        }
        Err(format!("{name} was inside a transaction each of {PAUSE_ATTEMPTS} times it was stopped").into())
    }

    /// A worker process that ended without being killed is started again
    /// in its slot, as a supervisor would (systemd's `Restart=`), and
    /// returned with its last words: the crate's worker gave up.
    /// More than [`MAX_EXITS`] in one run is the run's failure: a worker
    /// that cannot start at all would be started again and again.
    fn check_workers(&mut self, exited: &mut Vec<String>) -> Result<()> {
        for slot in 0..self.slots.len() {
            if let Some(status) = self.slots[slot].process.exited()? {
                let stderr = self.slots[slot].process.stderr();
                if exited.len() >= MAX_EXITS {
                    return Err(format!("{} ended on its own ({status}), the {}th worker process of the run to do so; its stderr:\n{stderr}", self.slots[slot].process.name, MAX_EXITS + 1).into());
                }
                let last = stderr.lines().last().unwrap_or("(nothing on stderr)").trim_start_matches("lab-queues: ").to_owned();
                exited.push(format!("{} ({status}): {last}", self.slots[slot].process.name));
                self.respawn(slot)?;
            }
        }
        Ok(())
    }
}

/// Runs `krate` with `fence` under the nemesis of `config`, on `cluster`.
pub fn run_crate(config: &CrateConfig, cluster: &Cluster, krate: CrateName, fence: HandlerFence) -> Result<CrateRun> {
    let start = Instant::now();
    let server = Endpoint::lab()?;
    let schema = format!("{}\n{QUEUES_SCHEMA}", db::RES_SCHEMA);
    db::setup::fresh_databases(&server, &[(QUEUES_DB, &schema)])?;
    let plan = nemesis::plan(config.seed, config.jobs);
    let mut client = db::open(&server, crate::cluster::credentials::ROLE, QUEUES_DB, "lab queues", None)?;
    for (i, ms) in plan.work_ms.iter().enumerate() {
        let (job, ms, scope) = ((i + 1) as i32, *ms as i32, format!("job-{}", i + 1));
        // The job, its work time, and its scope's floor at 0, below every
        // claim's token: the fence needs a floor row to compare against.
        client.execute("INSERT INTO queue_job (job, work_ms) VALUES ($1, $2)", &[&job, &ms])?;
        client.execute("INSERT INTO fence_floor (scope, max_token) VALUES ($1, 0)", &[&scope])?;
    }
    for (name, sql) in [("unfenced_write", crate::resource::UNFENCED_WRITE), ("write_shared", crate::resource::WRITE_SHARED)] {
        // The resource's statements for the handlers, the lab's own text.
        client.execute("INSERT INTO queue_statement (name, sql) VALUES ($1, $2)", &[&name, &sql])?;
    }
    let socket = server.socket_file().ok_or("the lab's cluster has no Unix socket")?;
    let proxies = (0..config.workers).map(|_| DelayProxy::start(socket.clone())).collect::<Result<Vec<_>>>()?;
    let mut driver = Driver { config: config.clone(), krate, fence, bin: binary(), server, cluster: cluster.clone(), db: client, slots: Vec::new(), proxies, plan };
    let mut setup_args = vec!["setup".to_owned()];
    setup_args.extend(driver.common_args());
    let mut setup = QueueProcess::spawn(&driver.bin, "setup", &setup_args)?;
    let status = setup.wait_exit(Duration::from_secs(60))?;
    if !status.success() {
        return Err(format!("lab-queues setup --crate {} failed ({status}):\n{}", krate.name(), setup.stderr()).into());
    }
    for index in 0..config.workers {
        let process = driver.spawn_worker(index, 0)?;
        driver.slots.push(Slot { index, incarnation: 0, process });
    }
    let outcome = drive(&mut driver);
    let stderr: Vec<String> = driver.slots.iter().map(|s| format!("{}:\n{}", s.process.name, s.process.stderr())).collect();
    driver.slots.clear();
    let p = outcome.map_err(|e| format!("{e}\nthe worker processes' stderr:\n{}", stderr.join("\n")))?;
    let record = read_record(&mut driver.db, config.jobs)?;
    let tokens_not_increasing = tokens_not_increasing(&record.handlers);
    let restart_returned: i64 = driver
        .db
        // Of the handlers held across the restart, those that went on to
        // return (the others failed on a cut session).
        .query_one("SELECT count(*) FROM queue_handler WHERE id = ANY($1) AND returned_at IS NOT NULL", &[&p.restart_held])?
        .get(0);
    Ok(CrateRun {
        counts: judge::judge(&record),
        struck: p.struck,
        never_taken_over: p.never_taken_over,
        tokens_not_increasing,
        takeover_ms: p.takeover_ms,
        restart_held: p.restart_held.len(),
        restart_returned: restart_returned as usize,
        exited: p.exited,
        took: start.elapsed(),
    })
}

/// A handler row the lab has not acted on: its id, job and worker process.
type Arrival = (i64, i32, String);

/// What the control loop keeps between its rounds.
#[derive(Default)]
struct Progress {
    /// Jobs whose first handler after the restart the lab has acted on (a
    /// fault strikes there).
    first_seen: BTreeSet<i32>,
    /// Jobs in F4's schedule.
    pauses: BTreeMap<i32, Pause>,
    struck: BTreeMap<CrateFault, usize>,
    never_taken_over: usize,
    takeover_ms: Vec<f64>,
    /// The restart, until it has struck: since when it is owed, and the
    /// handlers held at their first latch for it.
    restart: Option<(Instant, Vec<Arrival>)>,
    /// The handler rows held at their first latch when the server restarted.
    restart_held: Vec<i64>,
    /// Worker processes that ended on their own, with their last words.
    exited: Vec<String>,
}

/// The control loop: holds the first handlers for the restart, then opens
/// latches, deals faults, walks each paused or delayed job through F4's
/// schedule, until every job is completed and every live handler has
/// returned and been completed.
fn drive(d: &mut Driver) -> Result<Progress> {
    let mut seen = 0i64;
    let mut p = Progress { restart: Some((Instant::now(), Vec::new())), ..Progress::default() };
    let mut last_progress = (Instant::now(), 0i64, 0i64);
    loop {
        if interrupt::requested() {
            return Err("interrupted".into());
        }
        d.check_workers(&mut p.exited)?;
        // New handler invocations, in the order they started.
        let rows = d.db.query("SELECT id, job, incarnation FROM queue_handler WHERE id > $1 ORDER BY id", &[&seen])?;
        for row in rows {
            seen = row.get(0);
            arrive(d, &mut p, (row.get(0), row.get(1), row.get(2)))?;
        }
        step_pauses(d, &mut p)?;
        if step_restart(d, &mut p)? {
            // The server is back: from here the crate can move again.
            last_progress.0 = Instant::now();
        }
        // Done: every job completed, no job in F4's schedule, the restart
        // struck, and every live worker process has had each returned
        // handler completed.
        let live: Vec<String> = d.slots.iter().map(|s| s.process.name.clone()).collect();
        let row = d.db.query_one(
            // Completed jobs, and live worker processes with a handler
            // still running or one the crate has not yet run a completion
            // statement for (one statement per returned handler).
            "SELECT (SELECT count(DISTINCT job) FROM queue_completion WHERE job IS NOT NULL),
                    (SELECT count(*) FROM unnest($1::text[]) AS w(name)
                      WHERE EXISTS (SELECT 1 FROM queue_handler WHERE incarnation = w.name AND returned_at IS NULL)
                         OR (SELECT count(*) FROM queue_handler WHERE incarnation = w.name)
                          > (SELECT count(*) FROM queue_completion WHERE incarnation = w.name)),
                    (SELECT count(*) FROM queue_handler), (SELECT count(*) FROM queue_completion)",
            &[&live],
        )?;
        let (completed, owing, handlers, completions): (i64, i64, i64, i64) = (row.get(0), row.get(1), row.get(2), row.get(3));
        let settled = p.pauses.is_empty() && p.restart.is_none();
        if completed as usize == d.config.jobs && settled && owing == 0 {
            break;
        }
        if (handlers, completions) != (last_progress.1, last_progress.2) {
            last_progress = (Instant::now(), handlers, completions);
        } else if settled && last_progress.0.elapsed() > DRAIN_BOUND {
            // Nothing moves any more: what is not completed is lost.
            break;
        }
        std::thread::sleep(poll::EVERY);
    }
    Ok(p)
}

/// Acts on a new handler row: holds it at its first latch until the
/// restart has struck, deals the job's fault at its first handler after
/// that, lets the newer attempt of a stalled job write but not return, and
/// lets every other go.
fn arrive(d: &mut Driver, p: &mut Progress, (id, job, incarnation): Arrival) -> Result<()> {
    if let Some((_, waiting)) = p.restart.as_mut() {
        waiting.push((id, job, incarnation));
        return Ok(());
    }
    let first = p.first_seen.insert(job);
    match (first, d.plan.faults.get(&job).copied()) {
        (true, Some(CrateFault::Pause)) => {
            let slot = d.slot_of(&incarnation)?;
            d.stall_outside_transactions(slot, Stall::Stopped)?;
            *p.struck.entry(CrateFault::Pause).or_default() += 1;
            p.pauses.insert(job, Pause { stall: Stall::Stopped, stale: id, slot, incarnation, stopped_at: Instant::now(), newer: None, resumed: None });
        }
        (true, Some(CrateFault::Delay)) => {
            let slot = d.slot_of(&incarnation)?;
            // Its handler's next read of its latch, and the crate's
            // heartbeats, stay in the proxy.
            d.stall_outside_transactions(slot, Stall::Held)?;
            *p.struck.entry(CrateFault::Delay).or_default() += 1;
            p.pauses.insert(job, Pause { stall: Stall::Held, stale: id, slot, incarnation, stopped_at: Instant::now(), newer: None, resumed: None });
        }
        (true, Some(CrateFault::Kill)) => {
            let slot = d.slot_of(&incarnation)?;
            d.slots[slot].process.kill();
            *p.struck.entry(CrateFault::Kill).or_default() += 1;
            d.respawn(slot)?;
        }
        _ => match p.pauses.get_mut(&job) {
            // The newer attempt of a stalled job: it may write, not return.
            Some(pause) if pause.newer.is_none() && pause.incarnation != incarnation => {
                pause.newer = Some(id);
                d.open(id, true, false)?;
            }
            _ => d.open(id, true, true)?,
        },
    }
    Ok(())
}

/// Each stalled job, one step further where the database allows.
fn step_pauses(d: &mut Driver, p: &mut Progress) -> Result<()> {
    let mut finished = Vec::new();
    for (job, pause) in p.pauses.iter_mut() {
        match (pause.newer, pause.resumed) {
            (None, _) if pause.stopped_at.elapsed() > TAKEOVER_BOUND => {
                // The crate never gave the job away: let A go on as is.
                p.never_taken_over += 1;
                d.let_go(pause.stall, pause.slot, pause.stale)?;
                finished.push(*job);
            }
            (Some(newer), None) => {
                // B's side effect written? (`written` is set right after it.)
                let written: bool = d.db.query_one("SELECT written IS NOT NULL FROM queue_handler WHERE id = $1", &[&newer])?.get(0);
                if written {
                    p.takeover_ms.push(pause.stopped_at.elapsed().as_secs_f64() * 1e3);
                    // The last completion row so far: A's completion is a later one.
                    let last: i64 = d.db.query_one("SELECT coalesce(max(id), 0) FROM queue_completion", &[])?.get(0);
                    d.let_go(pause.stall, pause.slot, pause.stale)?;
                    pause.resumed = Some((Instant::now(), last));
                }
            }
            (Some(newer), Some((resumed_at, last))) => {
                // Has the crate run A's completion statement?
                let completed: bool = d.db.query_one("SELECT EXISTS (SELECT 1 FROM queue_completion WHERE incarnation = $1 AND id > $2)", &[&pause.incarnation, &last])?.get(0);
                if completed {
                    // B's second latch: it may return now.
                    d.db.execute("UPDATE queue_handler SET proceed = true WHERE id = $1", &[&newer])?;
                    finished.push(*job);
                } else if resumed_at.elapsed() > poll::BOUND {
                    return Err(format!("{} was let go {:?} ago and its completion of job {job} never came", pause.incarnation, poll::BOUND).into());
                }
            }
            (None, _) => {}
        }
    }
    for job in finished {
        p.pauses.remove(&job);
    }
    Ok(())
}

/// The restart, once every worker process has a handler held at its first
/// latch (nothing the lab let go is running: it let nothing go yet). Then
/// an immediate stop and a start of the server, a new session for the lab,
/// and the held handlers let go, their faults not dealt: their sessions
/// were cut, and a fault is dealt to a job's first handler after this.
/// `true` when the restart struck in this call.
fn step_restart(d: &mut Driver, p: &mut Progress) -> Result<bool> {
    let Some((since, waiting)) = &p.restart else { return Ok(false) };
    if waiting.len() < d.config.workers.min(d.config.jobs) {
        if since.elapsed() > RESTART_BOUND {
            let held: Vec<String> = waiting.iter().map(|(id, job, incarnation)| format!("handler {id}: job {job} in {incarnation}")).collect();
            return Err(format!(
                "the worker processes did not all claim a job within {RESTART_BOUND:?} ({} handlers held: {}); the run's sessions now:\n{}",
                waiting.len(),
                held.join(", "),
                sessions_now(&mut d.db)?
            )
            .into());
        }
        return Ok(false);
    }
    d.cluster.restart_immediate()?;
    d.reconnect()?;
    *p.struck.entry(CrateFault::Restart).or_default() += 1;
    let (_, waiting) = p.restart.take().expect("checked above");
    for (id, _, _) in waiting {
        p.restart_held.push(id);
        d.open(id, true, true)?;
    }
    Ok(true)
}

/// Every session on the run's database but the lab's own, as
/// `pg_stat_activity` shows it: which worker process is waiting, on what
/// (a lock, the client, nothing), in which statement. What a bound that
/// ran out needs to say, so that the run explains itself.
fn sessions_now(db: &mut Client) -> Result<String> {
    // Why: a worker that never claims a job is either not asking (idle, or
    // gone) or asking and blocked (a lock wait shows in wait_event_type).
    let rows = db.query(
        "SELECT application_name, state, coalesce(wait_event_type || '/' || wait_event, '-'),
                round(extract(epoch FROM now() - state_change)::numeric, 1)::text, left(regexp_replace(query, '\\s+', ' ', 'g'), 160)
           FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()
          ORDER BY application_name",
        &[],
    )?;
    let lines: Vec<String> = rows
        .iter()
        .map(|r| {
            let (who, state, wait, for_s, query): (String, Option<String>, String, Option<String>, Option<String>) = (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
            format!("  {who}: {} for {}s, waiting on {wait}: {}", state.as_deref().unwrap_or("-"), for_s.as_deref().unwrap_or("?"), query.as_deref().unwrap_or(""))
        })
        .collect();
    Ok(if lines.is_empty() { "  (none)".to_owned() } else { lines.join("\n") })
}

/// The run's record, read once every worker process is gone.
fn read_record(db: &mut Client, jobs: usize) -> Result<CrateRecord> {
    // Every handler invocation, in the order they started.
    let handlers = db
        .query("SELECT job, incarnation, token FROM queue_handler ORDER BY id", &[])?
        .iter()
        .map(|r| Handler { job: r.get(0), incarnation: r.get(1), token: r.get(2) })
        .collect();
    // Every side effect the resource decided, in its order (for the
    // fenced scope, the order of acceptance).
    let effects = db
        .query("SELECT id, scope, writer, token, accepted FROM write_attempt WHERE scope LIKE 'job-%' ORDER BY id", &[])?
        .iter()
        .map(|r| {
            let scope: String = r.get(1);
            let job = scope.trim_start_matches("job-").parse::<i64>().map_err(|_| format!("write_attempt has a scope {scope:?} that names no job"))?;
            Ok(Effect { id: r.get(0), job, writer: r.get(2), token: r.get(3), accepted: r.get(4) })
        })
        .collect::<Result<Vec<_>>>()?;
    // Every completion statement's rows, in order.
    let completions = db
        .query("SELECT incarnation, job, owner FROM queue_completion ORDER BY id", &[])?
        .iter()
        .map(|r| Completion { incarnation: r.get(0), job: r.get(1), owner: r.get(2) })
        .collect();
    Ok(CrateRecord { jobs, handlers, effects, completions })
}

/// Jobs whose handlers, in the order they started, did not carry strictly
/// increasing tokens: a token that does not grow with each claim cannot
/// fence (the fenced run would refuse the newer attempt instead).
fn tokens_not_increasing(handlers: &[Handler]) -> usize {
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    let mut bad = BTreeSet::new();
    for h in handlers {
        if let Some(prev) = last.insert(h.job, h.token) {
            if h.token <= prev {
                bad.insert(h.job);
            }
        }
    }
    bad.len()
}
