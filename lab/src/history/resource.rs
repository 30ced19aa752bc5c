//! The resource's half of a history, read from `res26` in one snapshot:
//! every write attempt (with the floor its statement saw and the server's
//! time of it) and the rows that stayed.

use super::hundredths;
use crate::resource::{attempt_from, part_from, ATTEMPTS};
use crate::error::{Result, ResultExt};
use crate::vocabulary::{FenceMode, StoredPart, WriteAttempt};
use postgres::{Client, IsolationLevel};

/// What the resource recorded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resource {
    /// Every write attempt, in `write_attempt.id` order.
    pub attempts: Vec<WriteAttempt>,
    /// The rows of `report_part`, one per (scope, part).
    pub finals: Vec<StoredPart>,
}

// ANCHOR: final_parts
/// The rows of the report that stayed: one per (scope, part), the primary
/// key; the columns `part_from` reads.
pub const FINAL_PARTS: &str = "
    SELECT scope, part, content, writer, token
      FROM report_part
     ORDER BY scope, part";
// ANCHOR_END: final_parts

// ANCHOR: load
/// Reads the resource's record of a run whose writes `mode` judged (or,
/// with `None`, one mode, whichever it was), with times from `t0_unix_ms`.
/// An attempt judged by another mode means the tables were not the run's
/// own, and is an error.
pub fn read_resource(client: &mut Client, mode: Option<FenceMode>, t0_unix_ms: f64) -> Result<Resource> {
    // One REPEATABLE READ snapshot for both reads: a write that commits while
    // the history is read (a holder the run failed to stop) is then in both
    // or in neither, and cannot show up as an attempt above a final row that
    // the first read already took (a false lost write).
    let mut tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .context("starting the history snapshot")?;
    let mut attempts: Vec<WriteAttempt> = Vec::new();
    for r in tx.query(ATTEMPTS, &[]).context("reading write_attempt")? {
        let mut attempt = attempt_from(&r, t0_unix_ms)?;
        attempt.at_ms = hundredths(attempt.at_ms);
        if let Some(expected) = mode.or_else(|| attempts.first().map(|a| a.mode)).filter(|m| *m != attempt.mode) {
            return Err(format!("write_attempt {} was judged by {}, not by this run's {expected}", attempt.id, attempt.mode).into());
        }
        attempts.push(attempt);
    }
    let finals = tx.query(FINAL_PARTS, &[]).context("reading report_part")?.iter().map(part_from).collect::<Result<Vec<StoredPart>>>()?;
    tx.commit().context("ending the history snapshot")?;
    Ok(Resource { attempts, finals })
}
// ANCHOR_END: load
