//! A chaos run's history as the checker reads it: the write attempts and
//! final parts the resource recorded, the grants the holders reported, the
//! faults the nemesis injected; taken from the run's whole record
//! ([`History::from_record`]), or written by hand in a test.

use crate::vocabulary::FaultKind;
use crate::error::Result;
use crate::history::Record;
use crate::vocabulary::FenceMode;


/// One write attempt, as `write_attempt` records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// `write_attempt.id`: the order of recording, which for an accepted
    /// `FENCED_SCOPE` attempt is the order of acceptance.
    pub id: i64,
    /// The fenced scope, e.g. `daily-report`.
    pub scope: String,
    /// The part within the scope, e.g. `summary`.
    pub part: String,
    /// The holder that wrote, e.g. `holder-a`.
    pub writer: String,
    /// The fencing token the write carried.
    pub token: i64,
    /// The resource mode that judged it.
    pub mode: FenceMode,
    /// Whether the resource accepted it.
    pub accepted: bool,
    /// The scope's `fence_floor.max_token` as read by the statement that
    /// recorded the attempt; `None` when it was not recorded. For id order
    /// to be the order of these reads, the recording statement must read the
    /// floor under a share lock of the floor row (`FOR SHARE`); otherwise a
    /// refused attempt recorded while an accepted one has not yet committed
    /// would read the older floor after the newer one (a false regression).
    pub floor_after: Option<i64>,
}

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

/// One row of `report_part` after the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinalPart {
    /// The scope, e.g. `daily-report`.
    pub scope: String,
    /// The part, e.g. `summary`; (scope, part) is the table's primary key.
    pub part: String,
    /// Who wrote the row that stayed.
    pub writer: String,
    /// With which token.
    pub token: i64,
}

/// One fault the nemesis injected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What it was: a pause shorter or longer than the ttl (SIGSTOP), a
    /// kill (SIGKILL and restart), a delay (a write held in the proxy), a
    /// database restart (an immediate stop and a start).
    pub kind: FaultKind,
}

/// Everything a chaos run leaves behind, as the checker reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// Every write attempt, accepted or refused, in `write_attempt.id`
    /// order ([`check`] sorts by id anyway).
    pub attempts: Vec<Attempt>,
    /// Every successful acquire the holders reported.
    pub grants: Vec<GrantRecord>,
    /// The resource's rows after the run, one per (scope, part).
    pub final_parts: Vec<FinalPart>,
    /// The nemesis's faults, in the order it injected them.
    pub faults: Vec<Fault>,
}

impl History {
    /// The checker's view of a run's recorded history (`crate::history`):
    /// the attempt rows of its writes, its granted acquires as grants, its
    /// final rows, its faults. It reads nothing else, so a verdict is a
    /// function of the JSON lines alone. A mode or a fault kind the lab
    /// does not know is an error naming it, never a skipped line.
    pub fn from_record(record: &Record) -> Result<History> {
        let mut attempts = Vec::new();
        for row in record.ops.iter().filter_map(|o| o.attempt.as_ref()) {
            let mode = FenceMode::ALL.into_iter().find(|m| m.name() == row.mode).ok_or_else(|| format!("write_attempt {}: unknown mode {:?}", row.id, row.mode))?;
            attempts.push(Attempt {
                id: row.id,
                scope: row.scope.clone(),
                part: row.part.clone(),
                writer: row.writer.clone(),
                token: row.token,
                mode,
                accepted: row.accepted,
                floor_after: row.floor_after,
            });
        }
        let mut grants = Vec::new();
        for op in record.ops.iter().filter(|o| o.f == "acquire" && o.outcome == "ok") {
            let (Some(token), Some(holding)) = (op.token, op.holding) else {
                return Err(format!("op {}: a granted acquire without its token or holding number", op.id).into());
            };
            grants.push(GrantRecord { holder: op.holder.clone(), incarnation: op.incarnation, holding, token });
        }
        let final_parts = record
            .finals
            .iter()
            .map(|r| FinalPart { scope: r.scope.clone(), part: r.part.clone(), writer: r.writer.clone(), token: r.token })
            .collect();
        let mut faults = Vec::new();
        for f in &record.faults {
            let kind = FaultKind::ALL.into_iter().find(|k| k.name() == f.kind).ok_or_else(|| format!("fault {}: unknown kind {:?}", f.id, f.kind))?;
            faults.push(Fault { kind });
        }
        Ok(History { attempts, grants, final_parts, faults })
    }
}
