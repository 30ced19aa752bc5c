//! `lab queue-chaos`: the fixed queue and each bug of the zoo in turn under
//! the same seeded nemesis, the judge's table (a row per switch), its data
//! as JSON beside it, and whether every verdict is the expected one: the
//! fixed queue clean, every bug caught, and no run with a fault kind that
//! never struck (a run the nemesis did not test is no evidence).

use super::nemesis::{FaultCount, QueueFault, FAULT_EVERY};
use super::run::{run_switch, QueueConfig, QueueRun};
use super::judge::QueueCounts;
use crate::chaos::report::machine_line;
use crate::error::Result;
use crate::queue::Bug;
use crate::result_data::ResultData;
use crate::{cluster, db, sysinfo};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// What `lab queue-chaos` was asked for.
#[derive(Clone, Debug)]
pub struct QueueChaosOptions {
    /// Seed, workers, duration per switch.
    pub config: QueueConfig,
    /// The switches, in turn: `None` is the fixed queue.
    pub switches: Vec<Option<Bug>>,
    /// Where to write the table (and its data beside it as JSON), if anywhere.
    pub out: Option<PathBuf>,
}

/// The run's table as data: what `--out FILE.md` writes beside it as
/// `FILE.json`, and what the book's facts are read from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueChaosData {
    /// The format's version.
    pub schema: u32,
    /// The seed.
    pub seed: u64,
    /// Worker slots.
    pub workers: usize,
    /// Each switch's length, in seconds.
    pub duration_s: f64,
    /// Every how many claims the nemesis strikes.
    pub fault_every: u64,
    /// Where it ran.
    pub machine: String,
    /// Each switch, in the order run.
    pub rows: Vec<SwitchData>,
}

/// One switch's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SwitchData {
    /// `fixed`, or the bug's name.
    pub switch: String,
    /// `Z1` … `Z9`, or `—` for the fixed queue.
    pub row: String,
    /// The judge's counts.
    pub counts: QueueCounts,
    /// Each fault kind: injected, missed.
    pub faults: BTreeMap<QueueFault, FaultCount>,
    /// The switch's time, the record's reading included, in seconds.
    pub seconds: f64,
}

impl ResultData for QueueChaosData {
    const SCHEMA: u32 = 1;
    fn schema(&self) -> u32 {
        self.schema
    }
}

impl SwitchData {
    fn of(run: &QueueRun) -> SwitchData {
        SwitchData {
            switch: run.bug.map_or("fixed".into(), |b| b.name().into()),
            row: run.bug.map_or("—".into(), |b| b.row()),
            counts: run.counts,
            faults: run.faults.clone(),
            seconds: run.took.as_secs_f64(),
        }
    }

    /// Whether this is the fixed queue's row.
    pub fn fixed(&self) -> bool {
        self.switch == "fixed"
    }

    /// What is wrong with the row, if anything: a kind of fault that never
    /// struck, nothing claimed, harm in the fixed queue, or a bug not caught.
    pub fn unexpected(&self) -> Option<String> {
        let never: Vec<&str> = QueueFault::ALL.iter().filter(|f| self.faults.get(f).map_or(0, |c| c.injected) == 0).map(|f| f.name()).collect();
        if self.counts.claims == 0 {
            Some(format!("{} had nothing to judge (no claim)", self.switch))
        } else if !never.is_empty() {
            Some(format!("{} had nothing to judge for {} (never injected; run longer)", self.switch, never.join(", ")))
        } else if self.fixed() && self.counts.harm() > 0 {
            Some(format!("the fixed queue is NOT clean ({} harm)", self.counts.harm()))
        } else if !self.fixed() && self.counts.harm() == 0 {
            Some(format!("{} was not caught", self.switch))
        } else {
            None
        }
    }

    fn verdict(&self) -> &'static str {
        if self.counts.harm() == 0 {
            "clean"
        } else {
            "NOT clean"
        }
    }
}

/// Runs every switch of `options` and reports; `true` when every verdict
/// is the expected one. Progress to stderr, the table to stdout.
pub fn run(options: &QueueChaosOptions) -> Result<bool> {
    let config = &options.config;
    let session = cluster::Session::begin()?;
    db::setup::recreate_databases()?;
    let version: String = db::connect(db::RES_DB, "lab queue-chaos")?.query_one("SELECT current_setting('server_version')", &[])?.get(0);
    let machine = machine_line(&sysinfo::Machine::read(), &version);
    println!(
        "queue-chaos: seed {}, {} workers, each switch {}s; a fault every {FAULT_EVERY} claims, every kind once a round",
        config.seed,
        config.workers,
        config.duration.as_secs_f64()
    );
    let mut rows = Vec::new();
    for &bug in &options.switches {
        let name = bug.map_or("fixed".to_owned(), |b| format!("{} {b}", b.row()));
        eprintln!("queue-chaos: {name} for {}s…", config.duration.as_secs_f64());
        let run = run_switch(config, bug)?;
        let row = SwitchData::of(&run);
        eprintln!("queue-chaos: {name} done in {:.0}s: {} claims, harm {}", run.took.as_secs_f64(), row.counts.claims, row.counts.harm());
        // Only where it is not expected: there the stories say why.
        if row.fixed() {
            for story in &run.healthy_stories {
                eprintln!("queue-chaos: {name}: taken back from a healthy worker: {story}");
            }
        }
        rows.push(row);
    }
    drop(session);
    let data = QueueChaosData { schema: QueueChaosData::SCHEMA, seed: config.seed, workers: config.workers, duration_s: config.duration.as_secs_f64(), fault_every: FAULT_EVERY, machine, rows };
    let table = markdown(&data);
    println!("{table}");
    let unexpected: Vec<String> = data.rows.iter().filter_map(SwitchData::unexpected).collect();
    crate::report_files::conclude("queue-chaos", options.out.as_deref(), &table, &data, &unexpected, "the fixed queue clean, every bug caught")
}

/// The table as Markdown: a row per switch, the judge's counts, the faults.
pub fn markdown(data: &QueueChaosData) -> String {
    let mut out = String::new();
    let switches = if data.rows.len() == 1 + Bug::ALL.len() { "all".to_owned() } else { data.rows.iter().map(|r| r.switch.as_str()).collect::<Vec<_>>().join(",") };
    let _ = writeln!(
        out,
        "`lab queue-chaos --seed {} --workers {} --duration {}s --switch {switches}`：每 {} 次认领一个故障，每一轮每种故障各一次\n",
        data.seed, data.workers, data.duration_s, data.fault_every
    );
    let _ = writeln!(out, "| 行 | 开关 | 认领 | 完成的作业 | 执行两次的作业 | 被接受的过期心跳 | 被接受的过期完成 | 被接受的过期副作用 | 完成后又被认领 | 租约仍有效时被收回 | 没受干扰时被收回 | 判定 |");
    let _ = writeln!(out, "|---|---|{}---|", "---:|".repeat(9));
    for r in &data.rows {
        let c = &r.counts;
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.row, r.switch, c.claims, c.done, c.runs_twice, c.stale_heartbeats, c.stale_completions, c.stale_effects, c.claimed_after_done, c.live_taken_back, c.healthy_taken_back, r.verdict()
        );
    }
    let _ = writeln!(out, "\n注入的故障（每个开关）：\n");
    let _ = writeln!(out, "| 开关 | {} |", QueueFault::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(QueueFault::ALL.len()));
    for r in &data.rows {
        let cells: Vec<String> = QueueFault::ALL
            .iter()
            .map(|f| {
                let c = r.faults.get(f).copied().unwrap_or_default();
                if c.missed > 0 {
                    format!("{}（落空 {}）", c.injected, c.missed)
                } else {
                    c.injected.to_string()
                }
            })
            .collect();
        let _ = writeln!(out, "| `{}` | {} |", r.switch, cells.join(" | "));
    }
    let took: Vec<String> = data.rows.iter().map(|r| format!("{} {:.0}s", r.switch, r.seconds)).collect();
    let _ = writeln!(out, "\n机器：{}。每个开关实际用时（含读取记录）：{}。", data.machine, took.join("，"));
    out
}
