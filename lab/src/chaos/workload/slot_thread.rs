//! A slot's thread: the one owner of every holder process the slot starts,
//! from spawn to reap. It starts each incarnation, follows its protocol
//! lines (recording grants), carries out the nemesis's orders (pause,
//! kill), and at the run's end resumes, kills and reaps its holder.

use super::orders::{order_event, Order, SlotView};
use super::plan::SlotPlan;
use super::record::{FaultId, FaultLog, Tally};
use crate::chaos::checker::GrantRecord;
use crate::chaos::schedule::SplitMix64;
use crate::vocabulary::FaultKind;
use crate::error::Result;
use crate::holder::Step;
use crate::hosts::Host;
use crate::holder_guard::{HolderGuard, Output};
use crate::interrupt;
use std::cell::Cell;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use parking_lot::Mutex;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The pause before a slot starts a new incarnation after a failure: a
/// holder that fails at once (the server is restarting) is not started
/// again in a tight loop.
pub const RESTART_AFTER: Duration = Duration::from_millis(200);

/// How long an order to pause a holder at its next write waits for that
/// write; then the pause lands wherever the holder is. A holding holder
/// writes a part every [`WORK`](super::WORK) at most, so this is rarely
/// reached.
pub const AIM_BOUND: Duration = Duration::from_secs(1);

/// The share of a writer-aimed pause's `into_write` (0–3 ms, see
/// `schedule::plan::INTO_WRITE`) that lands before the write leaves: half
/// of the pauses aimed at the writer fall in F4's window, the article's own
/// failure, and half inside the write.
pub const BEFORE_WRITE: Duration = Duration::from_micros(1500);

/// How often a slot's thread looks at its orders and timers while its
/// holder is quiet: the precision of the pauses' lengths.
const TICK: Duration = Duration::from_millis(10);

/// How much longer than its length a long pause of a holding holder waits
/// for a newer holding's first accepted write (two ttls): the lease
/// expires one ttl into the pause, a bystander polls for it and then
/// works before its first part. Without the wait, on a busy machine the
/// paused holder woke before its successor had written, and its write
/// met no newer token: F15's negative control once saw no stale write
/// in a whole run. After the bound the holder wakes anyway: a pause never
/// hangs on a successor that does not come (every other slot stopped,
/// cut off, or the server restarting).
pub const OUTLAST_BOUND: Duration = Duration::from_millis(2 * crate::params::TTL.as_millis() as u64);

/// A slot's thread and everything it owns.
pub(super) struct SlotThread {
    /// Which slot, for its stream of the seed.
    pub(super) index: usize,
    /// The holder's name.
    pub(super) name: String,
    /// What to run.
    pub(super) plan: SlotPlan,
    /// Where the slot's holders reach the server: its link, on the
    /// server's host.
    pub(super) link: std::net::SocketAddr,
    /// The slot's own host, where its holders run.
    pub(super) host: Host,
    /// What the nemesis sees.
    pub(super) view: Arc<Mutex<SlotView>>,
    /// The nemesis's orders.
    pub(super) inbox: mpsc::Receiver<Order>,
    /// Set when the run ends.
    pub(super) stop: Arc<AtomicBool>,
    /// Where injected and missed faults go.
    pub(super) log: Arc<FaultLog>,
    /// Grants, counts, failures.
    pub(super) tally: Arc<Tally>,
    /// The run's start, for the fault log's times.
    pub(super) start: Instant,
    /// The token of the current holding, while its holder holds the lease.
    pub(super) token: Cell<Option<i64>>,
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
    Armed { kind: FaultKind, length: Duration, into_write: Duration, until: Instant, event: usize },
    /// Stopped; SIGCONT at `until`, which ends `fault` in the log. A long
    /// pause of a holder that holds the lease with token `outlast` waits
    /// after `until` (up to [`OUTLAST_BOUND`]) until a write with a larger
    /// token has been accepted: the article's F4, where B has written
    /// before A wakes, forced by the holders' own reports, not by the
    /// pause's length.
    Stopped { until: Instant, fault: FaultId, outlast: Option<i64> },
}

impl SlotThread {
    pub(super) fn run(self) {
        let mut rng = SplitMix64::stream(self.plan.seed, 100 + self.index as u64);
        let (mut incarnation, mut holding) = (0u32, 0u32);
        while !self.stopping() {
            let args = self.plan.holder_args(&self.name, incarnation, &mut rng, self.link);
            // Born inside the slot's host: a partition of that host cuts it
            // off. Its calls are logged as this incarnation of the slot.
            let spawned = HolderGuard::spawn_as(&self.plan.holder_bin, &args, &[], Some(incarnation), Some(&self.host));
            let mut holder = match spawned {
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
            self.token.set(None);
            match ended {
                Ok(Ended::Exited(status)) if matches!(status.code(), Some(0) | Some(crate::holder::EXIT_NOT_ACQUIRED)) => {}
                Ok(Ended::Exited(_)) => {
                    // Failed on its own: a new incarnation, after a breath.
                    self.tally.failed.fetch_add(1, Ordering::SeqCst);
                    self.tally.first_failure.lock().get_or_insert_with(|| holder.failure(&format!("{} failed", self.name)));
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
            self.log.missed(order_event(&order));
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
                    Pause::Stopped { fault, .. } => {
                        holder.resume()?;
                        self.log.ended(self.start, fault);
                    }
                    Pause::Armed { event, .. } => self.log.missed(event),
                    Pause::Off => {}
                }
                holder.kill()?;
                self.drain(holder, incarnation, holding)?;
                return Ok(Ended::Stopped);
            }
            match pause {
                Pause::Stopped { until, fault, outlast } if now >= until && self.outlasted(outlast, until, now) => {
                    holder.resume()?;
                    self.log.ended(self.start, fault);
                    pause = Pause::Off;
                    self.set(|v| v.live = true);
                }
                Pause::Armed { kind, length, until, event, .. } if now >= until => {
                    pause = self.freeze(holder, kind, length, event)?;
                }
                _ => {}
            }
            while let Ok(order) = self.inbox.try_recv() {
                match order {
                    Order::Kill { event } if holder.state().is_ok_and(|s| s == 'Z') => {
                        // It has just exited by itself: nothing left to kill.
                        self.log.missed(event);
                        self.set(|v| v.busy = false);
                    }
                    Order::Kill { event } => {
                        // SIGKILL ends a stopped process too; the kernel
                        // needs no SIGCONT for it.
                        match pause {
                            Pause::Armed { event, .. } => self.log.missed(event),
                            // The pause ends with the process.
                            Pause::Stopped { fault, .. } => self.log.ended(self.start, fault),
                            Pause::Off => {}
                        }
                        holder.kill()?;
                        self.log.injected(self.start, FaultKind::Kill, Some(&self.name), event);
                        self.set(|v| v.busy = false);
                        self.drain(holder, incarnation, holding)?;
                        return Ok(Ended::Killed);
                    }
                    Order::Pause { event, .. } if !matches!(pause, Pause::Off) => {
                        self.log.missed(event);
                        self.set(|v| v.busy = false);
                    }
                    Order::Pause { kind, length, at_write: true, into_write, event } => {
                        pause = Pause::Armed { kind, length, into_write, until: now + AIM_BOUND, event };
                    }
                    Order::Pause { kind, length, at_write: false, event, .. } => {
                        pause = self.freeze(holder, kind, length, event)?;
                    }
                }
            }
            match holder.read_within(TICK)? {
                Output::Step(step) => {
                    self.follow(&step, incarnation, holding);
                    if step == Step::Waiting {
                        // Its deadline check passed; it waits to write.
                        pause = self.release(holder, pause)?;
                    }
                }
                Output::Quiet => {}
                Output::Ended => {
                    let status = holder.wait_exit()?;
                    match pause {
                        Pause::Armed { event, .. } => self.log.missed(event),
                        Pause::Stopped { fault, .. } => self.log.ended(self.start, fault),
                        Pause::Off => {}
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
        let Pause::Armed { kind, length, into_write, event, .. } = pause else {
            go(holder)?;
            return Ok(pause);
        };
        if into_write < BEFORE_WRITE {
            let pause = self.freeze(holder, kind, length, event)?;
            go(holder)?;
            return Ok(pause);
        }
        go(holder)?;
        std::thread::sleep(into_write - BEFORE_WRITE);
        self.freeze(holder, kind, length, event)
    }

    /// SIGSTOP now, until `length` from now: the schedule's fault `event`.
    /// A holder that exited just before is not paused, and the fault
    /// found no target.
    fn freeze(&self, holder: &mut HolderGuard, kind: FaultKind, length: Duration, event: usize) -> Result<Pause> {
        let state = holder.stop()?;
        self.set(|v| v.busy = false);
        if state != 'T' {
            self.log.missed(event);
            return Ok(Pause::Off);
        }
        let fault = self.log.begun(self.start, kind, Some(&self.name), event);
        self.set(|v| v.live = false);
        // Only a long pause of a holding holder outlasts its successor: a
        // short one ends inside the lease, and a bystander has no token.
        let outlast = if kind == FaultKind::PauseLong { self.token.get() } else { None };
        Ok(Pause::Stopped { until: Instant::now() + length, fault, outlast })
    }

    /// Whether a pause whose length ran out at `until` may end now: it
    /// outlasts nobody, a write with a token larger than `outlast` has
    /// been accepted, or it has waited [`OUTLAST_BOUND`] for one.
    fn outlasted(&self, outlast: Option<i64>, until: Instant, now: Instant) -> bool {
        match outlast {
            None => true,
            Some(token) => self.tally.newest_accepted.load(Ordering::SeqCst) > token || now >= until + OUTLAST_BOUND,
        }
    }

    /// Takes note of one protocol line: a grant, a write (answered or
    /// failed), the end of a holding.
    fn follow(&self, step: &Step, incarnation: u32, holding: &mut u32) {
        if self.plan.trace {
            eprintln!("[{:8.3}s] {}#{incarnation} {step}", self.start.elapsed().as_secs_f64(), self.name);
        }
        match *step {
            Step::Acquired { token } => {
                *holding += 1;
                self.token.set(Some(token));
                self.tally.grants.lock().push(GrantRecord { holder: self.name.clone(), incarnation, holding: *holding, token });
                self.set(|v| (v.holding, v.written) = (true, false));
            }
            Step::Write { accepted, token } => {
                if accepted {
                    self.tally.newest_accepted.fetch_max(token, Ordering::SeqCst);
                }
                self.set(|v| v.written = true)
            }
            Step::WriteFailed { .. } => self.set(|v| v.written = true),
            Step::DeadlinePassed | Step::Released | Step::ReleaseRefused | Step::LeaseLost => {
                self.token.set(None);
                self.set(|v| (v.holding, v.written) = (false, false))
            }
            Step::NotAcquired | Step::DeadlineOk | Step::Waiting | Step::InFence | Step::RenewAfterWrite { .. } => {}
        }
    }

    /// Reads what a killed holder printed before it died: an `ACQUIRED`
    /// line among it is a grant like any other.
    fn drain(&self, holder: &mut HolderGuard, incarnation: u32, holding: &mut u32) -> Result<()> {
        let bound = Instant::now() + Duration::from_secs(5);
        while Instant::now() < bound {
            match holder.read_within(TICK)? {
                Output::Step(step) => self.follow(&step, incarnation, holding),
                Output::Quiet => {}
                Output::Ended => return Ok(()),
            }
        }
        Ok(())
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || interrupt::requested()
    }

    fn set(&self, change: impl FnOnce(&mut SlotView)) {
        change(&mut self.view.lock());
    }

    fn broken(&self, why: String) {
        self.tally.broken.lock().get_or_insert(why);
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
