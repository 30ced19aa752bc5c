//! The model checker's tables as data: what `lab model --out FILE.md`
//! writes beside its table as `FILE.json`, and `--mutants --out` beside its
//! own; what the book's facts read. [`ResultData::read`] is their
//! one reader.

use super::store::StoreKind;
use super::table::{ConfigCheck, MutantCheck, Scale};
use super::Bounds;
use crate::error::Result;
use crate::result_data::ResultData;
use crate::vocabulary::FenceMode;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Every configuration checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelData {
    /// The format's version ([`ResultData::SCHEMA`]).
    pub schema: u32,
    /// How many holders the model runs.
    pub holders: usize,
    /// How many acquires may be attempted in all.
    pub acquires: u8,
    /// How many crashes in all.
    pub crashes: u8,
    /// The whole table's time, in seconds.
    pub seconds: f64,
    /// On how many threads (one configuration each at a time).
    pub threads: usize,
    /// The checker's peak resident memory after the table, in bytes.
    pub peak_memory: u64,
    /// One row per configuration, in the table's order.
    pub configurations: Vec<ConfigData>,
    /// Beyond two holders: the same configurations without symmetry.
    pub unreduced: Option<UnreducedData>,
}

/// The table searched without symmetry: what the reduction saves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnreducedData {
    /// Distinct states in all.
    pub states: usize,
    /// Its time, in seconds, on the same threads.
    pub seconds: f64,
}

/// One configuration's check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigData {
    /// The resource mode.
    pub mode: FenceMode,
    /// The lease store.
    pub store: StoreKind,
    /// Distinct states explored.
    pub states: usize,
    /// Its time, in seconds.
    pub seconds: f64,
    /// Whether the check meant something (states explored, every example found).
    pub meaningful: bool,
    /// The invariants broken, most important first; empty: safe.
    pub broken: Vec<String>,
    /// The steps of the headline counterexample, when one broke.
    pub counterexample_steps: Option<usize>,
}

/// The model against the mutations that have a counterpart in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MutantsData {
    /// The format's version ([`ResultData::SCHEMA`]).
    pub schema: u32,
    /// The table's time, in seconds.
    pub seconds: f64,
    /// One row per patch with a counterpart.
    pub patches: Vec<MutantData>,
}

/// One mutation checked by the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MutantData {
    /// The patch's name in `mutants/`.
    pub patch: String,
    /// The mode it was checked in.
    pub mode: FenceMode,
    /// On which store.
    pub store: StoreKind,
    /// Distinct states explored.
    pub states: usize,
    /// The invariants that broke with it and hold without, with the steps
    /// of each one's shortest counterexample; empty: it survived.
    pub caught_by: Vec<(String, usize)>,
}

impl ModelData {
    /// The table's checks as data.
    pub fn of(checks: &[ConfigCheck], scale: &Scale) -> ModelData {
        let bounds = checks.first().map_or(Bounds::TABLE, |c| c.config.bounds);
        let configurations = checks
            .iter()
            .map(|c| ConfigData {
                mode: c.config.mode,
                store: c.config.store,
                states: c.states,
                seconds: c.took.as_secs_f64(),
                meaningful: c.is_meaningful(),
                broken: c.broken.iter().map(|(n, _)| (*n).to_owned()).collect(),
                counterexample_steps: c.counterexample().map(|(_, path)| path.clone().into_actions().len()),
            })
            .collect();
        let unreduced = scale.plain.map(|p| UnreducedData { states: p.checks.iter().map(|c| c.states).sum(), seconds: p.took.as_secs_f64() });
        ModelData {
            schema: <ModelData as ResultData>::SCHEMA,
            holders: bounds.holders,
            acquires: bounds.acquires,
            crashes: bounds.crashes,
            seconds: scale.took.as_secs_f64(),
            threads: scale.threads,
            peak_memory: scale.memory,
            configurations,
            unreduced,
        }
    }

    /// The row of `mode` on `store`, or an error naming them.
    pub fn configuration(&self, mode: FenceMode, store: StoreKind) -> Result<&ConfigData> {
        self.configurations.iter().find(|c| c.mode == mode && c.store == store).ok_or_else(|| format!("the model's table has no row for {mode} on {}", store.name()).into())
    }
}

impl MutantsData {
    /// The mutants' checks as data.
    pub fn of(rows: &[MutantCheck], took: Duration) -> MutantsData {
        let patches = rows
            .iter()
            .map(|r| MutantData {
                patch: r.patch.to_owned(),
                mode: r.verdict.config.mode,
                store: r.verdict.config.store,
                states: r.verdict.states,
                caught_by: r.caught_by.iter().map(|(n, len)| ((*n).to_owned(), *len)).collect(),
            })
            .collect();
        MutantsData { schema: <MutantsData as ResultData>::SCHEMA, seconds: took.as_secs_f64(), patches }
    }
}

impl ResultData for ModelData {
    /// 2: threads, peak memory and the unreduced search (symmetry).
    const SCHEMA: u32 = 2;
    fn schema(&self) -> u32 {
        self.schema
    }
}

impl ResultData for MutantsData {
    const SCHEMA: u32 = 1;
    fn schema(&self) -> u32 {
        self.schema
    }
}
