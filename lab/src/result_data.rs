//! Results as data: each measured run writes what it found as JSON beside
//! the files a reader looks at (a transcript, a Markdown table, charts),
//! and everything that needs its numbers (the book's facts, the tables
//! redrawn, the tests) reads this data back, never the text.
//!
//! One trait for every such file: written pretty and whole (a diff shows
//! which figure moved; a reader never finds half a file), read back with
//! its schema checked. A missing field is an error that names the file and
//! the field (serde's message), never a default.
//!
//! The formats, each with its one reader:
//! - a run of cases: `cases::run_data::RunData` (`evidence/26/output.json`);
//! - the chaos run's table: `chaos::results::ChaosData` (`chaos.json`);
//! - the model's tables: `model::results::{ModelData, MutantsData}`
//!   (`model.json`, `model-mutants.json`);
//! - the lease stores' table: `lease_stores::StoresData` (`lease-stores.json`);
//! - the bench's rows: its CSV, `bench::report::rows_from_csv` (`bench.csv`);
//! - a run's history: JSON lines, `history::Record::from_jsonl`;
//! - a transcript's text: `transcript::Line::read`; a locked snapshot:
//!   `evidence::snapshot_body`.

use crate::error::{Result, ResultExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::Path;

/// A result file's data.
pub trait ResultData: Serialize + DeserializeOwned {
    /// The format's version: a reader refuses another.
    const SCHEMA: u32;

    /// The version this data says it is.
    fn schema(&self) -> u32;

    /// Writes it to `path`, pretty and whole.
    fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("result data serialises") + "\n";
        crate::paths::write_whole(path, &text).with_context(|| format!("writing {}", path.display()))
    }

    /// Reads it from `path`: an error names the file, and the field that is
    /// missing or wrong.
    fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let data: Self = serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
        if data.schema() != Self::SCHEMA {
            return Err(format!("{}: schema {} is not {}", path.display(), data.schema(), Self::SCHEMA).into());
        }
        Ok(data)
    }
}
