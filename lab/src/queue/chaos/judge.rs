//! The queue chaos run's judge: one pure function from the run's record
//! (every `job_event`, every side effect the resource saw, and the claims
//! the nemesis disturbed) to its counts. It reads nothing while the run
//! runs, so it is tested on hand-made records.
//!
//! What counts as harm, each a thing the fixed queue's guards rule out:
//! - a stale heartbeat or completion accepted: accepted from a worker
//!   process other than the one that made the job's latest claim;
//! - a stale side effect accepted: the resource took a token below the
//!   largest it had accepted for the job, or the same token from another
//!   worker process (two claims that share a token);
//! - a job claimed again after its completion was accepted;
//! - a claim taken back (rescued or released) while its lease still ran by
//!   the database's clock;
//! - a claim taken back from a worker process the nemesis never disturbed
//!   on that job (never paused, killed or cut from its heartbeat there, and
//!   not one of the jobs a replacement claimed on its way to the one it took
//!   over, which wait their turn): a healthy worker's job.
//!
//! Not harm: a job whose handler ran twice because a worker paused or died
//! holding it. That is at-least-once, the promise every queue makes; it
//! is counted (`runs_twice`), and the fence is what keeps the second run
//! from undoing the first.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One row of `job_event`.
#[derive(Clone, Debug, PartialEq)]
pub struct JobEvent {
    /// `job_event.id`: the order of recording.
    pub id: i64,
    /// The job.
    pub job: i64,
    /// `claim`, `heartbeat`, `complete`, `rescue` or `release`.
    pub kind: String,
    /// The worker process that asked (`worker-1#2`), or `rescuer`/`pruner`.
    pub incarnation: String,
    /// The token the operation carried or took back.
    pub token: Option<i64>,
    /// Whether the queue accepted it.
    pub accepted: bool,
    /// The worker process of the job's latest claim, after the operation.
    pub holder: Option<String>,
    /// For a rescue or release: whether the lease it took back still ran.
    pub live: Option<bool>,
    /// When it was recorded, in seconds after the record's first event.
    pub at: f64,
}

/// One side effect as the resource recorded it (`write_attempt` of scope
/// `job-N`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Effect {
    /// `write_attempt.id`: for the fenced scope, the order of acceptance.
    pub id: i64,
    /// The job (from the scope `job-N`).
    pub job: i64,
    /// The worker process that wrote.
    pub writer: String,
    /// The token it carried.
    pub token: i64,
    /// Whether the resource accepted it.
    pub accepted: bool,
}

/// The record a queue chaos run is judged from.
#[derive(Clone, Debug, Default)]
pub struct QueueRecord {
    /// Every `job_event`, in id order.
    pub events: Vec<JobEvent>,
    /// Every side effect, in id order.
    pub effects: Vec<Effect>,
    /// The claims the nemesis disturbed: (job, worker process).
    pub disturbed: BTreeSet<(i64, String)>,
}

/// What the judge counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueCounts {
    /// Claims granted.
    pub claims: usize,
    /// Jobs whose completion was accepted.
    pub done: usize,
    /// Jobs whose side effect more than one worker process tried
    /// (at-least-once: not harm).
    pub runs_twice: usize,
    /// Heartbeats accepted from a superseded worker process.
    pub stale_heartbeats: usize,
    /// Completions accepted from a superseded worker process.
    pub stale_completions: usize,
    /// Side effects accepted below the job's largest accepted token, or at
    /// it from another worker process.
    pub stale_effects: usize,
    /// Claims of a job after its completion was accepted.
    pub claimed_after_done: usize,
    /// Claims taken back while their lease still ran.
    pub live_taken_back: usize,
    /// Claims taken back from a worker process the nemesis never disturbed.
    pub healthy_taken_back: usize,
}

impl QueueCounts {
    /// Every harm counted, added up: 0 is a clean run.
    pub fn harm(&self) -> usize {
        self.stale_heartbeats + self.stale_completions + self.stale_effects + self.claimed_after_done + self.live_taken_back + self.healthy_taken_back
    }
}

/// Counts what `record` shows.
pub fn judge(record: &QueueRecord) -> QueueCounts {
    let mut counts = QueueCounts::default();
    let mut completed: BTreeSet<i64> = BTreeSet::new();
    let mut done: BTreeSet<i64> = BTreeSet::new();
    for e in &record.events {
        let superseded = e.holder.as_deref() != Some(e.incarnation.as_str());
        match e.kind.as_str() {
            "claim" => {
                counts.claims += 1;
                if completed.contains(&e.job) {
                    counts.claimed_after_done += 1;
                }
            }
            "heartbeat" if e.accepted && superseded => counts.stale_heartbeats += 1,
            "complete" if e.accepted => {
                if superseded {
                    counts.stale_completions += 1;
                }
                completed.insert(e.job);
                done.insert(e.job);
            }
            "rescue" | "release" if e.accepted => {
                if e.live == Some(true) {
                    counts.live_taken_back += 1;
                }
                if from_healthy(record, e) {
                    counts.healthy_taken_back += 1;
                }
            }
            _ => {}
        }
    }
    counts.done = done.len();
    // Per job: the workers that tried its side effect, and the fence's
    // walk over the accepted ones in acceptance order.
    let mut writers: BTreeMap<i64, BTreeSet<&str>> = BTreeMap::new();
    let mut largest: BTreeMap<i64, (i64, &str)> = BTreeMap::new();
    for effect in &record.effects {
        writers.entry(effect.job).or_default().insert(&effect.writer);
        if !effect.accepted {
            continue;
        }
        match largest.get(&effect.job) {
            Some(&(token, writer)) if effect.token < token || (effect.token == token && effect.writer != writer) => counts.stale_effects += 1,
            _ => {
                largest.insert(effect.job, (effect.token, &effect.writer));
            }
        }
    }
    counts.runs_twice = writers.values().filter(|w| w.len() > 1).count();
    counts
}

/// Whether take-back `e` took the claim of a worker process the nemesis
/// never disturbed on that job.
fn from_healthy(record: &QueueRecord, e: &JobEvent) -> bool {
    let owner = e.holder.clone().unwrap_or_default();
    !record.disturbed.contains(&(e.job, owner))
}

/// For each claim taken back from a healthy worker process, its story as
/// the record has it: when it was claimed, when its heartbeats were
/// accepted, when and by whom it was taken back. A fixed queue should
/// have none; if it does, this says whether the heartbeats stopped or
/// never began.
pub fn healthy_stories(record: &QueueRecord) -> Vec<String> {
    let taken = record.events.iter().filter(|e| matches!(e.kind.as_str(), "rescue" | "release") && e.accepted && from_healthy(record, e));
    taken
        .map(|t| {
            let owner = t.holder.as_deref().unwrap_or("nobody");
            let before = || record.events.iter().filter(|e| e.job == t.job && e.incarnation == owner && e.id < t.id);
            // The claim taken back is the owner's last claim of the job;
            // its heartbeats are the ones after it.
            let claim = before().filter(|e| e.kind == "claim").last();
            let claimed = claim.map_or_else(|| "never".into(), |e| format!("{:.3}s", e.at));
            let since = claim.map_or(0, |e| e.id);
            let beats: Vec<String> = before().filter(|e| e.kind == "heartbeat" && e.accepted && e.id > since).map(|e| format!("{:.3}s", e.at)).collect();
            let beats = if beats.is_empty() { "none".to_owned() } else { beats.join(", ") };
            format!("job {} of {owner}: claimed at {claimed}, heartbeats accepted at {beats}, taken back by the {} at {:.3}s", t.job, t.incarnation, t.at)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: i64, kind: &str, who: &str, token: i64, accepted: bool, holder: &str) -> JobEvent {
        JobEvent { id, job: 1, kind: kind.into(), incarnation: who.into(), token: Some(token), accepted, holder: Some(holder.into()), live: None, at: id as f64 / 10.0 }
    }

    fn effect(id: i64, writer: &str, token: i64, accepted: bool) -> Effect {
        Effect { id, job: 1, writer: writer.into(), token, accepted }
    }

    /// A paused worker's job taken over, as the fixed queue runs it: every
    /// stale operation refused, the job run twice, no harm.
    fn fixed_takeover() -> QueueRecord {
        let mut rescue = event(3, "rescue", "rescuer", 1, true, "w-1#0");
        rescue.live = Some(false);
        QueueRecord {
            events: vec![
                event(1, "claim", "w-1#0", 1, true, "w-1#0"),
                event(2, "heartbeat", "w-1#0", 1, true, "w-1#0"),
                rescue,
                event(4, "claim", "w-2#0", 2, true, "w-2#0"),
                event(5, "heartbeat", "w-1#0", 1, false, "w-2#0"),
                event(6, "complete", "w-1#0", 1, false, "w-2#0"),
                event(7, "complete", "w-2#0", 2, true, "w-2#0"),
            ],
            effects: vec![effect(1, "w-2#0", 2, true), effect(2, "w-1#0", 1, false)],
            disturbed: [(1, "w-1#0".to_owned())].into(),
        }
    }

    #[test]
    fn a_fixed_takeover_is_clean_and_runs_twice() {
        let counts = judge(&fixed_takeover());
        assert_eq!(counts.harm(), 0, "{counts:?}");
        assert_eq!((counts.claims, counts.done, counts.runs_twice), (2, 1, 1));
    }

    /// Each harm, planted one at a time, is counted where it belongs.
    #[test]
    fn each_harm_is_counted() {
        let mut r = fixed_takeover();
        r.events[4].accepted = true;
        assert_eq!(judge(&r).stale_heartbeats, 1);
        let mut r = fixed_takeover();
        r.events[5].accepted = true;
        assert_eq!(judge(&r).stale_completions, 1);
        let mut r = fixed_takeover();
        r.effects[1].accepted = true;
        assert_eq!(judge(&r).stale_effects, 1);
        // The same token from another worker (a token given back).
        let mut r = fixed_takeover();
        r.effects[1] = effect(2, "w-1#0", 2, true);
        assert_eq!(judge(&r).stale_effects, 1);
        let mut r = fixed_takeover();
        r.events.push(event(8, "claim", "w-3#0", 3, true, "w-3#0"));
        assert_eq!(judge(&r).claimed_after_done, 1);
        let mut r = fixed_takeover();
        r.events[2].live = Some(true);
        assert_eq!(judge(&r).live_taken_back, 1);
        let mut r = fixed_takeover();
        r.disturbed.clear();
        assert_eq!(judge(&r).healthy_taken_back, 1);
    }

    /// A healthy worker's claim taken back is told with its timeline; a
    /// disturbed one is not told.
    #[test]
    fn a_healthy_take_back_is_told() {
        let mut r = fixed_takeover();
        assert!(healthy_stories(&r).is_empty());
        r.disturbed.clear();
        assert_eq!(healthy_stories(&r), ["job 1 of w-1#0: claimed at 0.100s, heartbeats accepted at 0.200s, taken back by the rescuer at 0.300s"]);
        // The same worker claims the job again once it is available, and
        // loses it again: the second story has only the second claim's
        // heartbeats (its late one, after the take-back, refused).
        r.events.truncate(3);
        let mut again = event(6, "rescue", "rescuer", 2, true, "w-1#0");
        again.live = Some(false);
        r.events.extend([event(4, "claim", "w-1#0", 2, true, "w-1#0"), event(5, "heartbeat", "w-1#0", 2, true, "w-1#0"), again, event(7, "heartbeat", "w-1#0", 2, false, "w-1#0")]);
        assert_eq!(
            healthy_stories(&r),
            [
                "job 1 of w-1#0: claimed at 0.100s, heartbeats accepted at 0.200s, taken back by the rescuer at 0.300s",
                "job 1 of w-1#0: claimed at 0.400s, heartbeats accepted at 0.500s, taken back by the rescuer at 0.600s"
            ]
        );
    }

    /// An empty record counts nothing (the run refuses it as nothing to judge).
    #[test]
    fn an_empty_record_counts_nothing() {
        assert_eq!(judge(&QueueRecord::default()), QueueCounts::default());
    }
}
