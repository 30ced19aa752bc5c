//! The checker: a pure function from a chaos run's history to a [`Verdict`],
//! a handful of counts, each defined over the record alone.
//!
//! The history has four sources. The resource records every write attempt
//! (`write_attempt`) and holds the final parts (`report_part`); [`load`]
//! reads both. The holders report their grants and the nemesis its faults,
//! in their own logs, which the run collects.
//!
//! What the counts mean in the article's terms:
//! - a *stale write accepted* is I3 broken as chapter 2 states it: in a
//!   scope's acceptance order the tokens never go down;
//! - a *token reused* is I2 broken: a token that two holdings were given;
//! - a *floor regression* is I3 seen from the fence's side: the scope's
//!   `fence_floor` going down (F6a: from 2 to 1);
//! - a *lost write* is what the report pays: an accepted write whose effect
//!   vanished without a larger token overwriting it.
//!
//! Acceptance order. For `FENCED_SCOPE` an accepted attempt is recorded
//! inside the write's own transaction, under the `fence_floor` row lock, so
//! `write_attempt.id` order *is* acceptance order, and the stale count is
//! exact; so it is for `FENCED_SCOPE_CTE`, whose record is drawn in the
//! fence's own statement, under the same lock. The broken modes record in
//! the write's own statement (`FENCED_ROW`, `UNFENCED`) or in one of its
//! own after it (`CHECK_THEN_WRITE`), with no lock that orders writers;
//! when two writers race, id order is then the order of recording, which
//! can differ from the order in which the writes took effect. The
//! checker uses id order for every mode all the same: against the real
//! fence it raises no false alarm, and for a broken mode a stale count is a
//! symptom of the race the run exists to expose (it may count a write that
//! took effect before the larger token's). Lost writes compare tokens only,
//! so they do not depend on the order at all. Floor regressions are exact
//! when the floor is read as [`Attempt::floor_after`] asks.
//!
//! The parts: `history` (what a run records, and [`load`] of its resource
//! half), `verdict` (the counts, what a history lacks, the conclusion);
//! here, [`check`] and the counts themselves.

mod history;
mod verdict;
#[cfg(test)]
mod tests;

pub use history::{load, Attempt, Fault, FinalPart, GrantRecord, History, ATTEMPTS, FINAL_PARTS};
pub use verdict::{Gap, Judgement, Verdict};

use super::schedule::FaultKind;
use std::collections::{BTreeMap, BTreeSet};

// ANCHOR: check
/// Judges a history; see [`Verdict`] for what each count means.
pub fn check(history: &History) -> Verdict {
    let mut attempts: Vec<&Attempt> = history.attempts.iter().collect();
    attempts.sort_by_key(|a| a.id);
    let accepted = attempts.iter().filter(|a| a.accepted).count();
    let holdings: BTreeSet<(&str, u32, u32)> =
        history.grants.iter().map(|g| (g.holder.as_str(), g.incarnation, g.holding)).collect();
    Verdict {
        attempts: attempts.len(),
        accepted,
        refused: attempts.len() - accepted,
        holdings: holdings.len(),
        stale_accepted: stale_accepted(&attempts),
        tokens_reused: tokens_reused(&history.grants),
        floors_recorded: attempts.iter().filter(|a| a.floor_after.is_some()).count(),
        floor_regressions: floor_regressions(&attempts),
        lost_writes: lost_writes(&attempts, &history.final_parts),
        faults: faults_by_kind(&history.faults),
    }
}
// ANCHOR_END: check

// ANCHOR: stale_accepted
/// Accepted attempts below the largest token their scope accepted before them.
fn stale_accepted(attempts: &[&Attempt]) -> usize {
    let mut largest: BTreeMap<&str, i64> = BTreeMap::new();
    let mut stale = 0;
    for a in attempts.iter().filter(|a| a.accepted) {
        match largest.get_mut(a.scope.as_str()) {
            Some(bar) if a.token < *bar => stale += 1,
            Some(bar) => *bar = a.token,
            None => {
                largest.insert(&a.scope, a.token);
            }
        }
    }
    stale
}
// ANCHOR_END: stale_accepted

/// Tokens that more than one distinct holding reported.
fn tokens_reused(grants: &[GrantRecord]) -> usize {
    let mut holdings: BTreeMap<i64, BTreeSet<(&str, u32, u32)>> = BTreeMap::new();
    for g in grants {
        holdings.entry(g.token).or_default().insert((&g.holder, g.incarnation, g.holding));
    }
    holdings.values().filter(|h| h.len() > 1).count()
}

/// Steps down between consecutive recorded floors of one scope.
fn floor_regressions(attempts: &[&Attempt]) -> usize {
    let mut previous: BTreeMap<&str, i64> = BTreeMap::new();
    let mut regressions = 0;
    for a in attempts {
        if let Some(floor) = a.floor_after {
            if previous.insert(&a.scope, floor).is_some_and(|before| floor < before) {
                regressions += 1;
            }
        }
    }
    regressions
}

// ANCHOR: lost_writes
/// Accepted writes above their part's final token, or on a part that vanished.
fn lost_writes(attempts: &[&Attempt], final_parts: &[FinalPart]) -> usize {
    let finals: BTreeMap<(&str, &str), i64> =
        final_parts.iter().map(|p| ((p.scope.as_str(), p.part.as_str()), p.token)).collect();
    attempts
        .iter()
        .filter(|a| a.accepted)
        .filter(|a| finals.get(&(a.scope.as_str(), a.part.as_str())).is_none_or(|&kept| a.token > kept))
        .count()
}
// ANCHOR_END: lost_writes

fn faults_by_kind(faults: &[Fault]) -> BTreeMap<FaultKind, usize> {
    let mut counts = BTreeMap::new();
    for f in faults {
        *counts.entry(f.kind).or_insert(0) += 1;
    }
    counts
}
