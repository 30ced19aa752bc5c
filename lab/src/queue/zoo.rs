//! The zoo's staged runs: one job, two workers (or one worker restarted),
//! the rescuer or the pruner, each step forced in order by the case, and
//! the harm counted afterwards from the database: how many workers ran the
//! job, which side effects the resource accepted, which stale heartbeats
//! and completions the queue accepted, which live claims it took back.
//!
//! Four shapes cover the nine bugs:
//! - [`stale_claim`]: worker A claims and stops before its work (a pause);
//!   its lease runs out, the rescuer takes the job back, B claims it and
//!   writes; then A resumes and heartbeats, writes, completes (Z1, Z2, Z4,
//!   Z5);
//! - [`rescue_race`]: A works past its lease and completes while the
//!   rescuer is between reading and writing (Z3);
//! - [`healthy`]: A heartbeats all along, yet the rescuer or the pruner
//!   takes its job (Z6, Z7, Z9);
//! - [`starved`]: A's work holds the one connection its heartbeat needs
//!   (Z8).

use super::{Bug, Claim, Queue, Worker};
use crate::error::{panic_message, Result};
use crate::params::{RENEW_EVERY, SHORT_TTL, TTL};
use crate::poll;
use crate::resource::{PartWrite, ResourceStore, ResourceView};
use crate::vocabulary::FenceMode;
use parking_lot::Mutex;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

/// The one job of every staged run.
pub const JOB: i64 = 1;

/// The resource scope of the job's side effect: each job is its own scope.
pub fn scope(job: i64) -> String {
    format!("job-{job}")
}

/// The part the job's side effect writes.
const PART: &str = "effect";

/// What a staged run left, read from `lease26` and `res26` at its end.
#[derive(Clone, Debug, Default)]
pub struct Harm {
    /// Workers (incarnations) whose handler ran: each tried the side effect.
    pub executions: usize,
    /// The side effects the resource accepted: `incarnation token=N`, in order.
    pub accepted_effects: Vec<String>,
    /// The side effect that stayed: the content of the job's part.
    pub kept: String,
    /// Heartbeats accepted from an incarnation that no longer held the
    /// job's latest claim.
    pub stale_heartbeats: i64,
    /// Completions accepted from such an incarnation.
    pub stale_completions: i64,
    /// Completions accepted, from anyone.
    pub completions: i64,
    /// Claims taken back (rescued or released) while their lease still ran.
    pub live_taken_back: i64,
    /// The job's state at the end.
    pub state: String,
}

impl Harm {
    /// Reads the harm of job [`JOB`].
    pub fn read(queue: &mut Queue, view: &mut ResourceView) -> Result<Harm> {
        let attempts = view.attempts_on(&scope(JOB))?;
        let mut writers: Vec<&str> = attempts.iter().map(|a| a.writer.as_str()).collect();
        writers.sort();
        writers.dedup();
        let accepted_effects = attempts.iter().filter(|a| a.accepted).map(|a| format!("{} token={}", a.writer, a.token)).collect();
        let kept = view.part(&scope(JOB), PART)?.map_or_else(|| "nothing".to_owned(), |p| p.content);
        // A stale operation: accepted, asked by an incarnation other than
        // the one that made the job's latest claim.
        let counts = queue.client().query_one(
            "SELECT count(*) FILTER (WHERE kind = 'heartbeat' AND accepted AND incarnation <> holder),
                    count(*) FILTER (WHERE kind = 'complete' AND accepted AND incarnation <> holder),
                    count(*) FILTER (WHERE kind = 'complete' AND accepted),
                    count(*) FILTER (WHERE kind IN ('rescue', 'release') AND live)
               FROM job_event WHERE job = $1",
            &[&JOB],
        )?;
        let state = queue.client().query_one("SELECT state FROM job WHERE id = $1", &[&JOB])?.get(0);
        Ok(Harm {
            executions: writers.len(),
            accepted_effects,
            kept,
            stale_heartbeats: counts.get(0),
            stale_completions: counts.get(1),
            completions: counts.get(2),
            live_taken_back: counts.get(3),
            state,
        })
    }

    /// The accepted side effects as one line: `worker-2#1 token=2, …`.
    pub fn effects(&self) -> String {
        if self.accepted_effects.is_empty() {
            "none".into()
        } else {
            self.accepted_effects.join(", ")
        }
    }
}

/// A worker's side effect: the job's part in the resource, fenced by the
/// claim's token in the job's own scope.
pub fn effect(store: &mut ResourceStore, claim: &Claim) -> Result<bool> {
    let content = format!("done by {}", claim.incarnation);
    store.write(&PartWrite { scope: &scope(claim.job), part: PART, content: &content, writer: &claim.incarnation, token: claim.token })
}

/// A fresh queue and resource, one available job, and the sessions of a
/// staged run: the rescuer's queue (which also reads the harm) and an
/// observer of the resource.
pub struct Stage {
    /// The bug the run puts back, if any.
    pub bug: Option<Bug>,
    /// The lease of a claim.
    pub ttl: Duration,
    /// The rescuer's (and pruner's) session.
    pub rescuer: Queue,
    /// The resource as the lab observes it.
    pub view: ResourceView,
}

impl Stage {
    /// Enqueues [`JOB`] into the queue `lab.reset()` just reset.
    pub fn new(bug: Option<Bug>, ttl: Duration) -> Result<Stage> {
        let mut rescuer = Queue::connect("rescuer", bug, ttl)?;
        rescuer.reset(1)?;
        // The job's scope exists before its first side effect (as
        // res26.sql seeds daily-report): the fence needs a floor row to lock
        // and compare against, at 0, below every claim's token.
        crate::db::connect(crate::db::RES_DB, "lab enqueue")?.execute("INSERT INTO fence_floor (scope, max_token) VALUES ($1, 0)", &[&scope(JOB)])?;
        Ok(Stage { bug, ttl, rescuer, view: ResourceView::connect()? })
    }

    /// A worker's session on the queue.
    pub fn queue(&self, who: &str) -> Result<Queue> {
        Queue::connect(who, self.bug, self.ttl)
    }

    /// The rescuer as the fixed queue runs it (no gap, the database's clock).
    pub fn rescue(&mut self) -> Result<Vec<i64>> {
        let ttl = self.ttl;
        self.rescuer.rescue(|| Ok(()), SystemTime::now(), ttl)
    }

    /// The harm so far.
    pub fn harm(&mut self) -> Result<Harm> {
        Harm::read(&mut self.rescuer, &mut self.view)
    }
}

/// What the workers of [`stale_claim`] were told.
#[derive(Clone, Debug)]
pub struct StaleSteps {
    /// B's claim.
    pub b: Claim,
    /// A's heartbeat on resuming (None: A does not heartbeat first).
    pub a_heartbeat: Option<bool>,
    /// A's side effect and completion (None: A stopped before them).
    pub a_effect: Option<bool>,
    /// A's completion.
    pub a_complete: Option<bool>,
    /// B's side effect and completion.
    pub b_effect: bool,
    /// B's completion, after A's.
    pub b_complete: bool,
}

/// Worker A claims the job and stops before its work (SHORT_TTL lease);
/// the lease runs out by the database's clock; the rescuer takes the job
/// back; B claims it (B is A's own name restarted when `restarted`) and
/// writes its side effect; A resumes: heartbeats first when
/// `heartbeat_first` (and stops if refused), writes, completes; B completes.
pub fn stale_claim(bug: Option<Bug>, restarted: bool, heartbeat_first: bool) -> Result<(StaleSteps, Harm)> {
    let mut stage = Stage::new(bug, SHORT_TTL)?;
    let a_worker = Worker::new("worker-1", 1);
    let b_worker = if restarted { Worker::new("worker-1", 2) } else { Worker::new("worker-2", 1) };
    let (mut qa, mut qb) = (stage.queue(&a_worker.incarnation)?, stage.queue(&b_worker.incarnation)?);
    let (mut ra, mut rb) = (ResourceStore::connect(FenceMode::FencedScope, &a_worker.incarnation)?, ResourceStore::connect(FenceMode::FencedScope, &b_worker.incarnation)?);
    let a = qa.claim(&a_worker)?.ok_or("worker A claimed nothing from a queue of one available job")?;
    stage.rescuer.wait_until_expired(a.job)?;
    let rescued = stage.rescue()?;
    if rescued != [a.job] {
        return Err(format!("the rescuer took back {rescued:?} after A's lease ran out, not [{}]", a.job).into());
    }
    let b = qb.claim(&b_worker)?.ok_or("worker B claimed nothing after the rescue")?;
    let b_effect = effect(&mut rb, &b)?;
    let a_heartbeat = if heartbeat_first { Some(qa.heartbeat(&a)?) } else { None };
    let (a_effect, a_complete) = if a_heartbeat == Some(false) { (None, None) } else { (Some(effect(&mut ra, &a)?), Some(qa.complete(&a)?)) };
    let b_complete = qb.complete(&b)?;
    let steps = StaleSteps { b, a_heartbeat, a_effect, a_complete, b_effect, b_complete };
    Ok((steps, stage.harm()?))
}

/// What [`rescue_race`] saw.
#[derive(Clone, Debug)]
pub struct RaceSteps {
    /// A's completion, made while the rescuer was at work.
    pub a_complete: bool,
    /// The jobs the rescuer took back.
    pub rescued: Vec<i64>,
    /// B's claim after the rescue, if the job was there to claim.
    pub b: Option<Claim>,
}

/// Worker A claims the job, writes its side effect, and is slow to
/// complete: its lease runs out, nobody has taken over. The rescuer starts;
/// A completes where the rescuer can be interrupted (with the bug
/// rescue-overwrites, between its SELECT and its UPDATE by id; fixed, before
/// its one statement, which has no such point); then B claims what the
/// rescuer left and runs it.
pub fn rescue_race(bug: Option<Bug>) -> Result<(RaceSteps, Harm)> {
    let mut stage = Stage::new(bug, SHORT_TTL)?;
    let (a_worker, b_worker) = (Worker::new("worker-1", 1), Worker::new("worker-2", 1));
    let (mut qa, mut qb) = (stage.queue(&a_worker.incarnation)?, stage.queue(&b_worker.incarnation)?);
    let (mut ra, mut rb) = (ResourceStore::connect(FenceMode::FencedScope, &a_worker.incarnation)?, ResourceStore::connect(FenceMode::FencedScope, &b_worker.incarnation)?);
    let a = qa.claim(&a_worker)?.ok_or("worker A claimed nothing from a queue of one available job")?;
    if !effect(&mut ra, &a)? {
        return Err("A's side effect was refused before anyone else claimed the job".into());
    }
    stage.rescuer.wait_until_expired(a.job)?;
    let mut a_complete = None;
    let ttl = stage.ttl;
    let rescued = stage.rescuer.rescue(
        || {
            a_complete = Some(qa.complete(&a)?);
            Ok(())
        },
        SystemTime::now(),
        ttl,
    )?;
    let a_complete = a_complete.ok_or("the rescuer never reached the point where A completes")?;
    let b = qb.claim(&b_worker)?;
    if let Some(b) = &b {
        effect(&mut rb, b)?;
        qb.complete(b)?;
    }
    Ok((RaceSteps { a_complete, rescued, b }, stage.harm()?))
}

/// The heartbeat thread of a claim: one heartbeat every `every`, on the
/// queue session it is given, until it is stopped or a heartbeat is
/// refused (the claim is lost: the worker must stop).
pub struct Heartbeat {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Result<HeartbeatState>>,
}

/// What a heartbeat thread did.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeartbeatState {
    /// Heartbeats accepted.
    pub beats: u32,
    /// A heartbeat was refused: the claim is lost.
    pub lost: bool,
}

impl Heartbeat {
    /// Starts heartbeating `claim` on `queue` (shared: it may be the
    /// session the worker's own work uses).
    pub fn start(queue: Arc<Mutex<Queue>>, claim: Claim, every: Duration) -> Heartbeat {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let mut state = HeartbeatState::default();
            loop {
                // The period (a quarter of the ttl), or the stop signal.
                match stopped.recv_timeout(every) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return Ok(state),
                }
                // Waits here while the work holds the session (the bug
                // starved-heartbeat's one connection).
                if queue.lock().heartbeat(&claim)? {
                    state.beats += 1;
                } else {
                    state.lost = true;
                    return Ok(state);
                }
            }
        });
        Heartbeat { stop, thread }
    }

    /// Waits until a heartbeat is refused and the thread ends (the worker
    /// learns its claim is gone at its next heartbeat, within one period),
    /// then stops it as [`Heartbeat::stop`] does. A thread still beating
    /// after poll::BOUND is an error.
    pub fn until_lost(self) -> Result<HeartbeatState> {
        let ended = poll::designed(|| poll::poll_until(poll::BOUND, poll::EVERY, || Ok::<_, crate::Error>(self.thread.is_finished())))?;
        if !ended {
            return Err(format!("the heartbeat thread was still beating {:?} after its claim was taken", poll::BOUND).into());
        }
        self.stop()
    }

    /// Stops the thread; a panic or an error in it is an error here.
    pub fn stop(self) -> Result<HeartbeatState> {
        let _ = self.stop.send(());
        match self.thread.join() {
            Ok(state) => state,
            Err(panic) => Err(format!("the heartbeat thread panicked: {}", panic_message(&*panic)).into()),
        }
    }
}

/// What [`healthy`] and [`starved`] saw.
#[derive(Clone, Debug)]
pub struct HealthySteps {
    /// Whether A's lease still ran (by the database's clock) when the
    /// rescuer or pruner came, a full ttl after A's claim.
    pub a_alive: bool,
    /// The jobs taken back.
    pub taken_back: Vec<i64>,
    /// B's claim afterwards, if the job was there to claim.
    pub b: Option<Claim>,
    /// A's heartbeat thread at the end.
    pub a_heartbeat: HeartbeatState,
    /// A's side effect once its work ended.
    pub a_effect: bool,
}

/// How the healthy job is taken: by the rescuer (elapsed time or the
/// application's clock, per the bug) or by the pruner of dead workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taker {
    /// `Queue::rescue`, its app clock `skew` ahead of the machine's.
    Rescuer { skew: Duration },
    /// `Queue::prune` of workers silent for a ttl.
    Pruner,
}

/// Waits until a full ttl has passed since `job`'s claim by the database's
/// clock, then says whether the claim's lease still runs.
fn past_first_lease(queue: &mut Queue, job: i64, ttl: Duration) -> Result<bool> {
    let ms = ttl.as_secs_f64() * 1000.0;
    let client = queue.client();
    // By design: the experiment waits for a ttl to pass on the server.
    let passed = poll::designed(|| {
        poll::poll_until(poll::BOUND, poll::EVERY, || {
            let row = client.query_one("SELECT started_at + make_interval(secs => $2::float8 / 1000) < now() FROM job WHERE id = $1", &[&job, &ms])?;
            Ok::<_, crate::Error>(row.get::<_, bool>(0))
        })
    })?;
    if !passed {
        return Err(format!("a ttl since job {job}'s claim did not pass by the database clock within {:?}", poll::BOUND).into());
    }
    Ok(client.query_one("SELECT locked_until >= now() FROM job WHERE id = $1", &[&job])?.get(0))
}

/// Worker A claims the job (TTL lease), registers in the registry of live
/// workers once, and heartbeats its claim every RENEW_EVERY on a session
/// of its own while it works. A full ttl after the claim, `taker` comes;
/// B then claims whatever is available and writes; A's work ends with its
/// side effect and completion.
pub fn healthy(bug: Option<Bug>, taker: Taker) -> Result<(HealthySteps, Harm)> {
    let mut stage = Stage::new(bug, TTL)?;
    let (a_worker, b_worker) = (Worker::new("worker-1", 1), Worker::new("worker-2", 1));
    let (mut qa, mut qb) = (stage.queue(&a_worker.incarnation)?, stage.queue(&b_worker.incarnation)?);
    let (mut ra, mut rb) = (ResourceStore::connect(FenceMode::FencedScope, &a_worker.incarnation)?, ResourceStore::connect(FenceMode::FencedScope, &b_worker.incarnation)?);
    qa.beat(&a_worker)?;
    let a = qa.claim(&a_worker)?.ok_or("worker A claimed nothing from a queue of one available job")?;
    let heartbeat = Heartbeat::start(Arc::new(Mutex::new(stage.queue(&format!("{} heartbeat", a_worker.incarnation))?)), a.clone(), RENEW_EVERY);
    let ttl = stage.ttl;
    let seen = (|| {
        let a_alive = past_first_lease(&mut stage.rescuer, a.job, ttl)?;
        let taken_back = match taker {
            Taker::Rescuer { skew } => stage.rescuer.rescue(|| Ok(()), SystemTime::now() + skew, ttl)?,
            Taker::Pruner => stage.rescuer.prune(ttl)?,
        };
        let b = qb.claim(&b_worker)?;
        if let Some(b) = &b {
            effect(&mut rb, b)?;
        }
        Ok::<_, crate::Error>((a_alive, taken_back, b))
    })();
    // Stopped on every way out, the case's own error included. When B
    // took the job, A's next heartbeat is refused: A learns it there, and
    // only then goes on (the order every run shows).
    let a_heartbeat = match &seen {
        Ok((_, _, Some(_))) => heartbeat.until_lost()?,
        _ => heartbeat.stop()?,
    };
    let (a_alive, taken_back, b) = seen?;
    let a_effect = effect(&mut ra, &a)?;
    qa.complete(&a)?;
    if let Some(b) = &b {
        qb.complete(b)?;
    }
    Ok((HealthySteps { a_alive, taken_back, b, a_heartbeat, a_effect }, stage.harm()?))
}

/// The advisory lock key A's work waits on in [`starved`].
const WORK_LOCK: i64 = 2626;

/// Worker A claims the job (TTL lease) and works: its work runs a
/// statement that waits on a lock the case holds, on A's one connection.
/// With the bug starved-heartbeat, the heartbeat needs that same
/// connection; fixed, it has its own. A full ttl after the claim the
/// rescuer comes, B claims whatever is available and writes; then the
/// case lets A's work go on to its side effect.
pub fn starved(bug: Option<Bug>) -> Result<(HealthySteps, Harm)> {
    let mut stage = Stage::new(bug, TTL)?;
    let (a_worker, b_worker) = (Worker::new("worker-1", 1), Worker::new("worker-2", 1));
    let mut qb = stage.queue(&b_worker.incarnation)?;
    let (mut ra, mut rb) = (ResourceStore::connect(FenceMode::FencedScope, &a_worker.incarnation)?, ResourceStore::connect(FenceMode::FencedScope, &b_worker.incarnation)?);
    // The lock A's work will wait on, held by the case until it lets go.
    let mut blocker = stage.queue("work blocker")?;
    blocker.client().execute("SELECT pg_advisory_lock($1)", &[&WORK_LOCK])?;
    let a_session = format!("{} work", a_worker.incarnation);
    let work_queue = Arc::new(Mutex::new(stage.queue(&a_session)?));
    let a = work_queue.lock().claim(&a_worker)?.ok_or("worker A claimed nothing from a queue of one available job")?;
    let beat_queue = if bug == Some(Bug::StarvedHeartbeat) { work_queue.clone() } else { Arc::new(Mutex::new(stage.queue(&format!("{} heartbeat", a_worker.incarnation))?)) };
    let heartbeat = Heartbeat::start(beat_queue, a.clone(), RENEW_EVERY);
    // A's work: holds its connection while its statement waits on the lock.
    let work = {
        let work_queue = work_queue.clone();
        std::thread::spawn(move || -> Result<()> {
            let mut q = work_queue.lock();
            q.client().execute("SELECT pg_advisory_lock($1)", &[&WORK_LOCK])?;
            q.client().execute("SELECT pg_advisory_unlock($1)", &[&WORK_LOCK])?;
            Ok(())
        })
    };
    let ttl = stage.ttl;
    let seen = (|| {
        // A's work is inside its statement, waiting on the lock (the
        // server says so), before a ttl is let pass.
        let waiting = poll::poll_until(poll::BOUND, poll::EVERY, || {
            let row = stage.rescuer.client().query_opt("SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", &[&a_session])?;
            Ok::<_, crate::Error>(row.is_some())
        })?;
        if !waiting {
            return Err(format!("A's work did not wait on its lock within {:?}", poll::BOUND).into());
        }
        let a_alive = past_first_lease(&mut stage.rescuer, a.job, ttl)?;
        let taken_back = stage.rescue()?;
        let b = qb.claim(&b_worker)?;
        if let Some(b) = &b {
            effect(&mut rb, b)?;
        }
        Ok::<_, crate::Error>((a_alive, taken_back, b))
    })();
    // Let A's work go on, on every way out.
    blocker.client().execute("SELECT pg_advisory_unlock($1)", &[&WORK_LOCK])?;
    let worked = work.join().map_err(|p| format!("A's work thread panicked: {}", panic_message(&*p)))?;
    // As in `healthy`: when B took the job, A learns it at its next
    // heartbeat, which its work no longer holds up.
    let a_heartbeat = match &seen {
        Ok((_, _, Some(_))) => heartbeat.until_lost()?,
        _ => heartbeat.stop()?,
    };
    worked?;
    let (a_alive, taken_back, b) = seen?;
    let a_effect = effect(&mut ra, &a)?;
    work_queue.lock().complete(&a)?;
    if let Some(b) = &b {
        qb.complete(b)?;
    }
    Ok((HealthySteps { a_alive, taken_back, b, a_heartbeat, a_effect }, stage.harm()?))
}
