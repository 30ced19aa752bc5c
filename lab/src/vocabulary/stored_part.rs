//! A row of `report_part`: which part of which scope, and who wrote it with
//! which token.

use serde::{Deserialize, Serialize};

/// One row of `report_part` (its content aside), as a history records it
/// after a run and the checker compares accepted writes with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredPart {
    /// The scope, e.g. `daily-report`.
    pub scope: String,
    /// The part, e.g. `summary`; (scope, part) is the table's primary key.
    pub part: String,
    /// Who wrote the row that stayed.
    pub writer: String,
    /// With which token.
    pub token: i64,
}
