//! `lab queues`: each crate unfenced and fenced under the same seeded
//! nemesis, the judge's table (a row per crate and fence), its data as
//! JSON beside it, and whether every verdict is the expected one: every
//! kind of fault struck, the unfenced handler let a stale side effect
//! through (the nemesis showed the harm), the fenced one let none through,
//! and every crate's token grew with each claim.

use super::judge::CrateCounts;
use super::nemesis::{CrateFault, FAULT_EVERY};
use super::run::{run_crate, CrateConfig, CrateName, CrateRun, HandlerFence};
use crate::chaos::report::machine_line;
use crate::error::Result;
use crate::result_data::ResultData;
use crate::{cluster, db, sysinfo};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// What `lab queues` was asked for.
#[derive(Clone, Debug)]
pub struct QueuesOptions {
    /// Seed, jobs, workers.
    pub config: CrateConfig,
    /// The crates, in turn.
    pub crates: Vec<CrateName>,
    /// The fences, in turn for each crate.
    pub fences: Vec<HandlerFence>,
    /// Where to write the table (and its data beside it as JSON), if anywhere.
    pub out: Option<PathBuf>,
}

/// The run's table as data: what `--out FILE.md` writes beside it as
/// `FILE.json`, and what the book's facts are read from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueuesData {
    /// The format's version.
    pub schema: u32,
    /// The seed.
    pub seed: u64,
    /// Jobs per run.
    pub jobs: usize,
    /// Worker slots.
    pub workers: usize,
    /// One job in every this many meets a fault.
    pub fault_every: usize,
    /// Where it ran.
    pub machine: String,
    /// Each crate and fence, in the order run.
    pub rows: Vec<QueuesRow>,
}

impl ResultData for QueuesData {
    const SCHEMA: u32 = 2;
    fn schema(&self) -> u32 {
        self.schema
    }
}

/// One crate and fence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueuesRow {
    /// The crate.
    #[serde(rename = "crate")]
    pub krate: CrateName,
    /// The crate as published, with its version.
    pub published: String,
    /// The fence.
    pub fence: HandlerFence,
    /// The judge's counts.
    pub counts: CrateCounts,
    /// Faults that struck, by kind.
    pub struck: BTreeMap<CrateFault, usize>,
    /// Paused jobs the crate never gave away.
    pub never_taken_over: usize,
    /// Jobs whose later claims did not carry larger tokens.
    pub tokens_not_increasing: usize,
    /// Median time from a pause to the newer attempt's side effect, in ms
    /// (see `CrateRun::takeover_ms`); the mean of the middle two for an
    /// even count.
    pub takeover_median_ms: Option<f64>,
    /// Handlers held at their first latch when the server restarted.
    pub restart_held: usize,
    /// Of these, the ones that went on to return rather than fail.
    pub restart_returned: usize,
    /// Worker processes that ended on their own (and were started again),
    /// each with its status and last words.
    pub exited: Vec<String>,
    /// The run's time, in seconds.
    pub seconds: f64,
    /// The command that runs this row again.
    pub command: String,
}

impl QueuesRow {
    fn of(config: &CrateConfig, krate: CrateName, fence: HandlerFence, run: &CrateRun) -> QueuesRow {
        QueuesRow {
            krate,
            published: krate.published().into(),
            fence,
            counts: run.counts,
            struck: run.struck.clone(),
            never_taken_over: run.never_taken_over,
            tokens_not_increasing: run.tokens_not_increasing,
            takeover_median_ms: (!run.takeover_ms.is_empty()).then(|| crate::stats::median(&run.takeover_ms)),
            restart_held: run.restart_held,
            restart_returned: run.restart_returned,
            exited: run.exited.clone(),
            seconds: run.took.as_secs_f64(),
            command: format!("./run.sh queues --seed {} --jobs {} --workers {} --crate {} --fence {}", config.seed, config.jobs, config.workers, krate.name(), fence.name()),
        }
    }

    /// What is wrong with the row, if anything.
    pub fn unexpected(&self) -> Option<String> {
        let name = format!("{} --fence {}", self.krate.name(), self.fence.name());
        let never: Vec<&str> = CrateFault::ALL.iter().filter(|f| self.struck.get(f).copied().unwrap_or(0) == 0).map(|f| f.name()).collect();
        if self.counts.handler_runs == 0 {
            Some(format!("{name} had nothing to judge (no handler ran)"))
        } else if !never.is_empty() {
            Some(format!("{name} had nothing to judge for {} (never struck; run more jobs)", never.join(", ")))
        } else if self.restart_held == 0 {
            Some(format!("{name} had nothing to judge for restart (no handler was in flight when the server restarted)"))
        } else if self.tokens_not_increasing > 0 {
            Some(format!("{name}: {} jobs' later claims did not carry larger tokens", self.tokens_not_increasing))
        } else if self.fence == HandlerFence::None && self.counts.stale_effects == 0 {
            Some(format!("{name} let no stale side effect through: the nemesis did not show the harm"))
        } else if self.fence == HandlerFence::Token && self.counts.stale_effects > 0 {
            Some(format!("{name} let {} stale side effects through the fence", self.counts.stale_effects))
        } else {
            None
        }
    }
}

/// Runs every crate and fence of `options` and reports; `true` when every
/// verdict is the expected one. Progress to stderr, the table to stdout.
pub fn run(options: &QueuesOptions) -> Result<bool> {
    let config = &options.config;
    super::nemesis::plan(config.seed, config.jobs).check_workers(config.workers)?;
    let session = cluster::Session::begin()?;
    let version: String = db::connect_as(cluster::credentials::ADMIN, "postgres", "lab queues")?.query_one("SELECT current_setting('server_version')", &[])?.get(0);
    let machine = machine_line(&sysinfo::Machine::read(), &version);
    println!("queues: seed {}, {} jobs, {} workers; a restart once every worker has claimed a job, then one job in every {FAULT_EVERY} meets a fault ({} in turn)", config.seed, config.jobs, config.workers, fault_names());
    let mut rows = Vec::new();
    for &krate in &options.crates {
        for &fence in &options.fences {
            eprintln!("queues: {} --fence {}…", krate.published(), fence.name());
            let run = run_crate(config, session.cluster(), krate, fence)?;
            let row = QueuesRow::of(config, krate, fence, &run);
            eprintln!("queues: {} --fence {} done in {:.0}s: {} handler runs, {} stale side effects", krate.name(), fence.name(), row.seconds, row.counts.handler_runs, row.counts.stale_effects);
            rows.push(row);
        }
    }
    drop(session);
    let data = QueuesData { schema: QueuesData::SCHEMA, seed: config.seed, jobs: config.jobs, workers: config.workers, fault_every: FAULT_EVERY, machine, rows };
    let table = markdown(&data);
    println!("{table}");
    let unexpected: Vec<String> = data.rows.iter().filter_map(QueuesRow::unexpected).collect();
    crate::report_files::conclude("queues", options.out.as_deref(), &table, &data, &unexpected, "every unfenced handler let a stale side effect through, every fenced one none")
}


/// The names of the faults that strike claims, in the order they take
/// turns: `pause, kill, delay`.
fn fault_names() -> String {
    CrateFault::AT_CLAIMS.map(CrateFault::name).join(", ")
}

/// The table as Markdown: a row per crate and fence.
pub fn markdown(data: &QueuesData) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "种子 {}，每次 {} 个作业、{} 个 worker 进程；每个 worker 进程都认领了第一个作业时重启一次服务器，之后每 {} 个作业有一个在第一次认领时遇到故障（{}轮流）\n", data.seed, data.jobs, data.workers, data.fault_every, CrateFault::AT_CLAIMS.map(CrateFault::header).join("、"));
    let _ = writeln!(out, "| crate | 栅栏 | handler 运行 | 执行两次的作业 | 被接受的过期副作用 | 被接受的过期完成 | 被拒绝的完成 | 丢失的作业 | {} | 接管中位数 | 重启时在途的 handler（其后返回） | 自己停下的 worker 进程 | 判定 |", CrateFault::ALL.map(CrateFault::header).join(" | "));
    let _ = writeln!(out, "|---|---|{}---|", "---:|".repeat(9 + CrateFault::ALL.len()));
    for r in &data.rows {
        let c = &r.counts;
        let struck: Vec<String> = CrateFault::ALL.iter().map(|f| r.struck.get(f).copied().unwrap_or(0).to_string()).collect();
        let takeover = r.takeover_median_ms.map_or("—".to_owned(), |ms| format!("{:.1} s", ms / 1e3));
        let verdict = if r.unexpected().is_some() { "UNEXPECTED" } else if c.stale_effects == 0 { "clean" } else { "NOT clean" };
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {}（{}） | {} | {} |",
            r.published, r.fence.name(), c.handler_runs, c.runs_twice, c.stale_effects, c.superseded_completions, c.refused_completions, c.lost, struck.join(" | "), takeover, r.restart_held, r.restart_returned, r.exited.len(), verdict
        );
    }
    // Each row's stops: how many, and the first one's last words.
    let exits: Vec<String> =
        data.rows.iter().filter_map(|r| r.exited.first().map(|first| format!("- {} `{}`：{} 个，第一个是 {first}", r.krate.name(), r.fence.name(), r.exited.len()))).collect();
    if !exits.is_empty() {
        let _ = writeln!(out, "\n自己停下的 worker 进程（lab 随即在同一个槽位启动一个新的）：\n\n{}", exits.join("\n"));
    }
    let _ = writeln!(out, "\n每一行再跑一次：\n");
    for r in &data.rows {
        let _ = writeln!(out, "- `{}`", r.command);
    }
    let took: Vec<String> = data.rows.iter().map(|r| format!("{} {} {:.0}s", r.krate.name(), r.fence.name(), r.seconds)).collect();
    let _ = writeln!(out, "\n机器：{}。每一行实际用时：{}。", data.machine, took.join("，"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of `krate` with `fence` after two faults of each kind, `stale`
    /// stale side effects accepted.
    fn row(fence: HandlerFence, stale: usize) -> QueuesRow {
        QueuesRow {
            krate: CrateName::Graphile,
            published: CrateName::Graphile.published().into(),
            fence,
            counts: CrateCounts { jobs: 16, handler_runs: 24, runs_twice: 6, stale_effects: stale, ..CrateCounts::default() },
            struck: CrateFault::ALL.map(|f| (f, 2)).into(),
            never_taken_over: 0,
            tokens_not_increasing: 0,
            takeover_median_ms: Some(1200.0),
            restart_held: 2,
            restart_returned: 2,
            exited: Vec::new(),
            seconds: 3.0,
            command: String::new(),
        }
    }

    /// The verdicts: unfenced must let a stale side effect through, fenced
    /// none; a run where a fault never struck, nothing ran, or a token did
    /// not grow is unexpected whatever it counted.
    #[test]
    fn each_verdict_is_judged() {
        assert_eq!(row(HandlerFence::None, 2).unexpected(), None);
        assert_eq!(row(HandlerFence::Token, 0).unexpected(), None);
        assert!(row(HandlerFence::None, 0).unexpected().unwrap().contains("did not show the harm"));
        assert!(row(HandlerFence::Token, 1).unexpected().unwrap().contains("through the fence"));
        let mut never = row(HandlerFence::Token, 0);
        never.struck.remove(&CrateFault::Kill);
        assert!(never.unexpected().unwrap().contains("nothing to judge for kill"));
        let mut quiet = row(HandlerFence::None, 2);
        quiet.restart_held = 0;
        assert!(quiet.unexpected().unwrap().contains("nothing to judge for restart"));
        let mut idle = row(HandlerFence::None, 2);
        idle.counts.handler_runs = 0;
        assert!(idle.unexpected().unwrap().contains("no handler ran"));
        let mut flat = row(HandlerFence::Token, 0);
        flat.tokens_not_increasing = 1;
        assert!(flat.unexpected().unwrap().contains("did not carry larger tokens"));
    }
}
