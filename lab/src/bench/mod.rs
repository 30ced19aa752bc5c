//! `lab bench`: what fencing costs, measured on the reader's own machine.
//!
//! The article gives no figure for latency or throughput; an engineer
//! deciding whether to fence wants one. The bench times each resource
//! mode's write through the very `ResourceStore::write` the cases prove (no
//! copy of its SQL), side by side, in one run, on one cluster with the
//! server's durability settings as they are (`fsync` and
//! `synchronous_commit` are read with `SHOW` and printed with the table).
//!
//! The design, and why:
//! - **Cells.** A cell is one mode with 1, 4, 16 or 64 writers, on 1, 16,
//!   1,000 or 10,000 scopes (`--writers` and `--scopes` name fewer). With
//!   fewer scopes than writers, writer *i* writes scope *i* mod the scopes,
//!   so writers share floor rows; with more, writer *i* writes scopes *i*,
//!   *i* + writers, … in turn, so every scope is written and none by two.
//!   Each writer is a thread with its own connection, as each instance of
//!   the report job has its own. The two version-store modes write objects
//!   of their own (see `writers::scope_in`), so neither moves the other's
//!   versions between slices.
//! - **The workload models the report job.** Every writer holds the same
//!   grant (token 1: one holding, written many times; equal tokens pass),
//!   so every fenced write is accepted and the bench measures the cost of a
//!   fence that says yes, which is what fencing costs in the normal path.
//!   Each writer rewrites its own few parts in turn, as the job rewrites a
//!   report's parts on every run: after a warm-up every write is an
//!   overwrite, the path F4–F7 exercise, and the tables stay small. Parts
//!   are the writer's own, so unfenced writers never wait for each other:
//!   the only row contention measured is the one the fence adds.
//! - **Every write is checked.** After a cell the bench counts the cell's
//!   rows in `write_attempt` and compares them with what the writers
//!   counted; refusals (none expected) are shown in the table.
//! - **Why a mode costs what it costs.** With `fsync` on, a commit waits
//!   for its WAL to reach the disk, and with many writers the server is
//!   mostly writing and flushing WAL. The table shows the WAL bytes each
//!   mode's write generates (the WAL insert position before and after each
//!   slice), which is where a fence's price shows.
//! - **Fair order.** The modes of one concurrency are measured
//!   together: one team of writers switches mode every slice of a quarter
//!   of a second, mode after mode, until each mode has written for the
//!   cell's time (see [`writers`]), so a disk or a neighbour that slows the
//!   machine slows every mode alike. (One team, not one per mode: seven
//!   teams of 64 writers would need 448 connections, and the cluster allows
//!   250.) Each group starts from a fresh resource schema and a
//!   `CHECKPOINT`. The whole table is measured `--runs` times and shows the
//!   median of the runs, with the lowest and highest run beside it. A
//!   mode's ratio to `unfenced` is the median, over every round of every
//!   run, of its slice's rate over the `unfenced` slice's of the same
//!   round: pairs measured within one round (seven slices) of each other, and a stall that
//!   hits one slice moves one pair only; the quartiles of those ratios are
//!   its spread.
//! - **Acquires.** 16 threads contend for one lease, on PostgreSQL and on
//!   etcd; a winner releases at once, so the lease changes hands all the
//!   time and both outcomes of the acquire run. The tokens issued must be
//!   as many as the grants counted, each a new one.
//!
//! Files: [`writers`] (one write cell), [`acquirers`] (the acquire cell),
//! [`report`] (the machine's facts, the table, the files), [`chart`] (the
//! figures: every mode against `unfenced` as writers grow, one per scope
//! count).

pub mod acquirers;
pub mod chart;
pub mod handover;
pub mod report;
pub mod writers;

use crate::cluster::etcd::EtcdCluster;
use crate::cluster::Session;
use crate::db;
use crate::error::Result;
use crate::vocabulary::FenceMode;
use std::path::PathBuf;
use std::time::Duration;

/// The reader's knobs.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// How long each cell's writers (or acquirers) run, per run.
    pub seconds: u32,
    /// How many times every cell is measured; the table shows the median.
    pub runs: u32,
    /// The markdown table's file; the CSV goes beside it (`.csv`).
    pub out: PathBuf,
    /// The writer counts measured, ascending ([`WRITERS`] by default).
    pub writers: Vec<usize>,
    /// The scope counts measured, ascending ([`SCOPES`] by default).
    pub scopes: Vec<usize>,
}

/// The modes compared, the baseline first.
pub const MODES: [FenceMode; 7] = [
    FenceMode::Unfenced,
    FenceMode::FencedRow,
    FenceMode::FencedScope,
    FenceMode::FencedScopeCte,
    FenceMode::FencedScopeShared,
    FenceMode::VersionCas,
    FenceMode::ClaimFirst,
];

/// How many writers write at once, by default.
pub const WRITERS: [usize; 4] = [1, 4, 16, 64];

/// On how many scopes, by default: one floor row for every writer, one per
/// writer or fewer, and many per writer.
pub const SCOPES: [usize; 4] = [1, 16, 1000, 10_000];

/// The most writers `--writers` takes: one connection each, and the
/// cluster allows 250 (`max_connections`) for everything at once.
pub const MOST_WRITERS: usize = 200;

/// The most scopes `--scopes` takes: each is a floor row seeded, and every
/// part of every scope is written once before the timing starts.
pub const MOST_SCOPES: usize = 100_000;

/// How many threads contend for the lease.
pub const ACQUIRERS: usize = 16;

/// A list of counts as the bench measures it: ascending, each once.
pub fn ascending(mut counts: Vec<usize>) -> Vec<usize> {
    counts.sort_unstable();
    counts.dedup();
    counts
}

/// One cell of the table: a mode, a number of writers, a number of scopes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    /// The resource mode.
    pub mode: FenceMode,
    /// Concurrent writers, each on its own connection.
    pub writers: usize,
    /// Scopes written (see `writers::scopes_of`: shared by writers when
    /// fewer than they, else spread over them).
    pub scopes: usize,
}

/// What one write cell measured in one run.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Writes per second, all writers together.
    pub per_second: f64,
    /// The median latency of one write.
    pub p50: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// Writes the resource refused, by `write_attempt` (none expected).
    pub refused: u64,
    /// WAL bytes the server wrote per write: what a commit must flush.
    pub wal_per_write: f64,
    /// Writes per second in each of the mode's slices, round by round: the
    /// slices of one round of all modes lie within one round (seven slices).
    pub slice_rates: Vec<f64>,
}

/// What the acquire cell measured in one run, on one lease store.
#[derive(Clone, Debug)]
pub struct AcquireSample {
    /// `postgres` or `etcd`.
    pub store: &'static str,
    /// Acquire attempts per second, all threads together.
    pub per_second: f64,
    /// The median latency of one attempt.
    pub p50: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// Attempts that were granted a token.
    pub granted: u64,
}

/// What the takeover cell measured for one design in one run.
#[derive(Clone, Debug)]
pub struct HandoverSample {
    /// How the new holder's first write was made.
    pub design: handover::Takeover,
    /// The median time from the grant to the first accepted write.
    pub p50: Duration,
    /// The longest.
    pub max: Duration,
}

/// Every run of every cell, and the machine's facts.
pub struct Results {
    /// Where and how it was measured.
    pub facts: report::Facts,
    /// The knobs.
    pub options: BenchOptions,
    /// Each write cell with its samples, one per run, in table order.
    pub cells: Vec<(Cell, Vec<Sample>)>,
    /// The acquire cell's samples, one per store and run.
    pub acquires: Vec<AcquireSample>,
    /// The takeover cell's samples, every design, run after run.
    pub handovers: Vec<HandoverSample>,
}

/// The write cells in table order: scopes, then writers, then mode.
pub fn cells(writer_counts: &[usize], scope_counts: &[usize]) -> Vec<Cell> {
    let mut out = Vec::new();
    for &scopes in scope_counts {
        for &writers in writer_counts {
            for mode in MODES {
                out.push(Cell { mode, writers, scopes });
            }
        }
    }
    out
}

/// Runs the whole bench: takes the cluster (starting it if needed),
/// recreates the databases, measures every cell `runs` times, and returns
/// the samples. Progress goes to stderr.
pub fn run(options: &BenchOptions) -> Result<Results> {
    let session = Session::begin()?;
    db::setup::recreate_databases()?;
    let facts = report::Facts::read(session.cluster())?;
    eprintln!("bench: {}", facts.durability());
    let seconds = Duration::from_secs(options.seconds.into());
    let table = cells(&options.writers, &options.scopes);
    let mut cells: Vec<(Cell, Vec<Sample>)> = table.iter().map(|c| (*c, Vec::new())).collect();
    let (mut acquires, mut handovers) = (Vec::new(), Vec::new());
    let groups = options.scopes.len() * options.writers.len();
    let total = (groups + 3) * options.runs as usize;
    let mut done = 0;
    // etcd's acquires, on F16's cluster from empty data; stopped when this ends.
    let etcd = EtcdCluster::locate()?;
    etcd.start_fresh_for_run()?;
    for run in 0..options.runs as usize {
        for &scopes in &options.scopes {
            for &writers in &options.writers {
                done += 1;
                eprint!("bench: [{done}/{total}] run {}/{}: {writers} writer(s) on {scopes} scope(s), every mode … ", run + 1, options.runs);
                let samples = writers::measure_group(writers, scopes, seconds)?;
                let shown: Vec<String> = MODES.iter().zip(&samples).map(|(m, s)| format!("{} {:.0}/s", m.cli_name(), s.per_second)).collect();
                eprintln!("{}", shown.join(", "));
                for (mode, sample) in MODES.iter().zip(samples) {
                    let cell = Cell { mode: *mode, writers, scopes };
                    cells.iter_mut().find(|(c, _)| *c == cell).expect("a cell of the table").1.push(sample);
                }
            }
        }
        done += 1;
        eprint!("bench: [{done}/{total}] run {}/{}: {ACQUIRERS} threads acquiring on PostgreSQL … ", run + 1, options.runs);
        let sample = acquirers::measure_postgres(ACQUIRERS, seconds)?;
        eprintln!("{:.0} attempts/s, {} granted", sample.per_second, sample.granted);
        acquires.push(sample);
        done += 1;
        eprint!("bench: [{done}/{total}] run {}/{}: {ACQUIRERS} threads acquiring on etcd … ", run + 1, options.runs);
        let sample = acquirers::measure_etcd(&etcd, ACQUIRERS, seconds)?;
        eprintln!("{:.0} attempts/s, {} granted", sample.per_second, sample.granted);
        acquires.push(sample);
        done += 1;
        eprint!("bench: [{done}/{total}] run {}/{}: {} takeovers in each design … ", run + 1, options.runs, handover::TAKEOVERS);
        let samples = handover::measure_all()?;
        let shown: Vec<String> = samples.iter().map(|s| format!("{} {:.1}ms", s.design.name(), s.p50.as_secs_f64() * 1000.0)).collect();
        eprintln!("{}", shown.join(", "));
        handovers.extend(samples);
    }
    drop(etcd);
    drop(session);
    Ok(Results { facts, options: options.clone(), cells, acquires, handovers })
}

/// `lab bench`: runs the whole bench, prints the table and writes its
/// files (the markdown at `options.out`, the CSV and the figures beside it).
pub fn command(options: &BenchOptions) -> Result<()> {
    let results = run(options)?;
    print!("{}", report::markdown(&results)?);
    report::write_files(&results, &options.out)?;
    eprintln!("bench: wrote {} and {}", options.out.display(), options.out.with_extension("csv").display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every mode meets every concurrency, the baseline first in each group.
    #[test]
    fn the_table_has_every_cell_once() {
        let cells = cells(&WRITERS, &SCOPES);
        assert_eq!(cells.len(), MODES.len() * WRITERS.len() * SCOPES.len());
        for group in cells.chunks(MODES.len()) {
            assert_eq!(group[0].mode, FenceMode::Unfenced);
            assert!(group.iter().all(|c| c.writers == group[0].writers && c.scopes == group[0].scopes));
        }
    }
}
