//! The checker: a pure function from a chaos run's history to a [`Verdict`],
//! a handful of counts, each defined over the record alone.
//!
//! The history has four sources. The resource records every write attempt
//! (`write_attempt`) and holds the final parts (`report_part`); the holders
//! report their calls, the granted acquires among them, and the nemesis its
//! faults. The run gathers them into one record (`crate::history`), and the
//! checker reads its view of that ([`CheckerInput::from_record`]).
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
//! when the floor is read as [`WriteAttempt::floor_after`] asks.
//!
//! The parts: `history` (what the checker reads of a run's record), and
//! `crate::vocabulary::Verdict` (the counts, what a history lacks, the
//! conclusion: a word of the lab's, read by the cases and pages too); here,
//! [`check`], the counts themselves, and [`findings`]: each thing a count
//! counted, with the checker's reason, for the history's page.

mod history;
#[cfg(test)]
mod tests;

pub use history::{Fault, GrantRecord, CheckerInput};

use crate::vocabulary::{FaultKind, StoredPart, Verdict, WriteAttempt};
use crate::history::{Finding, FindingKind, Target};
use std::collections::{BTreeMap, BTreeSet};

// ANCHOR: check
/// Judges a history; see [`Verdict`] for what each count means.
pub fn check(history: &CheckerInput) -> Verdict {
    let mut attempts: Vec<&WriteAttempt> = history.attempts.iter().collect();
    attempts.sort_by_key(|a| a.id);
    let accepted = attempts.iter().filter(|a| a.accepted).count();
    let holdings: BTreeSet<(&str, u32, u32)> =
        history.grants.iter().map(|g| (g.holder.as_str(), g.incarnation, g.holding)).collect();
    Verdict {
        attempts: attempts.len(),
        accepted,
        refused: attempts.len() - accepted,
        holdings: holdings.len(),
        stale_accepted: stale_accepted(&attempts).len(),
        tokens_reused: tokens_reused(&history.grants).len(),
        floors_recorded: attempts.iter().filter(|a| a.floor_after.is_some()).count(),
        floor_regressions: floor_regressions(&attempts).len(),
        lost_writes: lost_writes(&attempts, &history.final_parts).len(),
        faults: faults_by_kind(&history.faults),
    }
}
// ANCHOR_END: check

// ANCHOR: stale_accepted
/// Accepted attempts below the largest token their scope accepted before
/// them, each with the attempt that brought that token.
pub fn stale_accepted<'a>(attempts: &[&'a WriteAttempt]) -> Vec<(&'a WriteAttempt, &'a WriteAttempt)> {
    let mut largest: BTreeMap<&str, &WriteAttempt> = BTreeMap::new();
    let mut stale = Vec::new();
    for &a in attempts.iter().filter(|a| a.accepted) {
        match largest.get(a.scope.as_str()) {
            Some(&bar) if a.token < bar.token => stale.push((a, bar)),
            _ => {
                largest.insert(&a.scope, a);
            }
        }
    }
    stale
}
// ANCHOR_END: stale_accepted

/// Tokens that more than one distinct holding reported, with those holdings.
fn tokens_reused(grants: &[GrantRecord]) -> Vec<(i64, BTreeSet<(&str, u32, u32)>)> {
    let mut holdings: BTreeMap<i64, BTreeSet<(&str, u32, u32)>> = BTreeMap::new();
    for g in grants {
        holdings.entry(g.token).or_default().insert((&g.holder, g.incarnation, g.holding));
    }
    holdings.into_iter().filter(|(_, h)| h.len() > 1).collect()
}

/// Steps down between consecutive recorded floors of one scope: each
/// attempt that recorded the lower floor, with the one before it.
pub fn floor_regressions<'a>(attempts: &[&'a WriteAttempt]) -> Vec<(&'a WriteAttempt, &'a WriteAttempt)> {
    let mut previous: BTreeMap<&str, &WriteAttempt> = BTreeMap::new();
    let mut regressions = Vec::new();
    for &a in attempts {
        let Some(floor) = a.floor_after else { continue };
        if let Some(before) = previous.insert(&a.scope, a) {
            if before.floor_after.is_some_and(|b| floor < b) {
                regressions.push((a, before));
            }
        }
    }
    regressions
}

// ANCHOR: lost_writes
/// Accepted writes above their part's final token, or on a part that
/// vanished: each with the token that stayed, if any.
fn lost_writes<'a>(attempts: &[&'a WriteAttempt], final_parts: &[StoredPart]) -> Vec<(&'a WriteAttempt, Option<i64>)> {
    let finals: BTreeMap<(&str, &str), i64> =
        final_parts.iter().map(|p| ((p.scope.as_str(), p.part.as_str()), p.token)).collect();
    attempts
        .iter()
        .filter(|a| a.accepted)
        .map(|&a| (a, finals.get(&(a.scope.as_str(), a.part.as_str())).copied()))
        .filter(|(a, kept)| kept.is_none_or(|kept| a.token > kept))
        .collect()
}
// ANCHOR_END: lost_writes

/// Everything the counts of [`check`] counted, one finding each, with the
/// checker's reason: what the history's page marks on each operation.
/// There are exactly as many findings of a kind as its count.
pub fn findings(history: &CheckerInput) -> Vec<Finding> {
    let mut attempts: Vec<&WriteAttempt> = history.attempts.iter().collect();
    attempts.sort_by_key(|a| a.id);
    let mut out = Vec::new();
    for (a, bar) in stale_accepted(&attempts) {
        out.push(Finding {
            kind: FindingKind::Stale,
            on: Target::Attempt(a.id),
            reason: format!(
                "被接受的过期写入（I3）：token {} 小于作用域 {} 此前已接受的 token {}（write_attempt {}，{}）",
                a.token, a.scope, bar.token, bar.id, bar.writer
            ),
        });
    }
    for (token, holdings) in tokens_reused(&history.grants) {
        let who: Vec<String> = holdings.iter().map(|(h, inc, n)| format!("{h}#{inc} 第 {n} 段")).collect();
        out.push(Finding {
            kind: FindingKind::Reused,
            on: Target::Token(token),
            reason: format!("重复发出的 token（I2）：token {token} 发给了 {} 段持有期：{}", holdings.len(), who.join("、")),
        });
    }
    for (a, before) in floor_regressions(&attempts) {
        out.push(Finding {
            kind: FindingKind::Regression,
            on: Target::Attempt(a.id),
            reason: format!(
                "floor 倒退（I3）：这次记下的 floor {} 小于作用域 {} 上一次记下的 {}（write_attempt {}）",
                a.floor_after.unwrap_or_default(),
                a.scope,
                before.floor_after.unwrap_or_default(),
                before.id
            ),
        });
    }
    for (a, kept) in lost_writes(&attempts, &history.final_parts) {
        let stayed = match kept {
            Some(kept) => format!("分片 {} 最后留下的是更小的 token {kept}", a.part),
            None => format!("分片 {} 最后不见了", a.part),
        };
        out.push(Finding { kind: FindingKind::Lost, on: Target::Attempt(a.id), reason: format!("丢失的写入：token {} 被接受，{stayed}", a.token) });
    }
    out
}

fn faults_by_kind(faults: &[Fault]) -> BTreeMap<FaultKind, usize> {
    let mut counts = BTreeMap::new();
    for f in faults {
        *counts.entry(f.kind).or_insert(0) += 1;
    }
    counts
}
