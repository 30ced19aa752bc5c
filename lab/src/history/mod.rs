//! A run's history, whole: every call a holder made to a server, from call
//! to return; the resource's record of every write attempt (the floor it
//! saw, whether it was accepted); every fault injected, from start to end;
//! the rows that stayed. It is written as JSON lines (one entry a line,
//! below) that other checkers can read, and drawn as one self-contained
//! HTML page (`page`). The chaos checker's verdict is a function of the
//! lines alone (`chaos::checker::CheckerInput::from_record`), so a reader
//! can check a run again from its file.
//!
//! Where each part comes from, each from where it happened:
//! - the operations from the holders' `CALL`/`RETURN` lines, stamped by
//!   the parent as they arrived ([`crate::call_log`]; paired in `build`);
//! - each write's attempt row from `res26.write_attempt`, and the final
//!   rows from `report_part`, read in one snapshot (`resource`);
//! - the faults from whoever injected them: the chaos nemesis's log, or a
//!   case's signals and proxy (see `events`);
//! - one clock for all: the machine's wall clock, which the parent and the
//!   server both read. Times are milliseconds from the run's start (`t0`).
//!
//! # The JSON lines (schema 2)
//!
//! Every line is one object whose `type` says what it is; the first line is
//! the run, then the operations in the order they were invoked, the faults
//! in the order they began, and the final rows. Times are milliseconds
//! since `t0_unix_ms`, to the hundredth.
//!
//! - `run`: `schema` (2), `name` (`chaos-fenced-row`, `F4`), `command`
//!   (what ran), `mode` (the resource mode, e.g. `FENCED_ROW`; null when no
//!   write was judged), `t0_unix_ms`,
//!   `end_ms`, `fault_kinds` (every kind the run could inject, those it
//!   never did included), `holders` (the holder names).
//! - `op`: one call of one holder process. `id` (1… in invoke order),
//!   `holder`, `incarnation`, `process` (the parent's number of the holder
//!   process), `f` (`acquire`, `renew`, `write`, `release`), `invoke_ms`,
//!   `complete_ms` (null: it never returned: killed, or the run ended),
//!   `outcome` (`ok`, `fail`: refused, `info`: an error or no return, so
//!   it may have happened), and, where they apply (absent otherwise):
//!   `token`, `part`, `tries` (an acquire's statements), `code` (an
//!   `info`'s error), `holding` (a granted acquire's number within its
//!   incarnation), and for a write `attempt`:
//!   the resource's row (`id`, `scope`, `part`, `writer`, `token`, `mode`,
//!   `accepted`, `floor_after`, `at_ms` by the server's clock). A write
//!   attempt whose call was not heard is an op with null times.
//! - `fault`: `id`, `kind` (`pause-long`, `delay`, `db-restart`, … any
//!   kind of `fault_kinds`), `targets` (holder names; empty: the server),
//!   `start_ms`, `end_ms` (null: no end was recorded, e.g. a kill).
//! - `final`: a row of `report_part` after the run: `scope`, `part`,
//!   `content`, `writer`, `token`.

mod build;
pub mod page;
mod resource;

pub use build::ops_from_calls;
pub use resource::{read_resource, Resource, FINAL_PARTS};

use crate::error::{Result, ResultExt};
use crate::paths;
use crate::safe_dir::SafeDir;
use crate::vocabulary::{FaultKind, FenceMode, Operation, Outcome, StoredPart, WriteAttempt};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

// ANCHOR: schema
/// The schema the lines follow (2: a final part holds its content too).
pub const SCHEMA: u32 = 2;

/// The run a history is of.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The schema, [`SCHEMA`].
    pub schema: u32,
    /// The run's name, which names its files: `chaos-fenced-row`, `F4`.
    pub name: String,
    /// What ran, as a reader would type it.
    pub command: String,
    /// The resource mode the writes were judged by; `None` when no write
    /// was judged (the holders made other calls only).
    pub mode: Option<FenceMode>,
    /// The run's start on the wall clock, in ms since the Unix epoch.
    pub t0_unix_ms: f64,
    /// The run's end, in ms from the start.
    pub end_ms: f64,
    /// Every kind of fault the run could inject, in order.
    pub fault_kinds: Vec<FaultKind>,
    /// The holders, in order.
    pub holders: Vec<String>,
}

/// One call of one holder process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// 1… in the order of invocation.
    pub id: u64,
    /// The holder, e.g. `holder-a`.
    pub holder: String,
    /// Which start of the holder (a lane of the page).
    pub incarnation: u32,
    /// The parent's number of the holder process.
    pub process: u64,
    /// What it did.
    pub f: Operation,
    /// When it was invoked; `None` for a write attempt whose call was not heard.
    pub invoke_ms: Option<f64>,
    /// When it returned; `None` if it never did.
    pub complete_ms: Option<f64>,
    /// How it returned.
    pub outcome: Outcome,
    /// The token it carried (renew, write, release) or got (acquire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<i64>,
    /// A write's part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// An acquire's statements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tries: Option<u32>,
    /// An `info`'s error code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// A granted acquire's holding number within its incarnation (1…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holding: Option<u32>,
    /// A write's row in `write_attempt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<WriteAttempt>,
}

/// One fault, from start to end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FaultSpan {
    /// 1… in the order they began.
    pub id: u64,
    /// Its kind.
    pub kind: FaultKind,
    /// The holders it hit; empty when it hit the server.
    pub targets: Vec<String>,
    /// When it began.
    pub start_ms: f64,
    /// When it ended; `None` when no end was recorded.
    pub end_ms: Option<f64>,
}

/// One line of the file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Entry {
    Run(RunInfo),
    Op(Op),
    Fault(FaultSpan),
    Final(StoredPart),
}
// ANCHOR_END: schema

/// A run's history.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// The run.
    pub run: RunInfo,
    /// The operations, in invoke order.
    pub ops: Vec<Op>,
    /// The faults, in the order they began.
    pub faults: Vec<FaultSpan>,
    /// The rows that stayed.
    pub finals: Vec<StoredPart>,
}

/// What a checker found about one operation (or the acquires of one
/// token), as the page shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// What it was.
    pub kind: FindingKind,
    /// The write attempt it is about, or, for a token reused, the token.
    pub on: Target,
    /// Why, in a sentence.
    pub reason: String,
}

/// What a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A write attempt, by `write_attempt.id`.
    Attempt(i64),
    /// Every granted acquire of a token.
    Token(i64),
}

/// The kinds of finding, one per count of the chaos verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FindingKind {
    /// A stale write accepted (I3).
    Stale,
    /// A token granted to two holdings (I2).
    Reused,
    /// A floor that went down (I3).
    Regression,
    /// An accepted write that vanished.
    Lost,
}

impl FindingKind {
    /// Every kind, in the verdict's order.
    pub const ALL: [FindingKind; 4] = [FindingKind::Stale, FindingKind::Reused, FindingKind::Regression, FindingKind::Lost];

    /// The name a page's filter and a link use: `#only=stale`.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Stale => "stale",
            FindingKind::Reused => "reused",
            FindingKind::Regression => "regression",
            FindingKind::Lost => "lost",
        }
    }
}

/// Milliseconds to the hundredth: what the file keeps.
pub fn hundredths(ms: f64) -> f64 {
    (ms * 100.0).round() / 100.0
}

impl Record {
    /// A history with nothing in it yet, of the run `name` in `mode`.
    pub fn empty(name: &str, mode: FenceMode) -> Record {
        let run = RunInfo {
            schema: SCHEMA,
            name: name.into(),
            command: String::new(),
            mode: Some(mode),
            t0_unix_ms: 0.0,
            end_ms: 0.0,
            fault_kinds: Vec::new(),
            holders: Vec::new(),
        };
        Record { run, ops: Vec::new(), faults: Vec::new(), finals: Vec::new() }
    }

    /// The JSON lines.
    pub fn to_jsonl(&self) -> String {
        let entries = std::iter::once(Entry::Run(self.run.clone()))
            .chain(self.ops.iter().cloned().map(Entry::Op))
            .chain(self.faults.iter().cloned().map(Entry::Fault))
            .chain(self.finals.iter().cloned().map(Entry::Final));
        let mut out = String::new();
        for entry in entries {
            out.push_str(&serde_json::to_string(&entry).expect("a history serialises"));
            out.push('\n');
        }
        out
    }

    /// Reads the JSON lines: the run first, then anything; a line that is
    /// no entry is an error naming it.
    pub fn from_jsonl(text: &str) -> Result<Record> {
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let run = match lines.next().map(|(n, l)| (n, serde_json::from_str::<Entry>(l))) {
            Some((_, Ok(Entry::Run(run)))) if run.schema == SCHEMA => run,
            Some((_, Ok(Entry::Run(run)))) => return Err(format!("schema {} is not {SCHEMA}", run.schema).into()),
            Some((n, Ok(_))) => return Err(format!("line {}: the first line must be the run", n + 1).into()),
            Some((n, Err(e))) => return Err(format!("line {}: {e}", n + 1).into()),
            None => return Err("an empty history".into()),
        };
        // The run's name becomes the page's file name and its link to the
        // JSON lines: a file from anywhere must not name a path or a scheme.
        if !is_run_name(&run.name) {
            return Err(format!("line 1: the run's name {:?} is not a run name (letters, digits, '.', '_', '-'; not starting with '.')", run.name).into());
        }
        let mut record = Record { run, ops: Vec::new(), faults: Vec::new(), finals: Vec::new() };
        for (n, line) in lines {
            match serde_json::from_str::<Entry>(line).with_context(|| format!("line {}", n + 1))? {
                Entry::Run(_) => return Err(format!("line {}: a second run line", n + 1).into()),
                Entry::Op(op) => record.ops.push(op),
                Entry::Fault(fault) => record.faults.push(fault),
                Entry::Final(row) => record.finals.push(row),
            }
        }
        Ok(record)
    }

    /// The number of a holder incarnation's lane on the page: holders in
    /// their order, each one's incarnations in theirs.
    pub fn lanes(&self) -> Vec<(String, u32)> {
        let mut lanes: Vec<(String, u32)> = self.ops.iter().map(|o| (o.holder.clone(), o.incarnation)).collect();
        let rank = |h: &str| self.run.holders.iter().position(|x| x == h).unwrap_or(usize::MAX);
        lanes.sort_by(|a, b| (rank(&a.0), &a.0, a.1).cmp(&(rank(&b.0), &b.0, b.1)));
        lanes.dedup();
        lanes
    }
}

/// Whether `name` can name a run's files: `F4`, `F12-unfenced`,
/// `chaos-fenced-row` — never a path (`../x`), a URL scheme
/// (`javascript:`) or a hidden file.
pub fn is_run_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Where a run's history files go: beside its transcripts and timelines.
pub fn dir() -> PathBuf {
    match std::env::var_os("LAB_CLUSTER_DIR") {
        Some(dir) => PathBuf::from(dir).join("history"),
        None => paths::build_dir().join("history"),
    }
}

/// Writes `<name>.jsonl` and `<name>.html` into `folder`, each whole; the
/// page's path.
pub fn save(folder: &Path, record: &Record, findings: &[Finding]) -> Result<PathBuf> {
    let name = &record.run.name;
    SafeDir::own_folder(folder)?.write_whole(&format!("{name}.jsonl"), &record.to_jsonl(), 0o644)?;
    save_page(folder, record, findings)
}

/// Writes only `<name>.html` into `folder` (from JSON lines read there); its path.
pub fn save_page(folder: &Path, record: &Record, findings: &[Finding]) -> Result<PathBuf> {
    let name = &record.run.name;
    SafeDir::own_folder(folder)?.write_whole(&format!("{name}.html"), &page::render(record, findings), 0o644)?;
    Ok(folder.join(format!("{name}.html")))
}

/// The JSON lines of run `run`: a path to a `.jsonl` file, or a run's name,
/// looked for among the lab's own histories and then the evidence's.
pub fn find(run: &str) -> Result<PathBuf> {
    if run.ends_with(".jsonl") {
        return std::path::absolute(run).with_context(|| format!("resolving {run}"));
    }
    let places = [dir(), paths::evidence_dir().join("history")];
    places.iter().map(|d| d.join(format!("{run}.jsonl"))).find(|p| p.is_file()).ok_or_else(|| {
        format!("no history of {run} in {} or {}: run it first (./run.sh F4, ./run.sh chaos …)", places[0].display(), places[1].display()).into()
    })
}

#[cfg(test)]
mod tests;
