//! A run of cases as data: what `lab run --out FILE.txt` writes beside its
//! transcript as `FILE.json` (the evidence run: `evidence/26/output.json`),
//! and what the book's facts read. [`ResultData::read`] is its one reader.

use super::runner::CaseTime;
use crate::error::Result;
use crate::result_data::ResultData;
use crate::stats::ms;
use crate::transcript::{CaseData, Transcript};
use serde::{Deserialize, Serialize};

/// A run of cases.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunData {
    /// The format's version ([`ResultData::SCHEMA`]).
    pub schema: u32,
    /// Checks that held, over the run.
    pub passed: u32,
    /// Checks that failed.
    pub failed: u32,
    /// Each case: its lines, counts and figures.
    pub cases: Vec<CaseData>,
    /// How long each case took, in the order run.
    pub times: Vec<CaseTiming>,
}

/// How long one case took, and how much of it the experiment waited by design.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseTiming {
    /// `F4`.
    pub id: String,
    /// From its header to its last line.
    pub elapsed_ms: f64,
    /// The waits the experiment needs (the rest is the lab's overhead).
    pub designed_ms: f64,
}

impl RunData {
    /// The run `t` holds, with each case's time.
    pub fn of(t: &Transcript, times: &[(&str, CaseTime)]) -> RunData {
        RunData {
            schema: <RunData as ResultData>::SCHEMA,
            passed: t.passed(),
            failed: t.failed(),
            cases: t.cases().to_vec(),
            times: times.iter().map(|(id, time)| CaseTiming { id: (*id).into(), elapsed_ms: ms(time.elapsed), designed_ms: ms(time.designed) }).collect(),
        }
    }

    /// The case `id`, or an error naming it.
    pub fn case(&self, id: &str) -> Result<&CaseData> {
        self.cases.iter().find(|c| c.id == id).ok_or_else(|| format!("the run has no case {id}").into())
    }
}

impl ResultData for RunData {
    const SCHEMA: u32 = 1;
    fn schema(&self) -> u32 {
        self.schema
    }
}
