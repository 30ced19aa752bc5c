//! A chaos run's history as the checker reads it: the write attempts and
//! final parts from the resource (read by [`load`], in one snapshot), the
//! grants the holders reported, the faults the nemesis injected.

use crate::chaos::schedule::FaultKind;
use crate::error::{Result, ResultExt};
use crate::resource::FenceMode;
use postgres::{Client, IsolationLevel};


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

// ANCHOR: load_sql
/// Every write attempt, in the order of recording.
///
/// `floor_after` is the scope's floor as the recording statement read it
/// (see [`Attempt::floor_after`]); the workload adds that column to
/// `write_attempt`. Run in the same snapshot as [`FINAL_PARTS`].
pub const ATTEMPTS: &str = "
    SELECT id, scope, part, writer, token, mode, accepted, floor_after
      FROM write_attempt
     ORDER BY id";

/// The rows of the report that stayed: one per (scope, part), the primary key.
pub const FINAL_PARTS: &str = "
    SELECT scope, part, writer, token
      FROM report_part
     ORDER BY scope, part";
// ANCHOR_END: load_sql

// ANCHOR: load
/// Reads the resource's half of a history of a run in `mode` from `res26`:
/// the attempts and the final parts. An attempt judged by another mode
/// means the tables were not the run's own, and is an error. Grants and
/// faults come from the holders' and the nemesis's logs; they are left
/// empty here for the run to fill in (and an empty grants log leaves the
/// verdict with nothing to judge).
pub fn load(client: &mut Client, mode: FenceMode) -> Result<History> {
    // One REPEATABLE READ snapshot for both reads: a write that commits while
    // the checker reads (a holder the run failed to stop) is then in both or
    // in neither, and cannot show up as an attempt above a final row that the
    // first read already took (a false lost write).
    let mut tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .context("starting the history snapshot")?;
    let mut attempts = Vec::new();
    for r in tx.query(ATTEMPTS, &[]).context("reading write_attempt")? {
        let (id, judged_by): (i64, String) = (r.get(0), r.get(5));
        if judged_by != mode.name() {
            return Err(format!("write_attempt {id} was judged by {judged_by}, not by this run's {mode}").into());
        }
        attempts.push(Attempt {
            id,
            scope: r.get(1),
            part: r.get(2),
            writer: r.get(3),
            token: r.get(4),
            mode,
            accepted: r.get(6),
            floor_after: r.get(7),
        });
    }
    let final_parts = tx
        .query(FINAL_PARTS, &[])
        .context("reading report_part")?
        .iter()
        .map(|r| FinalPart { scope: r.get(0), part: r.get(1), writer: r.get(2), token: r.get(3) })
        .collect();
    tx.commit().context("ending the history snapshot")?;
    Ok(History { attempts, grants: Vec::new(), final_parts, faults: Vec::new() })
}
// ANCHOR_END: load
