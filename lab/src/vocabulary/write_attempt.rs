//! One row of `write_attempt`: the resource's record of a write it judged.

use super::FenceMode;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A row of `write_attempt`, as the cases, the checker and a history read it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WriteAttempt {
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
    /// recorded the attempt; `None` when it was not recorded (no floor row).
    /// For id order to be the order of these reads, the recording statement
    /// must read the floor under a share lock of the floor row (`FOR
    /// SHARE`); otherwise a refused attempt recorded while an accepted one
    /// has not yet committed would read the older floor after the newer one
    /// (a false regression).
    pub floor_after: Option<i64>,
    /// `attempted_at`, by the server's clock, in ms from the origin its
    /// reader chose: the run's start in a history, the Unix epoch elsewhere.
    pub at_ms: f64,
}

/// `holder-a summary 2 accepted` (or `refused`): one attempt as F18's
/// transcript lines list a short history.
impl fmt::Display for WriteAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {} {}", self.writer, self.part, self.token, if self.accepted { "accepted" } else { "refused" })
    }
}
