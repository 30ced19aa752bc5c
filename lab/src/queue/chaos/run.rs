//! One switch's run: fresh tables and a queue of jobs, the workers, the
//! rescuer and the pruner for the run's duration under the nemesis, every
//! thread joined, and then — only then — the record read from the
//! database and judged.

use super::judge::{self, Effect, JobEvent, QueueCounts, QueueRecord};
use super::keeper::{self, Gate};
use super::nemesis::{FaultCount, Nemesis, QueueFault};
use super::worker;
use crate::error::{panic_message, Result};
use crate::params::TTL;
use crate::queue::{Bug, Claim, Queue};
use crate::{db, interrupt, poll};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a queue chaos run is asked to do.
#[derive(Clone, Debug)]
pub struct QueueConfig {
    /// The seed of the nemesis and of the work times.
    pub seed: u64,
    /// How many worker slots.
    pub workers: usize,
    /// How long each switch runs.
    pub duration: Duration,
}

/// What every thread of a run shares.
pub struct Shared {
    /// The bug the run puts back, if any.
    pub bug: Option<Bug>,
    /// A claim's lease.
    pub ttl: Duration,
    /// The run's seed.
    pub seed: u64,
    /// The nemesis.
    pub nemesis: Nemesis,
    /// Where a late completion meets the rescuer.
    pub gate: Gate,
    /// Claims take it shared; a replacement taking a job over takes it alone.
    pub claim_gate: RwLock<()>,
    /// The rescuer's next sweep reads a skewed clock.
    pub skew_next: AtomicBool,
    /// Set when the run ends.
    stop: AtomicBool,
    /// The claims the nemesis disturbed: (job, worker process).
    disturbed: Mutex<BTreeSet<(i64, String)>>,
    /// The first thing that broke (an error or a panic in a thread).
    broken: Mutex<Option<String>>,
    /// Every thread started, to join at the end.
    pub threads: Mutex<Vec<JoinHandle<()>>>,
    /// The last worker process number of each slot.
    incarnations: Vec<AtomicU32>,
}

impl Shared {
    /// Whether the run is ending.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || interrupt::requested()
    }

    /// Sleeps `d` (the run's own waits: work, sweeps), waking early when
    /// the run ends; `false` then.
    pub fn sleep(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        poll::designed(|| {
            while !self.stopping() {
                let left = end.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return true;
                }
                std::thread::sleep(left.min(Duration::from_millis(20)));
            }
            false
        })
    }

    /// Records the first breakdown; the run ends with it as its error.
    pub fn broke(&self, why: String) {
        self.broken.lock().get_or_insert(why);
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Records that the nemesis disturbed `claim`'s worker process.
    pub fn disturbed(&self, claim: &Claim) {
        self.disturbed.lock().insert((claim.job, claim.incarnation.clone()));
    }

    /// The next worker process number of slot `index`.
    pub fn next_incarnation(&self, index: usize) -> u32 {
        self.incarnations[index].fetch_add(1, Ordering::SeqCst) + 1
    }
}

/// One switch's run, judged.
#[derive(Clone, Debug)]
pub struct QueueRun {
    /// The bug, or `None` for the fixed queue.
    pub bug: Option<Bug>,
    /// The judge's counts.
    pub counts: QueueCounts,
    /// Each fault kind: injected, missed.
    pub faults: BTreeMap<QueueFault, FaultCount>,
    /// How long the run took, the record's reading included.
    pub took: Duration,
    /// Each claim taken back from a healthy worker process, told
    /// ([`judge::healthy_stories`]).
    pub healthy_stories: Vec<String>,
}

/// How many jobs a run of `workers` for `duration` enqueues: more than
/// its workers can take, each working its shortest work all along.
pub fn jobs(workers: usize, duration: Duration) -> i64 {
    let per_worker = duration.as_millis() / worker::WORK.0.as_millis();
    (workers as u128 * per_worker + 100) as i64
}

/// Runs the queue with `bug` (or fixed) under the nemesis and judges it.
pub fn run_switch(config: &QueueConfig, bug: Option<Bug>) -> Result<QueueRun> {
    let began = Instant::now();
    // Fresh tables: the lease schema (the queue's tables go with it), the
    // resource's; then the queue's jobs and each job's fence floor at 0.
    db::setup::reset_database(db::LEASE_DB, db::LEASE_SCHEMA)?;
    db::setup::reset_database(db::RES_DB, db::RES_SCHEMA)?;
    let jobs = jobs(config.workers, config.duration);
    Queue::connect("lab queue-chaos", bug, TTL)?.reset(jobs)?;
    db::connect(db::RES_DB, "lab queue-chaos")?.execute("INSERT INTO fence_floor (scope, max_token) SELECT 'job-' || g, 0 FROM generate_series(1, $1::bigint) g", &[&jobs])?;

    let shared = Arc::new(Shared {
        bug,
        ttl: TTL,
        seed: config.seed,
        nemesis: Nemesis::new(config.seed),
        gate: Gate::default(),
        claim_gate: RwLock::new(()),
        skew_next: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        disturbed: Mutex::new(BTreeSet::new()),
        broken: Mutex::new(None),
        threads: Mutex::new(Vec::new()),
        incarnations: (0..config.workers).map(|_| AtomicU32::new(1)).collect(),
    });
    for (name, keeper) in [("rescuer", keeper::rescuer as fn(Arc<Shared>) -> Result<()>), ("pruner", keeper::pruner)] {
        let inner = shared.clone();
        let handle = std::thread::Builder::new().name(name.into()).spawn(move || match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| keeper(inner.clone()))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => inner.broke(format!("the {name}: {}", crate::error::chain(e.as_ref()))),
            Err(p) => inner.broke(format!("the {name} panicked: {}", panic_message(&*p))),
        })?;
        shared.threads.lock().push(handle);
    }
    for index in 0..config.workers {
        worker::start_slot(&shared, index, 1, None);
    }
    shared.sleep(config.duration);
    shared.stop.store(true, Ordering::SeqCst);
    // Replacements start threads of their own: join until none is left.
    loop {
        let handles: Vec<JoinHandle<()>> = std::mem::take(&mut *shared.threads.lock());
        if handles.is_empty() {
            break;
        }
        for handle in handles {
            if let Err(p) = handle.join() {
                shared.broke(format!("a thread of the run panicked: {}", panic_message(&*p)));
            }
        }
    }
    if interrupt::requested() {
        return Err("interrupted".into());
    }
    if let Some(why) = shared.broken.lock().take() {
        return Err(format!("the queue's run broke down: {why}").into());
    }
    let record = QueueRecord { events: read_events()?, effects: read_effects()?, disturbed: shared.disturbed.lock().clone() };
    Ok(QueueRun { bug, counts: judge::judge(&record), faults: shared.nemesis.tally(), took: began.elapsed(), healthy_stories: judge::healthy_stories(&record) })
}

// ANCHOR: record_sql
/// Every operation the queue recorded, in order.
const EVENTS: &str = "
    SELECT id, job, kind, incarnation, token, accepted, holder, live,
           extract(epoch FROM at - min(at) OVER ())::float8
      FROM job_event ORDER BY id";
/// Every side effect the resource judged, in order (for the fenced scope,
/// the order of acceptance).
const EFFECTS: &str = "SELECT id, substr(scope, 5)::bigint, writer, token, accepted FROM write_attempt WHERE scope LIKE 'job-%' ORDER BY id";
// ANCHOR_END: record_sql

fn read_events() -> Result<Vec<JobEvent>> {
    let rows = db::connect(db::LEASE_DB, "lab queue-chaos judge")?.query(EVENTS, &[])?;
    Ok(rows
        .iter()
        .map(|r| JobEvent { id: r.get(0), job: r.get(1), kind: r.get(2), incarnation: r.get(3), token: r.get(4), accepted: r.get(5), holder: r.get(6), live: r.get(7), at: r.get(8) })
        .collect())
}

fn read_effects() -> Result<Vec<Effect>> {
    let rows = db::connect(db::RES_DB, "lab queue-chaos judge")?.query(EFFECTS, &[])?;
    Ok(rows.iter().map(|r| Effect { id: r.get(0), job: r.get(1), writer: r.get(2), token: r.get(3), accepted: r.get(4) }).collect())
}
