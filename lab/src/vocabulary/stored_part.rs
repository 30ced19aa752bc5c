//! A row of `report_part`: which part of which scope, what it holds, and
//! who wrote it with which token.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One row of `report_part`: what a case reads back after a write, what a
/// history records after a run, what the checker compares accepted writes
/// with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredPart {
    /// The scope, e.g. `daily-report`.
    pub scope: String,
    /// The part, e.g. `summary`; (scope, part) is the table's primary key.
    pub part: String,
    /// What was written, e.g. `rows=201(B)`.
    pub content: String,
    /// Who wrote the row that stayed.
    pub writer: String,
    /// With which token.
    pub token: i64,
}

impl fmt::Display for StoredPart {
    /// As a transcript shows it: `rows=201(B) by holder-b token=2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} by {} token={}", self.content, self.writer, self.token)
    }
}
