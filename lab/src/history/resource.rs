//! The resource's half of a history, read from `res26` in one snapshot:
//! every write attempt (with the floor its statement saw and the server's
//! time of it) and the rows that stayed.

use super::{hundredths, AttemptRow, FinalRow};
use crate::error::{Result, ResultExt};
use crate::vocabulary::FenceMode;
use postgres::{Client, IsolationLevel};

/// What the resource recorded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resource {
    /// Every write attempt, in `write_attempt.id` order.
    pub attempts: Vec<AttemptRow>,
    /// The rows of `report_part`, one per (scope, part).
    pub finals: Vec<FinalRow>,
}

// ANCHOR: load_sql
/// Every write attempt, in the order of recording, with the server's time
/// of it in ms since the epoch (the parent's calls use the same clock).
///
/// `floor_after` is the scope's floor as the recording statement read it;
/// for `id` order to be the order of these reads, the recording statement
/// reads the floor under a share lock of the floor row (`FOR SHARE`):
/// otherwise a refused attempt recorded while an accepted one has not yet
/// committed would read the older floor after the newer one (a false
/// regression). Run in the same snapshot as [`FINAL_PARTS`].
pub const ATTEMPTS: &str = "
    SELECT id, scope, part, writer, token, mode, accepted, floor_after,
           extract(epoch FROM attempted_at)::float8 * 1000
      FROM write_attempt
     ORDER BY id";

/// The rows of the report that stayed: one per (scope, part), the primary key.
pub const FINAL_PARTS: &str = "
    SELECT scope, part, writer, token
      FROM report_part
     ORDER BY scope, part";
// ANCHOR_END: load_sql

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
    let mut attempts = Vec::new();
    for r in tx.query(ATTEMPTS, &[]).context("reading write_attempt")? {
        let (id, judged_by): (i64, String) = (r.get(0), r.get(5));
        let expected = mode.map(|m| m.name().to_owned()).or_else(|| attempts.first().map(|a: &AttemptRow| a.mode.clone()));
        if let Some(expected) = expected.filter(|m| *m != judged_by) {
            return Err(format!("write_attempt {id} was judged by {judged_by}, not by this run's {expected}").into());
        }
        let at: f64 = r.get(8);
        attempts.push(AttemptRow {
            id,
            scope: r.get(1),
            part: r.get(2),
            writer: r.get(3),
            token: r.get(4),
            mode: judged_by,
            accepted: r.get(6),
            floor_after: r.get(7),
            at_ms: hundredths(at - t0_unix_ms),
        });
    }
    let finals = tx
        .query(FINAL_PARTS, &[])
        .context("reading report_part")?
        .iter()
        .map(|r| FinalRow { scope: r.get(0), part: r.get(1), writer: r.get(2), token: r.get(3) })
        .collect();
    tx.commit().context("ending the history snapshot")?;
    Ok(Resource { attempts, finals })
}
// ANCHOR_END: load
