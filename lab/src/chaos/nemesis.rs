//! The nemesis: one thread that walks the fault schedule and injects each
//! fault from outside, the way a real one happens.
//!
//! - a pause is a real SIGSTOP and, after its length, SIGCONT, sent by the
//!   target slot's own thread (the one owner of that holder; the nemesis
//!   only orders it, see `workload.rs` and `workload/`); a long pause of a
//!   holder that holds the lease also waits, after its length, for a
//!   newer holding's first accepted write (at most `OUTLAST_BOUND` more,
//!   in `workload/slot_thread.rs`), so that the holder wakes into F4's
//!   timeline however busy the machine;
//! - a kill is a real SIGKILL, sent the same way, after which the slot
//!   starts a new incarnation;
//! - a delay slows the target slot's link, the
//!   [`DelayProxy`](crate::fault::DelayProxy) its holders reach the server
//!   through, for the fault's span: every chunk they send waits there,
//!   their renewals as well as their writes;
//! - a database restart is `restart_immediate` of the cluster (F8's crash
//!   and WAL recovery), on a thread of the nemesis's own, joined before the
//!   next one and at the end;
//! - a partition is made in the switch of the run's network
//!   ([`crate::hosts`]): the target slot's host is cut off from every other
//!   host (`partition-isolate`), or a group of slots' hosts together from
//!   the server's host and the rest (`partition-split`), silently, for the
//!   fault's length; then the nemesis heals it. Each one is confirmed as
//!   it is made: a connection from the cut host to its link on the
//!   server's host must hear nothing; one that is answered is counted as
//!   a partition that did not cut, never as injected, so a run never
//!   claims a partition it did not make (F15 checks that count is 0). The
//!   switch holds one partition at a time: a partition that comes while
//!   one is in force is missed.
//!
//! Targets. The schedule says when and what; the target is picked when the
//! fault comes, by the event's `pick`, among the slots that can take it
//! then: for a pause or a kill, slots whose holder is live and has no order
//! pending; for a delay, slots whose link is not already slow. A fault
//! aimed at a bystander picks among those whose holder is waiting for the
//! lease (among all, when every one is holding). A fault aimed at the
//! writer picks the slot whose holder holds the lease and has written in
//! this holding, and a pause then lands just before or a few milliseconds
//! into that holder's next write; when there is none (the lease is between holders,
//! its holder has not written yet, or is already stopped), the fault waits
//! up to [`WAIT_FOR_WRITER`] for one, and hits a bystander after that (one
//! fault waits at a time; another one hits a bystander at once). A fault
//! that finds no slot at all is recorded as missed, never silently dropped.
//!
//! At the end — the run's duration over, an error, or Ctrl-C — the nemesis
//! heals what it owns: every link fast again, the partition healed, the
//! restart in progress finished. The slots heal their holders (SIGCONT, then SIGKILL and reap).

use super::schedule::{Aim, Event, Schedule};
use crate::vocabulary::FaultKind;
use super::workload::{FaultId, FaultLog, Order, Slot, SERVER_HOST};
use crate::cluster::Cluster;
use crate::error::{chain, panic_message, Result};
use crate::hosts::{Network, Reach};
use crate::interrupt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the nemesis waits for an answer when it confirms a partition:
/// a connection across the switch is answered within a millisecond; one
/// that waits this long hears nothing.
const CONFIRM_BOUND: Duration = Duration::from_millis(200);

/// How long the nemesis sleeps at most between two looks at its clock.
const TICK: Duration = Duration::from_millis(20);

/// How long a fault aimed at the writer waits for a slot that holds the
/// lease and has written, when none does: twice the ttl. A lease stays
/// between holders up to a ttl while a bystander polls for it, and the new
/// holder writes its first part only then; waiting one ttl sent most long
/// pauses meant for the writer to bystanders, where they break nothing.
pub const WAIT_FOR_WRITER: Duration = Duration::from_millis(2 * crate::params::TTL.as_millis() as u64);

/// Whom a fault is sent to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// The writer, or nobody yet.
    Writer,
    /// A bystander, or any eligible slot when there is none.
    Bystander,
}

/// The nemesis's state while it runs.
struct Nemesis<'a> {
    /// The slots it hits.
    slots: &'a [Slot],
    /// The cluster it restarts.
    cluster: &'a Cluster,
    /// The network whose switch it partitions.
    network: &'a Network,
    /// Until when the partition in force lasts, if one is, and it in the
    /// log (`None` for one that did not cut, counted apart).
    partitioned_until: Option<(Instant, Option<FaultId>)>,
    /// A partition the switch refused: ends the run.
    failed: Option<String>,
    /// Where it records what it injected and what it missed.
    log: &'a FaultLog,
    /// The run's start: the schedule's times count from it.
    start: Instant,
    /// Until when each slot's link is slow, and that delay in the log.
    slow_until: Vec<Option<(Instant, FaultId)>>,
    /// The database restart in progress, if one is, and it in the log.
    restart: Option<(JoinHandle<Result<()>>, FaultId)>,
    /// A fault aimed at the writer that is waiting for one (by its index in
    /// the schedule), with the moment it stops waiting.
    waiting: Option<(usize, Event, Instant)>,
}

/// Injects `schedule` into `slots` and `cluster` from `start` until `stop`
/// is set (or Ctrl-C), then heals the links and waits for a restart in
/// progress. An error is a database restart that failed.
pub fn run(schedule: &Schedule, slots: &[Slot], cluster: &Cluster, network: &Network, log: &FaultLog, stop: &AtomicBool, start: Instant) -> Result<()> {
    let mut nemesis =
        Nemesis { slots, cluster, network, partitioned_until: None, failed: None, log, start, slow_until: vec![None; slots.len()], restart: None, waiting: None };
    let outcome = nemesis.walk(&schedule.events, stop);
    let healed = nemesis.heal();
    outcome.and(healed)
}

impl Nemesis<'_> {
    fn walk(&mut self, events: &[Event], stop: &AtomicBool) -> Result<()> {
        let mut events = events.iter().enumerate().peekable();
        while !stop.load(Ordering::SeqCst) && !interrupt::requested() {
            let now = Instant::now();
            for (slot, until) in self.slots.iter().zip(self.slow_until.iter_mut()) {
                if let Some((_, fault)) = until.filter(|(u, _)| now >= *u) {
                    slot.link.set_delay(None);
                    self.log.ended(self.start, fault);
                    *until = None;
                }
            }
            if self.restart.as_ref().is_some_and(|(thread, _)| thread.is_finished()) {
                self.join_restart()?;
            }
            if self.partitioned_until.is_some_and(|(u, _)| now >= u) {
                self.heal_partition()?;
            }
            while let Some((index, event)) = events.next_if(|(_, e)| self.start + e.at <= now) {
                self.inject(index, event);
            }
            if let Some(why) = self.failed.take() {
                return Err(format!("the nemesis's partition failed: {why}").into());
            }
            self.retry_waiting();
            let next = events
                .peek()
                .map(|(_, e)| self.start + e.at)
                .into_iter()
                .chain(self.slow_until.iter().flatten().map(|(u, _)| *u))
                .chain(self.partitioned_until.map(|(u, _)| u))
                .min();
            let nap = next.map_or(TICK, |t| t.saturating_duration_since(Instant::now()).min(TICK));
            std::thread::sleep(nap);
        }
        // The run ended before the nemesis came to these (their time had
        // not come, or it was busy with the one before).
        for (index, _) in events {
            self.log.not_reached(index);
        }
        Ok(())
    }

    /// Injects the schedule's fault `index`.
    fn inject(&mut self, index: usize, event: &Event) {
        match (event.kind, event.aim) {
            (FaultKind::DbRestart, _) => self.restart_database(index),
            (_, Aim::Writer) => {
                if self.hit(index, event, Want::Writer) {
                    return;
                }
                // One fault at most waits for the next writer: a queue of
                // them would all fall on it at its first write, and on the
                // one after it, and no holder would write at all.
                if self.waiting.is_none() {
                    self.waiting = Some((index, event.clone(), Instant::now() + WAIT_FOR_WRITER));
                } else {
                    self.hit(index, event, Want::Bystander);
                }
            }
            (_, Aim::Bystander) => {
                self.hit(index, event, Want::Bystander);
            }
        }
    }

    /// The fault waiting for a writer hits one if there is one now, or a
    /// bystander once it has waited long enough.
    fn retry_waiting(&mut self) {
        let Some((index, event, until)) = self.waiting.take() else { return };
        if !self.hit(index, &event, Want::Writer) {
            if Instant::now() >= until {
                self.hit(index, &event, Want::Bystander);
            } else {
                self.waiting = Some((index, event, until));
            }
        }
    }

    /// Sends `event` to a slot of the kind `want` asks for; `false` when it
    /// wants the writer and there is none to take it now. A bystander
    /// fault that finds no slot at all is recorded as missed.
    fn hit(&mut self, index: usize, event: &Event, want: Want) -> bool {
        let views: Vec<_> = self.slots.iter().map(Slot::view).collect();
        let eligible: Vec<usize> = (0..self.slots.len())
            .filter(|&i| match event.kind {
                FaultKind::Delay => self.slow_until[i].is_none(),
                // Any slot's host, its holder live or restarting, while the
                // switch holds no other partition.
                FaultKind::PartitionIsolate | FaultKind::PartitionSplit => self.partitioned_until.is_none(),
                _ => views[i].live && !views[i].busy,
            })
            .collect();
        let writers: Vec<usize> = eligible.iter().copied().filter(|&i| views[i].holding && views[i].written).collect();
        let bystanders: Vec<usize> = eligible.iter().copied().filter(|&i| !views[i].holding).collect();
        let from = match want {
            Want::Writer => writers,
            Want::Bystander if bystanders.is_empty() => eligible,
            Want::Bystander => bystanders,
        };
        let Some(&target) = from.get((event.pick % from.len().max(1) as u64) as usize) else {
            if want == Want::Bystander {
                self.log.missed(index);
            }
            return want == Want::Bystander;
        };
        let slot = &self.slots[target];
        match event.kind {
            FaultKind::Delay => {
                slot.link.set_delay(Some(event.delay));
                let fault = self.log.begun(self.start, FaultKind::Delay, Some(&slot.name), index);
                self.slow_until[target] = Some((Instant::now() + event.length, fault));
            }
            FaultKind::Kill => slot.order(Order::Kill { event: index }, self.log),
            FaultKind::PartitionIsolate | FaultKind::PartitionSplit => {
                if let Err(e) = self.partition(index, event, target) {
                    // The switch refused the rules: the run cannot make the
                    // faults it was asked for.
                    self.failed.get_or_insert(chain(e.as_ref()));
                }
            }
            kind => slot.order(Order::Pause { kind, length: event.length, at_write: want == Want::Writer, into_write: event.into_write, event: index }, self.log),
        }
        true
    }

    /// Cuts slot `target`'s host off (with `event.group − 1` more slots'
    /// for a split, the ones after it), for the event's length.
    fn partition(&mut self, index: usize, event: &Event, target: usize) -> Result<()> {
        let n = self.slots.len();
        let group: Vec<&str> = (0..event.group.clamp(1, n)).map(|k| self.slots[(target + k) % n].name.as_str()).collect();
        match event.kind {
            FaultKind::PartitionIsolate => self.network.isolate(group[0])?,
            _ => {
                let rest: Vec<&str> = self.network.hosts().iter().map(|h| h.name()).filter(|h| !group.contains(h)).collect();
                self.network.split(&group, &rest)?;
            }
        }
        let (cut_at, until) = (self.start.elapsed(), Instant::now() + event.length);
        // Made, not just asked for: from the first cut host, the slot's own
        // link on the server's host must be silent now. One that is
        // answered is counted apart, never as injected.
        let (host, link) = (self.network.host(group[0]), self.network.host(SERVER_HOST).at(self.slots[target].link.port()));
        let fault = match host.reach_within(link, CONFIRM_BOUND)? {
            Reach::Silent => Some(self.log.begun_at(cut_at, event.kind, Some(&group.join("+")), index)),
            _ => {
                self.log.uncut(index);
                None
            }
        };
        self.partitioned_until = Some((until, fault));
        Ok(())
    }

    /// Heals the switch (whatever a partition, even one whose confirmation
    /// failed, left in it), and ends the partition in force in the log.
    fn heal_partition(&mut self) -> Result<()> {
        let healed = self.network.heal();
        if let Some((_, Some(fault))) = self.partitioned_until.take() {
            self.log.ended(self.start, fault);
        }
        healed
    }

    /// An immediate stop and a start of the server, on a thread of its
    /// own; missed while the previous one is still running.
    fn restart_database(&mut self, index: usize) {
        if self.restart.is_some() {
            self.log.missed(index);
            return;
        }
        let cluster = self.cluster.clone();
        match std::thread::Builder::new().name("db-restart".into()).spawn(move || cluster.restart_immediate()) {
            Ok(thread) => self.restart = Some((thread, self.log.begun(self.start, FaultKind::DbRestart, None, index))),
            Err(_) => self.log.missed(index),
        }
    }

    fn join_restart(&mut self) -> Result<()> {
        let Some((thread, fault)) = self.restart.take() else { return Ok(()) };
        let joined = thread.join();
        self.log.ended(self.start, fault);
        match joined {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("the nemesis's database restart failed: {}", chain(e.as_ref())).into()),
            Err(panic) => Err(format!("the nemesis's database restart panicked: {}", panic_message(&*panic)).into()),
        }
    }

    /// Every link fast again; the restart in progress finished; faults
    /// still waiting for a writer missed.
    fn heal(&mut self) -> Result<()> {
        if let Some((index, _, _)) = self.waiting.take() {
            self.log.missed(index);
        }
        for (slot, until) in self.slots.iter().zip(self.slow_until.iter_mut()) {
            slot.link.set_delay(None);
            if let Some((_, fault)) = until.take() {
                self.log.ended(self.start, fault);
            }
        }
        let healed = self.heal_partition();
        let restarted = self.join_restart();
        healed.and(restarted)
    }
}
