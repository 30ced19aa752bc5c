//! The workload: K holder *slots*, each running holder processes one after
//! another, and the one owner of every process it starts.
//!
//! A slot is one instance of the report job, as a deployment would run it:
//! a named holder (`holder-a`, `holder-b`, …) that holds the lease once per
//! process — acquire (waiting its turn), write the report's parts with work
//! between them, each after its own deadline check, renew, release — and
//! is started again when that process ends. A holder the nemesis kills, or
//! one that fails (its server restarted under it), comes back as a new
//! *incarnation*: it remembers nothing of its earlier life, so its holdings
//! are counted afresh, as the checker's grants expect.
//!
//! Each slot reaches the database server through a link of its own, a
//! [`DelayProxy`] (its holders' `LAB_PORT` points at it): the network path
//! of one machine of the job, which the nemesis can slow down while the
//! others' stay fast. That is what lets a write go stale in flight (F12):
//! the slow holder's write is on the wire while its lease expires and a
//! holder on a fast link takes over and writes.
//!
//! One thread per slot owns its holder process from spawn to reap: it
//! reads the holder's protocol lines, records every `ACQUIRED token=N` as a
//! grant, and carries out the nemesis's orders (pause, kill), which reach
//! it through a channel. So only that thread ever signals or reaps the
//! holder, and a pid is never signalled after it was reaped. The nemesis
//! sees a slot only through its [`SlotView`], which the thread keeps up to
//! date. At the end the thread resumes its holder if it is stopped, kills
//! it and reaps it; on Ctrl-C the interrupt module kills every registered
//! holder, and a holder whose slot thread is gone gets SIGKILL from the
//! kernel (`PR_SET_PDEATHSIG`, set by the holder guard).

use super::checker::GrantRecord;
use super::schedule::{FaultKind, SplitMix64};
use crate::error::Result;
use crate::fault::DelayProxy;
use crate::holder::{HolderArgs, Step, WaitPoint};
use crate::holder_guard::{HolderGuard, Output};
use crate::interrupt;
use crate::params::{ms, PART_DETAIL, PART_SUMMARY, TTL};
use crate::resource::FenceMode;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The parts every holding writes, in this order: several parts of one
/// scope, so that a stale holder can meet a part the newer one has not
/// written yet (F7) as well as one it has (F5).
pub const PARTS: [&str; 4] = [PART_SUMMARY, PART_DETAIL, "totals", "notes"];

/// The work before each part after the first: long enough that pauses and
/// delays land inside holdings, short enough (against the 1500 ms ttl and
/// the 400 ms renewals) that an undisturbed holding finishes well in time.
pub const WORK: (Duration, Duration) = (Duration::from_millis(50), Duration::from_millis(350));

/// How often a holder waiting for the lease tries again; drawn per
/// process, so that the slots do not poll in step.
pub const ACQUIRE_EVERY: (Duration, Duration) = (Duration::from_millis(60), Duration::from_millis(180));

/// The pause before a slot starts a new incarnation after a failure: a
/// holder that fails at once (the server is restarting) is not started
/// again in a tight loop.
pub const RESTART_AFTER: Duration = Duration::from_millis(200);

/// How long an order to pause a holder at its next write waits for that
/// write; then the pause lands wherever the holder is. A holding holder
/// writes a part every [`WORK`] at most, so this is rarely reached.
pub const AIM_BOUND: Duration = Duration::from_secs(1);

/// The share of a writer-aimed pause's `into_write` (0–3 ms, see
/// `schedule::plan::INTO_WRITE`) that lands before the write leaves: half
/// of the pauses aimed at the writer fall in F4's window, the article's own
/// failure, and half inside the write.
pub const BEFORE_WRITE: Duration = Duration::from_micros(1500);

/// How often a slot's thread looks at its orders and timers while its
/// holder is quiet: the precision of the pauses' lengths.
const TICK: Duration = Duration::from_millis(10);

/// The idle-in-transaction timeout of the holders' resource sessions: the
/// ttl, F11's remedy, so that a holder paused inside its fenced write does
/// not block every writer of the scope for the whole pause.
pub const IDLE_TIMEOUT: Duration = TTL;

/// An order from the nemesis to one slot.
#[derive(Clone, Copy, Debug)]
pub enum Order {
    /// Stop the holder with SIGSTOP for `length`, then SIGCONT it; at its
    /// next write (when it says `WAITING`, its deadline check passed) when
    /// `at_write`, else now.
    Pause {
        /// `pause-short` or `pause-long`.
        kind: FaultKind,
        /// How long it stays stopped.
        length: Duration,
        /// Whether to wait for the holder's next write.
        at_write: bool,
        /// Where in its write to stop it (see `SlotThread::release`).
        into_write: Duration,
    },
    /// SIGKILL the holder; the slot starts a new incarnation.
    Kill,
}

/// What the nemesis sees of a slot; the slot's thread keeps it current.
#[derive(Clone, Copy, Debug, Default)]
pub struct SlotView {
    /// A holder process runs, and is not stopped.
    pub live: bool,
    /// That holder holds the lease: it said `ACQUIRED` and has not ended
    /// its holding yet.
    pub holding: bool,
    /// That holder has written in its current holding (a `WRITE` line):
    /// it is *the writer*, whose next write a fault can aim at. A holder
    /// that has not written yet is not: a pause at its first write would
    /// leave the scope without a newer token, and a stale write nothing to
    /// be stale against.
    pub written: bool,
    /// An order has been sent and not yet carried out: the slot takes no
    /// other meanwhile.
    pub busy: bool,
}

/// One fault as injected: what, when, where.
#[derive(Clone, Debug)]
pub struct Injected {
    /// Since the start of the run.
    pub at: Duration,
    /// What.
    pub kind: FaultKind,
    /// The slot's holder name, or `None` for a database restart.
    pub target: Option<String>,
}

/// The run's record of faults, shared by the nemesis and the slots: the
/// ones injected, and the ones that found no target.
#[derive(Default)]
pub struct FaultLog {
    /// Every fault injected, in the order of injection.
    injected: Mutex<Vec<Injected>>,
    /// Faults that found no target when they came (every slot stopped,
    /// busy or restarting), by kind.
    missed: Mutex<std::collections::BTreeMap<&'static str, usize>>,
    /// Whether to print each fault as it is injected.
    trace: bool,
}

impl FaultLog {
    /// A log that also prints every fault on stderr when `trace`.
    pub fn new(trace: bool) -> FaultLog {
        FaultLog { trace, ..FaultLog::default() }
    }

    /// Records a fault injected now.
    pub fn injected(&self, start: Instant, kind: FaultKind, target: Option<&str>) {
        if self.trace {
            eprintln!("[{:8.3}s] {} {kind}", start.elapsed().as_secs_f64(), target.unwrap_or("server"));
        }
        lock(&self.injected).push(Injected { at: start.elapsed(), kind, target: target.map(str::to_owned) });
    }

    /// Records a fault that found no target.
    pub fn missed(&self, kind: FaultKind) {
        *lock(&self.missed).entry(kind.name()).or_insert(0) += 1;
    }

    /// Every fault injected so far.
    pub fn all_injected(&self) -> Vec<Injected> {
        lock(&self.injected).clone()
    }

    /// How many faults found no target, by kind.
    pub fn all_missed(&self) -> std::collections::BTreeMap<&'static str, usize> {
        lock(&self.missed).clone()
    }
}

/// Locks a mutex whatever a panicking thread left in it: these records
/// stay readable, and the run reports the panic itself.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What every slot adds to as it goes; the run reads it for its progress
/// lines and, at the end, for the grants.
#[derive(Default)]
pub struct Tally {
    /// Every successful acquire, as the holders reported it.
    pub grants: Mutex<Vec<GrantRecord>>,
    /// Holder processes started.
    pub started: AtomicUsize,
    /// Holder processes that failed on their own (not killed by the
    /// nemesis): most when the server restarts under them.
    pub failed: AtomicUsize,
    /// The first failure's report (argv, exit status, stderr), to show.
    pub first_failure: Mutex<Option<String>>,
    /// A slot's thread that could not go on (it could not start a holder
    /// or signal it): the run ends with this error.
    pub broken: Mutex<Option<String>>,
}

/// What a slot runs, and against what.
#[derive(Clone, Debug)]
pub struct SlotPlan {
    /// The `holder` binary.
    pub holder_bin: PathBuf,
    /// The resource mode every holder writes in.
    pub mode: FenceMode,
    /// The run's seed: each slot draws its work times from a stream of it.
    pub seed: u64,
    /// The database server the slot's link leads to.
    pub server: SocketAddr,
    /// Print every protocol line and fault on stderr as it happens (`lab chaos --trace`).
    pub trace: bool,
}

/// One slot: its link, its view, its thread.
pub struct Slot {
    /// The holder's name, e.g. `holder-a`.
    pub name: String,
    /// Its link to the server.
    pub link: DelayProxy,
    /// What its thread shows the nemesis.
    view: Arc<Mutex<SlotView>>,
    /// Where the nemesis's orders go.
    orders: mpsc::Sender<Order>,
    /// The thread; `None` once joined.
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The holder names of the slots: `holder-a` … `holder-z`.
pub fn holder_name(index: usize) -> String {
    format!("holder-{}", (b'a' + index as u8) as char)
}

/// The most slots: one letter each.
pub const MAX_HOLDERS: usize = 26;

impl Slot {
    /// Starts slot `index`: its link, and its thread, which starts its
    /// first holder at once.
    fn start(index: usize, plan: &SlotPlan, stop: &Arc<AtomicBool>, log: &Arc<FaultLog>, tally: &Arc<Tally>, start: Instant) -> Result<Slot> {
        let name = holder_name(index);
        let link = DelayProxy::start(plan.server)?;
        let view = Arc::new(Mutex::new(SlotView::default()));
        let (orders, inbox) = mpsc::channel();
        let worker = SlotThread {
            index,
            name: name.clone(),
            plan: plan.clone(),
            port: link.port().to_string(),
            view: Arc::clone(&view),
            inbox,
            stop: Arc::clone(stop),
            log: Arc::clone(log),
            tally: Arc::clone(tally),
            start,
        };
        let thread = std::thread::Builder::new().name(format!("slot {name}")).spawn(move || worker.run())?;
        Ok(Slot { name, link, view, orders, thread: Mutex::new(Some(thread)) })
    }

    /// What the slot's thread shows right now.
    pub fn view(&self) -> SlotView {
        *lock(&self.view)
    }

    /// Sends an order; the slot takes no other until it has carried it out.
    pub fn order(&self, order: Order) {
        lock(&self.view).busy = true;
        // A send fails only once the thread has ended (the run is ending):
        // the order then simply does not happen.
        if self.orders.send(order).is_err() {
            lock(&self.view).busy = false;
        }
    }

    /// Waits for the slot's thread, which ends once the run's stop flag is
    /// set: its holder resumed, killed and reaped.
    fn join(&self) {
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// The slots of one run, and the flag that ends them: dropping it, on any
/// path, sets the flag and waits for every slot's thread, so no holder
/// outlives the run, and then closes the links.
pub struct Workload {
    /// The slots, `holder-a` first.
    slots: Vec<Slot>,
    /// Set when the run ends; every slot's thread reads it.
    stop: Arc<AtomicBool>,
}

impl Workload {
    /// Starts `holders` slots.
    pub fn start(holders: usize, plan: &SlotPlan, log: &Arc<FaultLog>, tally: &Arc<Tally>, start: Instant) -> Result<Workload> {
        let mut workload = Workload { slots: Vec::new(), stop: Arc::new(AtomicBool::new(false)) };
        for index in 0..holders {
            // On an error the slots started so far are ended by the drop.
            workload.slots.push(Slot::start(index, plan, &workload.stop, log, tally, start)?);
        }
        Ok(workload)
    }

    /// The slots.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Ends every slot (each resumes, kills and reaps its holder) and
    /// closes the links: held bytes are dropped with them, never delivered.
    pub fn finish(self) {
        drop(self);
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for slot in &self.slots {
            slot.join();
        }
    }
}

/// A slot's thread and everything it owns.
struct SlotThread {
    /// Which slot, for its stream of the seed.
    index: usize,
    /// The holder's name.
    name: String,
    /// What to run.
    plan: SlotPlan,
    /// The port of the slot's link, the holders' `LAB_PORT`.
    port: String,
    /// What the nemesis sees.
    view: Arc<Mutex<SlotView>>,
    /// The nemesis's orders.
    inbox: mpsc::Receiver<Order>,
    /// Set when the run ends.
    stop: Arc<AtomicBool>,
    /// Where injected and missed faults go.
    log: Arc<FaultLog>,
    /// Grants, counts, failures.
    tally: Arc<Tally>,
    /// The run's start, for the fault log's times.
    start: Instant,
}

/// How one holder process ended.
enum Ended {
    /// It exited by itself.
    Exited(ExitStatus),
    /// The nemesis killed it.
    Killed,
    /// The run ended: it was killed and reaped.
    Stopped,
}

/// A pause in progress or waiting for the holder's next write.
enum Pause {
    /// None.
    Off,
    /// Stop the holder at its next write (`into_write`), or at
    /// `until` at the latest.
    Armed { kind: FaultKind, length: Duration, into_write: Duration, until: Instant },
    /// Stopped; SIGCONT at `until`.
    Stopped { until: Instant },
}

impl SlotThread {
    fn run(self) {
        let mut rng = SplitMix64::stream(self.plan.seed, 100 + self.index as u64);
        let (mut incarnation, mut holding) = (0u32, 0u32);
        while !self.stopping() {
            let work: Vec<u64> = (1..PARTS.len()).map(|_| rng.duration(WORK.0, WORK.1).as_millis() as u64).collect();
            let args = HolderArgs {
                mode: self.plan.mode,
                parts: PARTS.iter().map(|p| p.to_string()).collect(),
                work_ms: work,
                acquire_every_ms: rng.duration(ACQUIRE_EVERY.0, ACQUIRE_EVERY.1).as_millis() as u64,
                idle_timeout_ms: ms(IDLE_TIMEOUT) as u64,
                // Each write waits for the slot's go-ahead (see `release`),
                // so that a pause can land before the write leaves.
                waits: vec![WaitPoint::BeforeWrite],
                ..HolderArgs::new(&self.name, &format!("{}#{incarnation}", self.name))
            };
            let mut holder = match HolderGuard::spawn_with_env(&self.plan.holder_bin, &args, &[("LAB_PORT", &self.port)]) {
                Ok(holder) => holder,
                Err(e) => {
                    if !self.stopping() {
                        self.broken(format!("{}: cannot start a holder: {e}", self.name));
                    }
                    break;
                }
            };
            self.tally.started.fetch_add(1, Ordering::SeqCst);
            self.set(|v| v.live = true);
            let ended = self.drive(&mut holder, incarnation, &mut holding);
            self.set(|v| (v.live, v.holding, v.written) = (false, false, false));
            match ended {
                Ok(Ended::Exited(status)) if matches!(status.code(), Some(0) | Some(crate::holder::EXIT_NOT_ACQUIRED)) => {}
                Ok(Ended::Exited(_)) => {
                    // Failed on its own: a new incarnation, after a breath.
                    self.tally.failed.fetch_add(1, Ordering::SeqCst);
                    lock(&self.tally.first_failure).get_or_insert_with(|| holder.failure(&format!("{} failed", self.name)));
                    (incarnation, holding) = (incarnation + 1, 0);
                    std::thread::sleep(RESTART_AFTER);
                }
                Ok(Ended::Killed) => (incarnation, holding) = (incarnation + 1, 0),
                Ok(Ended::Stopped) => break,
                Err(e) => {
                    self.broken(holder.failure(&format!("{}: {e}", self.name)));
                    break;
                }
            }
        }
        // Orders still queued will never be carried out.
        while let Ok(order) = self.inbox.try_recv() {
            self.log.missed(order_kind(&order));
        }
        self.set(|v| v.busy = false);
    }

    /// Follows one holder process to its end, carrying out orders.
    fn drive(&self, holder: &mut HolderGuard, incarnation: u32, holding: &mut u32) -> Result<Ended> {
        let mut pause = Pause::Off;
        loop {
            let now = Instant::now();
            if self.stopping() {
                // The run's end heals before it ends: SIGCONT, then SIGKILL.
                match pause {
                    Pause::Stopped { .. } => holder.resume()?,
                    Pause::Armed { kind, .. } => self.log.missed(kind),
                    Pause::Off => {}
                }
                holder.kill()?;
                self.drain(holder, incarnation, holding);
                return Ok(Ended::Stopped);
            }
            match pause {
                Pause::Stopped { until } if now >= until => {
                    holder.resume()?;
                    pause = Pause::Off;
                    self.set(|v| v.live = true);
                }
                Pause::Armed { kind, length, until, .. } if now >= until => {
                    pause = self.freeze(holder, kind, length)?;
                }
                _ => {}
            }
            while let Ok(order) = self.inbox.try_recv() {
                match order {
                    Order::Kill if holder.state().is_ok_and(|s| s == 'Z') => {
                        // It has just exited by itself: nothing left to kill.
                        self.log.missed(FaultKind::Kill);
                        self.set(|v| v.busy = false);
                    }
                    Order::Kill => {
                        // SIGKILL ends a stopped process too; the kernel
                        // needs no SIGCONT for it.
                        if let Pause::Armed { kind, .. } = pause {
                            self.log.missed(kind);
                        }
                        holder.kill()?;
                        self.log.injected(self.start, FaultKind::Kill, Some(&self.name));
                        self.set(|v| v.busy = false);
                        self.drain(holder, incarnation, holding);
                        return Ok(Ended::Killed);
                    }
                    Order::Pause { kind, .. } if !matches!(pause, Pause::Off) => {
                        self.log.missed(kind);
                        self.set(|v| v.busy = false);
                    }
                    Order::Pause { kind, length, at_write: true, into_write } => {
                        pause = Pause::Armed { kind, length, into_write, until: now + AIM_BOUND };
                    }
                    Order::Pause { kind, length, at_write: false, .. } => {
                        pause = self.freeze(holder, kind, length)?;
                    }
                }
            }
            match holder.read_within(TICK) {
                Output::Line(line) => {
                    self.follow(&line, incarnation, holding);
                    if line == Step::Waiting.to_string() {
                        // Its deadline check passed; it waits to write.
                        pause = self.release(holder, pause)?;
                    }
                }
                Output::Quiet => {}
                Output::Ended => {
                    let status = holder.wait_exit()?;
                    if let Pause::Armed { kind, .. } = pause {
                        self.log.missed(kind);
                    }
                    self.set(|v| v.busy = false);
                    return Ok(Ended::Exited(status));
                }
            }
        }
    }

    /// Lets a holder that waits before its write go on, landing an armed
    /// pause in or just before that write. The write's first statement
    /// leaves as soon as the holder reads the line, sooner than any signal
    /// the slot could send after it: so a pause meant to land before the
    /// write (F4's window: the first [`BEFORE_WRITE`] of `into_write`) is
    /// sent first, and the line waits in the pipe until SIGCONT. A later
    /// pause lands the rest of `into_write` after the line, inside the
    /// write: between check-then-write's read and its writes (F6a's
    /// window), or inside the fenced transaction (F11's).
    fn release(&self, holder: &mut HolderGuard, pause: Pause) -> Result<Pause> {
        let Pause::Armed { kind, length, into_write, .. } = pause else {
            go(holder)?;
            return Ok(pause);
        };
        if into_write < BEFORE_WRITE {
            let pause = self.freeze(holder, kind, length)?;
            go(holder)?;
            return Ok(pause);
        }
        go(holder)?;
        std::thread::sleep(into_write - BEFORE_WRITE);
        self.freeze(holder, kind, length)
    }

    /// SIGSTOP now, until `length` from now; a holder that exited just
    /// before is not paused, and the fault counts as missed.
    fn freeze(&self, holder: &mut HolderGuard, kind: FaultKind, length: Duration) -> Result<Pause> {
        let state = holder.stop()?;
        self.set(|v| v.busy = false);
        if state != 'T' {
            self.log.missed(kind);
            return Ok(Pause::Off);
        }
        self.log.injected(self.start, kind, Some(&self.name));
        self.set(|v| v.live = false);
        Ok(Pause::Stopped { until: Instant::now() + length })
    }

    /// Takes note of one protocol line: a grant, the end of a holding.
    fn follow(&self, line: &str, incarnation: u32, holding: &mut u32) {
        if self.plan.trace {
            eprintln!("[{:8.3}s] {}#{incarnation} {line}", self.start.elapsed().as_secs_f64(), self.name);
        }
        if let Some(token) = line.strip_prefix("ACQUIRED token=").and_then(|t| t.parse().ok()) {
            *holding += 1;
            lock(&self.tally.grants).push(GrantRecord { holder: self.name.clone(), incarnation, holding: *holding, token });
            self.set(|v| (v.holding, v.written) = (true, false));
        } else if line.starts_with("WRITE ") {
            self.set(|v| v.written = true);
        } else if [Step::DeadlinePassed, Step::Released, Step::ReleaseRefused, Step::LeaseLost].iter().any(|s| s.to_string() == line) {
            self.set(|v| (v.holding, v.written) = (false, false));
        }
    }

    /// Reads what a killed holder printed before it died: an `ACQUIRED`
    /// line among it is a grant like any other.
    fn drain(&self, holder: &mut HolderGuard, incarnation: u32, holding: &mut u32) {
        let bound = Instant::now() + Duration::from_secs(5);
        while Instant::now() < bound {
            match holder.read_within(TICK) {
                Output::Line(line) => self.follow(&line, incarnation, holding),
                Output::Quiet => {}
                Output::Ended => return,
            }
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || interrupt::requested()
    }

    fn set(&self, change: impl FnOnce(&mut SlotView)) {
        change(&mut lock(&self.view));
    }

    fn broken(&self, why: String) {
        lock(&self.tally.broken).get_or_insert(why);
    }
}

/// The go-ahead for a holder's write. A holder that has just exited (its
/// stdin closed) cannot take it, and its end is read next; a live holder
/// that cannot be written to is an error.
fn go(holder: &mut HolderGuard) -> Result<()> {
    match holder.send_line("go") {
        Ok(()) => Ok(()),
        Err(_) if holder.state().map_or(true, |s| s == 'Z' || s == 'X') => Ok(()),
        Err(e) => Err(e),
    }
}

/// The fault an order would have injected.
fn order_kind(order: &Order) -> FaultKind {
    match order {
        Order::Pause { kind, .. } => *kind,
        Order::Kill => FaultKind::Kill,
    }
}
