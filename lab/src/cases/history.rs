//! A case's history, in the same record as the chaos run's
//! (`crate::history`): the calls of its holder processes, the resource's
//! rows, and the faults the case injected, read from what the parent did
//! (`events`): SIGSTOP to SIGCONT is a pause, SIGKILL a kill, a proxy's
//! hold to its release a delay. A pause is long when the lease did not
//! survive it (another holder was granted the lease meanwhile) or when it
//! outlasted the ttl, short otherwise: a case's pause lasts until the
//! lease has expired by the database's clock, which is less than a ttl
//! after the last renewal, and the chaos plan's long pause is longer than
//! the ttl for that same end, that the lease lapse.
//!
//! Every case whose holder processes made calls records one: F4, F5, F10,
//! F11, F12, F16 (F15 runs the chaos run, which records its own, one per
//! mode), except F13, whose faults are clocks that run wrong for a
//! process's whole life, not moments the parent acts at: a history of its
//! calls would show none of them; and F17–F19, whose resource is a server
//! on a network host of the case's own, which ends with the case, before
//! its history could read that server's rows (their partitions are in the
//! chaos run's histories, whose resource is the lab's cluster). A case of
//! component steps (F1–F3,
//! F6–F9, F14) writes in the lab's own name with no holder process, and
//! has none. A case that resets
//! the lease tables halfway (F12 runs its timeline twice) has one history
//! per stretch between resets, named after its mode (`F12-fenced-scope`,
//! `F12-unfenced`): the second stretch starts again from token 1, and one
//! history of both would read its writes as stale.
//!
//! The stretches are kept in a process-wide stash, like the timeline's: the
//! runner begins one as a case starts, `Lab::reset` ends one (and begins
//! the next), and the runner takes them all as the case ends.

use crate::call_log::{self, Heard};
use crate::vocabulary::{Act, FaultKind, Operation, Outcome};
use crate::db;
use crate::error::{chain, Result};
use crate::events::{self, ParentEvent};
use crate::history::{self, hundredths, FaultSpan, Op, Record, Resource, RunInfo};
use crate::params::TTL;
use crate::stats::ms;
use parking_lot::Mutex;

/// One stretch of a case, between two resets.
struct Stretch {
    /// Its start, in ms since the epoch.
    began_ms: f64,
    /// Its end.
    ended_ms: f64,
    /// The calls its holders made.
    heard: Vec<Heard>,
    /// What the resource recorded, times from `began_ms`.
    resource: Resource,
}

/// The case's stretches so far, the start of the current one, and the
/// first error met in reading one (reported when the case ends).
struct Stash {
    done: Vec<Stretch>,
    began_ms: Option<f64>,
    error: Option<String>,
}

static STASH: Mutex<Stash> = Mutex::new(Stash { done: Vec::new(), began_ms: None, error: None });

/// The cases whose holders make calls but that record no history (see
/// above): F13's faults are not moments; F17–F19's resource is gone when
/// the case ends.
const NO_HISTORY: [&str; 4] = ["F13", "F17", "F18", "F19"];

/// The kinds of fault a case injects from outside, as the chaos run names them.
const KINDS: [FaultKind; 4] = [FaultKind::Delay, FaultKind::Kill, FaultKind::PauseLong, FaultKind::PauseShort];

/// A case starts: nothing recorded yet.
pub fn begin() {
    call_log::take();
    *STASH.lock() = Stash { done: Vec::new(), began_ms: Some(events::now_ms()), error: None };
}

/// The lease tables are about to be reset: the stretch so far ends here
/// (kept if its holders made calls), and the next one begins.
pub fn cut() {
    let mut stash = STASH.lock();
    let Some(began_ms) = stash.began_ms else { return };
    let heard = call_log::take();
    let ended_ms = events::now_ms();
    if !heard.is_empty() {
        match db::connect(db::RES_DB, "lab history").and_then(|mut c| history::read_resource(&mut c, None, began_ms)) {
            Ok(resource) => stash.done.push(Stretch { began_ms, ended_ms, heard, resource }),
            Err(e) => {
                stash.error.get_or_insert(chain(e.as_ref()));
            }
        }
    }
    stash.began_ms = Some(events::now_ms());
}

/// The case `id`, run as `name`, has ended: the histories of its stretches.
pub fn take(id: &str, name: &str) -> Result<Vec<Record>> {
    cut();
    let (stretches, error) = {
        let mut stash = STASH.lock();
        stash.began_ms = None;
        (std::mem::take(&mut stash.done), stash.error.take())
    };
    if let Some(error) = error {
        return Err(format!("reading the resource for the history: {error}").into());
    }
    if NO_HISTORY.contains(&id) {
        return Ok(Vec::new());
    }
    let parent = events::peek();
    let several = stretches.len() > 1;
    let mut records = Vec::new();
    for s in stretches {
        let mode = s.resource.attempts.first().map(|a| a.mode);
        let run_name = match mode {
            Some(mode) if several => format!("{name}-{}", mode.cli_name()),
            _ => name.to_owned(),
        };
        let mut holders: Vec<String> = s.heard.iter().map(|h| h.holder.clone()).collect();
        holders.sort();
        holders.dedup();
        let ops = history::ops_from_calls(&s.heard, s.resource.attempts, s.began_ms)?;
        let mut faults = faults(&parent, s.began_ms, s.ended_ms);
        lapsed_pauses_are_long(&mut faults, &ops);
        let run = RunInfo {
            schema: history::SCHEMA,
            name: run_name,
            command: if name == id { format!("lab run {id}") } else { format!("lab run {id} (the variant {name})") },
            mode,
            t0_unix_ms: s.began_ms,
            end_ms: hundredths(s.ended_ms - s.began_ms),
            fault_kinds: KINDS.to_vec(),
            holders,
        };
        records.push(Record { run, ops, faults, finals: s.resource.finals });
    }
    Ok(records)
}

/// A short pause under which another holder was granted the lease: the
/// lease did not survive it, and it counts as long.
fn lapsed_pauses_are_long(faults: &mut [FaultSpan], ops: &[Op]) {
    for f in faults.iter_mut().filter(|f| f.kind == FaultKind::PauseShort) {
        let end = f.end_ms.unwrap_or(f64::INFINITY);
        let taken_over = ops.iter().any(|o| {
            o.f == Operation::Acquire && o.outcome == Outcome::Ok && !f.targets.contains(&o.holder) && o.complete_ms.is_some_and(|t| t > f.start_ms && t <= end)
        });
        if taken_over {
            f.kind = FaultKind::PauseLong;
        }
    }
}

/// The faults among the parent's events from `from_ms` to `to_ms`, times
/// from `from_ms`.
fn faults(parent: &[ParentEvent], from_ms: f64, to_ms: f64) -> Vec<FaultSpan> {
    let at = |t: f64| hundredths(t - from_ms);
    let mut spans: Vec<FaultSpan> = Vec::new();
    // The pause or delay each holder is in, as an index into `spans`.
    let mut open: Vec<(String, Act, usize)> = Vec::new();
    let close = |spans: &mut Vec<FaultSpan>, open: &mut Vec<(String, Act, usize)>, holder: &str, act: Act, t: f64| {
        if let Some(i) = open.iter().position(|(h, a, _)| h == holder && *a == act) {
            let (_, _, index) = open.remove(i);
            let span = &mut spans[index];
            span.end_ms = Some(at(t));
            if span.kind == FaultKind::PauseShort && t - from_ms - span.start_ms > ms(TTL) {
                span.kind = FaultKind::PauseLong;
            }
        }
    };
    for e in parent.iter().filter(|e| e.at_ms >= from_ms && e.at_ms < to_ms) {
        let begin = |kind: FaultKind| FaultSpan { id: 0, kind, targets: vec![e.holder.clone()], start_ms: at(e.at_ms), end_ms: None };
        match e.act {
            Act::Stop => {
                open.push((e.holder.clone(), Act::Stop, spans.len()));
                spans.push(begin(FaultKind::PauseShort));
            }
            Act::Cont => close(&mut spans, &mut open, &e.holder, Act::Stop, e.at_ms),
            Act::Hold => {
                open.push((e.holder.clone(), Act::Hold, spans.len()));
                spans.push(begin(FaultKind::Delay));
            }
            Act::Release => close(&mut spans, &mut open, &e.holder, Act::Hold, e.at_ms),
            Act::Kill => {
                // A stopped process ends with it: its pause ends there.
                close(&mut spans, &mut open, &e.holder, Act::Stop, e.at_ms);
                spans.push(begin(FaultKind::Kill));
            }
            _ => {}
        }
    }
    for (n, span) in spans.iter_mut().enumerate() {
        span.id = n as u64 + 1;
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pause longer than the ttl, a short one ended by a kill, a delay:
    /// each a fault from its start to its end.
    #[test]
    fn signals_and_holds_are_faults() {
        let e = |at_ms: f64, holder: &str, act: Act| ParentEvent { at_ms, holder: holder.into(), act };
        let parent = [
            e(900.0, "holder-a", Act::Spawn),
            e(1000.0, "holder-a", Act::Stop),
            e(4000.0, "holder-a", Act::Cont),
            e(4100.0, "holder-b", Act::Stop),
            e(4200.0, "holder-b", Act::Kill),
            e(5000.0, "holder-c", Act::Hold),
            e(5500.0, "holder-c", Act::Release),
            e(9000.0, "holder-a", Act::Stop),
        ];
        let spans = faults(&parent, 500.0, 8000.0);
        let got: Vec<(u64, &str, &str, f64, Option<f64>)> =
            spans.iter().map(|s| (s.id, s.kind.name(), s.targets[0].as_str(), s.start_ms, s.end_ms)).collect();
        assert_eq!(
            got,
            [
                (1, "pause-long", "holder-a", 500.0, Some(3500.0)),
                (2, "pause-short", "holder-b", 3600.0, Some(3700.0)),
                (3, "kill", "holder-b", 3700.0, None),
                (4, "delay", "holder-c", 4500.0, Some(5000.0)),
            ]
        );
    }

    /// A pause shorter than the ttl under which another holder got the
    /// lease is long; one under which nobody did stays short.
    #[test]
    fn a_pause_the_lease_did_not_survive_is_long() {
        let pause = |targets: &str| FaultSpan { id: 1, kind: FaultKind::PauseShort, targets: vec![targets.into()], start_ms: 100.0, end_ms: Some(1400.0) };
        let mut grant = crate::history::Record::empty("F4", crate::vocabulary::FenceMode::FencedScope).ops;
        grant.push(Op {
            id: 1,
            holder: "holder-b".into(),
            incarnation: 0,
            process: 2,
            f: Operation::Acquire,
            invoke_ms: Some(1200.0),
            complete_ms: Some(1210.0),
            outcome: Outcome::Ok,
            token: Some(2),
            part: None,
            tries: Some(1),
            code: None,
            holding: Some(1),
            attempt: None,
        });
        let mut faults = [pause("holder-a"), pause("holder-b")];
        lapsed_pauses_are_long(&mut faults, &grant);
        assert_eq!([faults[0].kind, faults[1].kind], [FaultKind::PauseLong, FaultKind::PauseShort]);
    }
}
