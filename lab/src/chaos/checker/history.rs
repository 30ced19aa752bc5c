//! A chaos run's history as the checker reads it: the write attempts and
//! final parts the resource recorded, the grants the holders reported, the
//! faults the nemesis injected; taken from the run's whole record
//! ([`CheckerInput::from_record`]), or written by hand in a test.

use crate::error::Result;
use crate::history::Record;
use crate::vocabulary::{FaultKind, Operation, Outcome, StoredPart, WriteAttempt};


/// One successful acquire, as the holder that got it reports it.
///
/// A holding is named by (holder, incarnation, holding): a restarted holder
/// starts counting its holdings again, so the incarnation keeps its second
/// life's first holding apart from its first life's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRecord {
    /// The holder, e.g. `holder-a`.
    pub holder: String,
    /// Which start of that holder's process: 0 for the first, 1 after the
    /// nemesis's first kill and restart, and so on.
    pub incarnation: u32,
    /// The holding's number within the incarnation: 1 for its first
    /// successful acquire, 2 for the next, …
    pub holding: u32,
    /// The fencing token the acquire returned.
    pub token: i64,
}

/// One fault the nemesis injected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What it was: a pause shorter or longer than the ttl (SIGSTOP), a
    /// kill (SIGKILL and restart), a delay (the slot's link slowed for a
    /// span), a partition (a host, or a group of hosts, cut off in the
    /// switch), a database restart (an immediate stop and a start).
    pub kind: FaultKind,
}

/// Everything a chaos run leaves behind, as the checker reads it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckerInput {
    /// Every write attempt, accepted or refused, in `write_attempt.id`
    /// order ([`super::check`] sorts by id anyway).
    pub attempts: Vec<WriteAttempt>,
    /// Every successful acquire the holders reported.
    pub grants: Vec<GrantRecord>,
    /// The resource's rows after the run, one per (scope, part).
    pub final_parts: Vec<StoredPart>,
    /// The nemesis's faults, in the order it injected them.
    pub faults: Vec<Fault>,
}

impl CheckerInput {
    /// The checker's view of a run's recorded history (`crate::history`):
    /// the attempt rows of its writes, its granted acquires as grants, its
    /// final rows, its faults. It reads nothing else, so a verdict is a
    /// function of the JSON lines alone. A mode or a fault kind the lab
    /// does not know is an error naming it, never a skipped line.
    pub fn from_record(record: &Record) -> Result<CheckerInput> {
        let attempts = record.ops.iter().filter_map(|o| o.attempt.clone()).collect();
        let mut grants = Vec::new();
        for op in record.ops.iter().filter(|o| o.f == Operation::Acquire && o.outcome == Outcome::Ok) {
            let (Some(token), Some(holding)) = (op.token, op.holding) else {
                return Err(format!("op {}: a granted acquire without its token or holding number", op.id).into());
            };
            grants.push(GrantRecord { holder: op.holder.clone(), incarnation: op.incarnation, holding, token });
        }
        let final_parts = record.finals.clone();
        let faults = record.faults.iter().map(|f| Fault { kind: f.kind }).collect();
        Ok(CheckerInput { attempts, grants, final_parts, faults })
    }
}
