//! The queue's workers: a slot per worker name (`worker-1` …), each
//! running worker processes one after another, the way a deployment runs
//! them; each claims a job, heartbeats it from a thread of its own, works,
//! writes its side effect into the resource (fenced by the claim's token)
//! and completes, while the nemesis deals its claims faults.
//!
//! A worker "process" here is a pair of threads of the lab (the work and
//! the heartbeat) with sessions of their own, and a pause stops both: the
//! work waits where the fault landed, the heartbeat before its next beat,
//! as a stop-the-world pause stops a process. On resuming, the heartbeat
//! that fell due during the pause goes out at once, beside the work's next
//! step, as an overdue timer fires when a process is continued. A killed
//! worker closes its sessions and does nothing more, and its slot starts
//! a new one of the same name: what the database sees of a crash.

use super::nemesis::{QueueFault, Step, Strike};
use super::run::Shared;
use crate::chaos::schedule::SplitMix64;
use crate::error::{panic_message, Result};
use crate::params::RENEW_EVERY;
use crate::poll;
use crate::queue::zoo::effect;
use crate::queue::{Bug, Claim, Queue, Worker};
use crate::resource::ResourceStore;
use crate::vocabulary::FenceMode;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The work of a job when no fault lengthens it.
pub const WORK: (Duration, Duration) = (Duration::from_millis(50), Duration::from_millis(250));

/// How long a short pause lasts, as a share of the ttl.
pub const SHORT_PAUSE_SHARE: u32 = 3;

/// How long a long pause (or a replaced worker) waits at most for another
/// worker to claim its job, in ttls.
pub const OUTLAST_TTLS: u32 = 4;

/// The most jobs a replacement claims before the one it takes over.
const MAX_BACKLOG: usize = 16;

/// How long a long job or a busy connection runs, in ttls: past the
/// rescuer's elapsed limit and the pruner's silence limit (two ttls).
pub const LONG_TTLS: u32 = 3;

/// The name of slot `index`: `worker-1` …
pub fn worker_name(index: usize) -> String {
    format!("worker-{}", index + 1)
}

/// A pause of one worker process: its work and its heartbeat both wait
/// while it is on.
#[derive(Default)]
pub struct Freeze {
    on: Mutex<bool>,
    bell: Condvar,
}

impl Freeze {
    fn set(&self, on: bool) {
        *self.on.lock() = on;
        self.bell.notify_all();
    }

    /// Waits while the pause is on, or until the run ends.
    fn wait_thawed(&self, shared: &Shared) {
        let mut on = self.on.lock();
        while *on && !shared.stopping() {
            self.bell.wait_for(&mut on, Duration::from_millis(50));
        }
    }
}

/// A claim's heartbeat thread: a beat every RENEW_EVERY, on the session it
/// is given, until it is stopped or a beat is refused (the claim is lost).
struct Beat {
    stop: mpsc::Sender<()>,
    lost: Arc<AtomicBool>,
    thread: JoinHandle<Result<()>>,
}

impl Beat {
    fn start(queue: Arc<Mutex<Queue>>, claim: Claim, freeze: Arc<Freeze>, shared: Arc<Shared>) -> Beat {
        let (stop, stopped) = mpsc::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let flag = lost.clone();
        let thread = std::thread::spawn(move || {
            loop {
                match stopped.recv_timeout(RENEW_EVERY) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return Ok(()),
                }
                // Paused with its process; a beat that fell due meanwhile
                // goes out as soon as the pause ends.
                freeze.wait_thawed(&shared);
                if stopped.try_recv().is_ok() || shared.stopping() {
                    return Ok(());
                }
                // With the bug starved-heartbeat this session is the work's,
                // and the beat waits while the work holds it.
                if !queue.lock().heartbeat(&claim)? {
                    flag.store(true, Ordering::SeqCst);
                    return Ok(());
                }
            }
        });
        Beat { stop, lost, thread }
    }

    fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    fn stop(self) -> Result<()> {
        let _ = self.stop.send(());
        self.thread.join().map_err(|p| format!("a heartbeat thread panicked: {}", panic_message(&*p)))?
    }
}

/// What became of a worker process after one claim.
enum Next {
    /// It goes on to its next claim.
    On,
    /// It was killed: its slot starts the next one.
    Killed,
    /// A replacement took its slot: it ends once this job is over.
    Replaced,
}

/// Starts slot `index`'s thread, beginning with worker process
/// `incarnation`; a replacement starts with `take_over`, the job it takes
/// over from the process it replaces.
pub fn start_slot(shared: &Arc<Shared>, index: usize, incarnation: u32, take_over: Option<i64>) {
    let inner = shared.clone();
    let name = format!("{}#{incarnation}", worker_name(index));
    let label = name.clone();
    let thread = std::thread::Builder::new().name(name.clone()).spawn(move || {
        let name = label;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_slot(&inner, index, incarnation, take_over)));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => inner.broke(format!("{name}: {}", crate::error::chain(e.as_ref()))),
            Err(p) => inner.broke(format!("{name} panicked: {}", panic_message(&*p))),
        }
    });
    match thread {
        Ok(handle) => shared.threads.lock().push(handle),
        Err(e) => shared.broke(format!("cannot start {name}: {e}")),
    }
}

/// A slot's worker processes, one after another, until the run ends or a
/// replacement takes the slot.
fn run_slot(shared: &Arc<Shared>, index: usize, mut incarnation: u32, mut take_over: Option<i64>) -> Result<()> {
    while !shared.stopping() {
        let mut process = Process::start(shared, index, incarnation)?;
        let next = process.run(take_over.take())?;
        match next {
            Next::Killed => incarnation = shared.next_incarnation(index),
            Next::On | Next::Replaced => return Ok(()),
        }
    }
    Ok(())
}

/// One worker process: its sessions, its name, its stream of work times.
struct Process {
    shared: Arc<Shared>,
    index: usize,
    worker: Worker,
    /// The work's session (and, with the bug starved-heartbeat, the
    /// heartbeat's).
    work: Arc<Mutex<Queue>>,
    /// The heartbeat's session, opened with the process: a claim's lease
    /// never waits for a login (the work's own, with starved-heartbeat).
    beat: Arc<Mutex<Queue>>,
    resource: ResourceStore,
    /// The nemesis's own session, to watch the job while the worker is
    /// paused: never the worker's.
    watcher: crate::db::Session,
    rng: SplitMix64,
}

impl Process {
    fn start(shared: &Arc<Shared>, index: usize, incarnation: u32) -> Result<Process> {
        let worker = Worker::new(&worker_name(index), incarnation);
        let work = Arc::new(Mutex::new(Queue::connect(&worker.incarnation, shared.bug, shared.ttl)?));
        let beat = if shared.bug == Some(Bug::StarvedHeartbeat) {
            work.clone()
        } else {
            Arc::new(Mutex::new(Queue::connect(&format!("{} heartbeat", worker.incarnation), shared.bug, shared.ttl)?))
        };
        Ok(Process {
            shared: shared.clone(),
            index,
            work,
            beat,
            resource: ResourceStore::connect(FenceMode::FencedScope, &worker.incarnation)?,
            watcher: crate::db::connect(crate::db::LEASE_DB, "queue nemesis")?,
            rng: SplitMix64::stream(shared.seed, 1000 + 100 * index as u64 + incarnation as u64),
            worker,
        })
    }

    /// Claims and works jobs until the run ends, it is killed, or it is
    /// replaced; a replacement first takes over `take_over`.
    fn run(&mut self, take_over: Option<i64>) -> Result<Next> {
        let mut queued = match take_over {
            Some(job) => self.take_over(job)?,
            None => Vec::new(),
        };
        queued.reverse();
        while !self.shared.stopping() {
            let claim = match queued.pop() {
                Some(claim) => Some(claim),
                None => self.claim()?,
            };
            let Some(claim) = claim else {
                self.shared.sleep(Duration::from_millis(50));
                continue;
            };
            match self.hold(&claim)? {
                Next::On => {}
                other => return Ok(other),
            }
        }
        Ok(Next::On)
    }

    /// Beats the registry and claims the next job (waiting while a
    /// replacement takes a job over).
    fn claim(&mut self) -> Result<Option<Claim>> {
        let mut work = self.work.lock();
        work.beat(&self.worker)?;
        let _turn = self.shared.claim_gate.read();
        work.claim(&self.worker)
    }

    /// A replacement's first claims: once `job`'s lease ran out it holds
    /// every other claimer back until the rescuer has made the job
    /// available, and claims until it has it (the oldest available first:
    /// jobs rescued earlier, which busy workers had not claimed yet, come
    /// before it). Returns the job's claim first, then the others, which
    /// wait their turn with their leases running: the nemesis's doing, so
    /// counted as disturbed.
    fn take_over(&mut self, job: i64) -> Result<Vec<Claim>> {
        let (bound, shared) = (self.shared.ttl * OUTLAST_TTLS, self.shared.clone());
        let watcher = &mut self.watcher;
        let mut state_is = |test: &str| {
            // By design: the replacement waits for the database's state.
            poll::designed(|| {
                poll::poll_until(bound, poll::EVERY, || {
                    let row = watcher.query_one(&format!("SELECT {test} FROM job WHERE id = $1"), &[&job])?;
                    Ok::<_, crate::Error>(row.get::<_, bool>(0) || shared.stopping())
                })
            })
        };
        let expired = state_is("locked_until < now()")?;
        let _alone = shared.claim_gate.write();
        let available = expired && state_is("state = 'available'")? && !shared.stopping();
        let mut work = self.work.lock();
        work.beat(&self.worker)?;
        let mut claims: Vec<Claim> = Vec::new();
        if available {
            while let Some(claim) = work.claim(&self.worker)? {
                let got = claim.job == job;
                claims.push(claim);
                if got || claims.len() > MAX_BACKLOG {
                    break;
                }
            }
        }
        if claims.last().is_some_and(|c| c.job == job) {
            shared.nemesis.injected(QueueFault::Replace);
            claims.rotate_right(1);
            claims[1..].iter().for_each(|c| shared.disturbed(c));
        } else {
            shared.nemesis.missed(QueueFault::Replace);
            claims.iter().for_each(|c| shared.disturbed(c));
        }
        Ok(claims)
    }

    /// Holds one claim to its end, meeting the fault the nemesis deals it.
    fn hold(&mut self, claim: &Claim) -> Result<Next> {
        let strike = self.shared.nemesis.at_claim();
        let freeze = Arc::new(Freeze::default());
        let beat = Beat::start(self.beat.clone(), claim.clone(), freeze.clone(), self.shared.clone());
        let next = self.steps(claim, strike, &freeze, &beat);
        // Stopped on every way out; a pause never outlives its claim.
        freeze.set(false);
        beat.stop()?;
        next
    }

    fn steps(&mut self, claim: &Claim, strike: Option<Strike>, freeze: &Freeze, beat: &Beat) -> Result<Next> {
        let fault = strike.map(|s| s.fault);
        let mut next = Next::On;
        match fault {
            // The rescuer's fault, acted at its next sweep.
            Some(QueueFault::SkewedRescuer) => self.shared.skew_next.store(true, Ordering::SeqCst),
            Some(QueueFault::Replace) => {
                self.shared.disturbed(claim);
                start_slot(&self.shared, self.index, self.shared.next_incarnation(self.index), Some(claim.job));
                self.pause_until_taken(claim, freeze)?;
                next = Next::Replaced;
            }
            _ => {}
        }
        if self.at(Step::AfterClaim, claim, strike, freeze)? {
            return Ok(Next::Killed);
        }
        self.work(fault)?;
        if self.at(Step::BeforeEffect, claim, strike, freeze)? {
            return Ok(Next::Killed);
        }
        // A worker that learnt from its heartbeat that the claim is gone stops.
        if beat.lost() {
            return Ok(next);
        }
        effect(&mut self.resource, claim)?;
        if self.at(Step::BeforeComplete, claim, strike, freeze)? {
            return Ok(Next::Killed);
        }
        if fault == Some(QueueFault::LateCompletion) && self.complete_late(claim, freeze)? {
            return Ok(next);
        }
        if !beat.lost() {
            self.work.lock().complete(claim)?;
        }
        Ok(next)
    }

    /// The job's work: drawn, or lengthened by the fault.
    fn work(&mut self, fault: Option<QueueFault>) -> Result<()> {
        let long = self.shared.ttl * LONG_TTLS;
        match fault {
            Some(QueueFault::LongJob) => {
                self.shared.nemesis.injected(QueueFault::LongJob);
                self.shared.sleep(long);
            }
            Some(QueueFault::BusyConnection) => {
                self.shared.nemesis.injected(QueueFault::BusyConnection);
                // One long statement on the work's session.
                self.work.lock().client().execute("SELECT pg_sleep($1)", &[&long.as_secs_f64()])?;
            }
            _ => {
                let time = self.rng.duration(WORK.0, WORK.1);
                self.shared.sleep(time);
            }
        }
        Ok(())
    }

    /// A pause or a kill dealt for `step`, if this is it; `true` when the
    /// process was killed.
    fn at(&mut self, step: Step, claim: &Claim, strike: Option<Strike>, freeze: &Freeze) -> Result<bool> {
        let Some(strike) = strike.filter(|s| s.step == step && s.fault.at_a_step()) else {
            return Ok(false);
        };
        self.shared.disturbed(claim);
        self.shared.nemesis.injected(strike.fault);
        match strike.fault {
            QueueFault::PauseShort => {
                freeze.set(true);
                self.shared.sleep(self.shared.ttl / SHORT_PAUSE_SHARE);
                freeze.set(false);
                Ok(false)
            }
            QueueFault::PauseLong => {
                self.pause_until_taken(claim, freeze)?;
                Ok(false)
            }
            // Its sessions close when the process is dropped; it does
            // nothing more.
            QueueFault::Kill => Ok(true),
            _ => Ok(false),
        }
    }

    /// Pauses until another worker process has claimed `claim`'s job, or
    /// OUTLAST_TTLS have passed: the job's lease runs out meanwhile, the
    /// rescuer takes it back, another claims it (F4, on a queue).
    fn pause_until_taken(&mut self, claim: &Claim, freeze: &Freeze) -> Result<()> {
        freeze.set(true);
        let (watcher, shared, me) = (&mut self.watcher, &self.shared, &claim.incarnation);
        // By design: the pause lasts until the database shows a newer
        // claim. Nobody claiming in time ends it too: still a long pause.
        poll::designed(|| {
            poll::poll_until(shared.ttl * OUTLAST_TTLS, poll::EVERY, || {
                let row = watcher.query_one("SELECT state = 'running' AND incarnation <> $2 FROM job WHERE id = $1", &[&claim.job, me])?;
                Ok::<_, crate::Error>(row.get::<_, bool>(0) || shared.stopping())
            })
        })?;
        freeze.set(false);
        Ok(())
    }

    /// The nemesis's late completion: the heartbeat stops, the lease runs
    /// out, and the worker completes while the rescuer is at its gap.
    /// `false` when the meeting did not happen (another late completion was
    /// under way, or the rescuer did not come): the worker then goes on as
    /// usual.
    fn complete_late(&mut self, claim: &Claim, freeze: &Freeze) -> Result<bool> {
        use super::keeper::Gap;
        let gate = &self.shared.gate;
        if !gate.advance(Gap::Idle, Gap::Requested) {
            self.shared.nemesis.missed(QueueFault::LateCompletion);
            return Ok(false);
        }
        self.shared.disturbed(claim);
        // Only the heartbeat stops: the work goes on to its completion.
        freeze.set(true);
        let bound = self.shared.ttl * 3;
        let watcher = &mut self.watcher;
        // By design: the lease must run out by the database's clock.
        let shared = &self.shared;
        let expired = poll::designed(|| {
            poll::poll_until(bound, poll::EVERY, || Ok::<_, crate::Error>(watcher.query_one("SELECT locked_until < now() FROM job WHERE id = $1", &[&claim.job])?.get::<_, bool>(0) || shared.stopping()))
        })?;
        let met = expired && !shared.stopping() && gate.advance(Gap::Requested, Gap::Expired) && gate.wait_for(Gap::AtGap, bound, &|| shared.stopping());
        if !met {
            gate.reset();
            freeze.set(false);
            self.shared.nemesis.missed(QueueFault::LateCompletion);
            return Ok(false);
        }
        self.work.lock().complete(claim)?;
        gate.advance(Gap::AtGap, Gap::Completed);
        freeze.set(false);
        self.shared.nemesis.injected(QueueFault::LateCompletion);
        Ok(true)
    }
}
