//! The queue's nemesis: which fault each claim meets, drawn from the seed,
//! and the tally of what was injected.
//!
//! The holder chaos run draws a timed schedule and aims it at processes.
//! A queue's faults are about a claim (a worker paused while it holds one,
//! a job that runs long, a completion that lands while the rescuer is
//! between its read and its write), so this nemesis is asked at every
//! claim: every [`FAULT_EVERY`]-th claim of the run gets the next fault of
//! a seeded sequence, which deals every kind once in each round of
//! [`QueueFault::ALL`], in a shuffled order. The same seed, the same faults
//! in the same order; which worker and which job meet them is the run's
//! own timing, recorded in the history.

use crate::chaos::schedule::SplitMix64;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every how many claims the nemesis strikes.
pub const FAULT_EVERY: u64 = 3;

/// A fault of the queue's nemesis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueFault {
    /// The worker (its work and its heartbeat) stops for a third of the
    /// ttl at a drawn step, and goes on: its lease outlives the pause.
    PauseShort,
    /// The worker stops at a drawn step until another worker has claimed
    /// its job (the lease ran out, the rescuer took it back) or four ttls
    /// have passed, and goes on from there (F4's pause, on a queue).
    PauseLong,
    /// As a long pause after the claim, and the worker is presumed dead:
    /// a new process of the same name starts and takes the job over once
    /// its lease ran out (the orchestrator's replacement; kubernetes#22775).
    Replace,
    /// The worker process dies at a drawn step; a new one of the same name
    /// starts.
    Kill,
    /// After its side effect the worker's heartbeat stops; once its lease
    /// ran out it completes while the rescuer is at its gap (river#1302).
    LateCompletion,
    /// The job's work runs three ttls, heartbeats going: a long, healthy
    /// job (hexpm#1825, solid_queue#589).
    LongJob,
    /// The job's work is one statement of three ttls on the worker's
    /// connection: a busy connection (pgqueuer#323).
    BusyConnection,
    /// The rescuer's next sweep reads an application clock two ttls ahead
    /// of the database's (db-scheduler#402).
    SkewedRescuer,
}

impl QueueFault {
    /// Every kind, in the table's order.
    pub const ALL: [QueueFault; 8] = [
        QueueFault::PauseShort,
        QueueFault::PauseLong,
        QueueFault::Replace,
        QueueFault::Kill,
        QueueFault::LateCompletion,
        QueueFault::LongJob,
        QueueFault::BusyConnection,
        QueueFault::SkewedRescuer,
    ];

    /// The fault's name in tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            QueueFault::PauseShort => "pause-short",
            QueueFault::PauseLong => "pause-long",
            QueueFault::Replace => "replace",
            QueueFault::Kill => "kill",
            QueueFault::LateCompletion => "late-completion",
            QueueFault::LongJob => "long-job",
            QueueFault::BusyConnection => "busy-connection",
            QueueFault::SkewedRescuer => "skewed-rescuer",
        }
    }

    /// Whether the fault lands at a drawn step of the claim.
    pub fn at_a_step(self) -> bool {
        matches!(self, QueueFault::PauseShort | QueueFault::PauseLong | QueueFault::Kill)
    }
}

impl std::fmt::Display for QueueFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The steps of a claim where a fault can land.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Just after the claim, before the work.
    AfterClaim,
    /// After the work, before the side effect.
    BeforeEffect,
    /// After the side effect, before the completion.
    BeforeComplete,
}

/// What the nemesis deals one claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strike {
    /// The fault.
    pub fault: QueueFault,
    /// Where it lands (for the faults that land at a drawn step; the
    /// others have their own).
    pub step: Step,
}

/// The nemesis: the seeded sequence, and the claims counted so far.
pub struct Nemesis {
    state: Mutex<Dealer>,
    tally: Mutex<BTreeMap<QueueFault, FaultCount>>,
}

struct Dealer {
    rng: SplitMix64,
    claims: u64,
    round: Vec<QueueFault>,
}

/// How often one kind of fault was dealt and what became of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCount {
    /// Injected as dealt.
    pub injected: usize,
    /// Dealt, but it found nothing to act on (another late completion was
    /// at the rescuer's gap, the job was not claimed again in time, the
    /// run ended first).
    pub missed: usize,
}

impl Nemesis {
    /// The nemesis of `seed`.
    pub fn new(seed: u64) -> Nemesis {
        Nemesis {
            state: Mutex::new(Dealer { rng: SplitMix64::stream(seed, 7), claims: 0, round: Vec::new() }),
            tally: Mutex::new(QueueFault::ALL.iter().map(|f| (*f, FaultCount::default())).collect()),
        }
    }

    /// Counts a claim, and deals it a fault if its turn has come.
    pub fn at_claim(&self) -> Option<Strike> {
        let mut dealer = self.state.lock();
        dealer.claims += 1;
        if !dealer.claims.is_multiple_of(FAULT_EVERY) {
            return None;
        }
        if dealer.round.is_empty() {
            // A new round: every kind once, shuffled (Fisher–Yates, drawn
            // from the seed), dealt from the back.
            let mut round = QueueFault::ALL.to_vec();
            for i in (1..round.len()).rev() {
                let j = dealer.rng.between(0, i as u64) as usize;
                round.swap(i, j);
            }
            dealer.round = round;
        }
        let fault = dealer.round.pop().expect("a round is refilled when empty");
        let step = match dealer.rng.between(0, 2) {
            0 => Step::AfterClaim,
            1 => Step::BeforeEffect,
            _ => Step::BeforeComplete,
        };
        Some(Strike { fault, step })
    }

    /// Records that `fault` was injected.
    pub fn injected(&self, fault: QueueFault) {
        self.tally.lock().entry(fault).or_default().injected += 1;
    }

    /// Records that `fault` was dealt and found nothing to act on.
    pub fn missed(&self, fault: QueueFault) {
        self.tally.lock().entry(fault).or_default().missed += 1;
    }

    /// The tally, every kind present.
    pub fn tally(&self) -> BTreeMap<QueueFault, FaultCount> {
        self.tally.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same seed deals the same faults in the same order, every kind
    /// once a round, one claim in FAULT_EVERY.
    #[test]
    fn every_round_deals_every_kind_and_a_seed_repeats() {
        let deal = |seed| {
            let nemesis = Nemesis::new(seed);
            (0..FAULT_EVERY * 16).filter_map(|_| nemesis.at_claim()).collect::<Vec<_>>()
        };
        let dealt = deal(1);
        assert_eq!(dealt.len(), 16);
        assert_eq!(dealt, deal(1));
        assert_ne!(dealt, deal(2));
        for round in dealt.chunks(QueueFault::ALL.len()) {
            let mut kinds: Vec<QueueFault> = round.iter().map(|s| s.fault).collect();
            kinds.sort();
            assert_eq!(kinds, QueueFault::ALL);
        }
    }
}
