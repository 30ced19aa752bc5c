//! The bench's output: the facts of the machine and the server it ran on,
//! the table of medians with each mode's ratio to `unfenced`, and the files
//! the book reads: markdown to include, the CSV, and the figures drawn from
//! it ([`chart`]), which `lab bench --redraw` draws again from the CSV.

use super::{chart, Cell, Results, ACQUIRERS, MODES, SCOPES, WRITERS};
use crate::cluster::Cluster;
use crate::error::{Result, ResultExt};
use crate::vocabulary::FenceMode;
use crate::stats::{median, ms};
use crate::sysinfo::{self, Machine};
use crate::{db, report_files};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// Where and how the bench ran: what a reader needs to compare figures.
#[derive(Clone, Debug)]
pub struct Facts {
    /// The processors, their model, the kernel.
    pub machine: Machine,
    /// `SHOW server_version`.
    pub server_version: String,
    /// `SHOW fsync`: whether commits reach the disk at all.
    pub fsync: String,
    /// `SHOW synchronous_commit`: whether a commit waits for its WAL flush.
    pub synchronous_commit: String,
    /// `SHOW wal_sync_method`: how the WAL is flushed.
    pub wal_sync_method: String,
    /// The file system the data directory lives on (what a flush costs).
    pub filesystem: String,
    /// Whether the lab itself (the client) was built with optimisations.
    pub client_build: &'static str,
}

impl Facts {
    /// Reads the facts from the machine and from the running server.
    pub fn read(cluster: &Cluster) -> Result<Facts> {
        let mut client = db::connect(db::RES_DB, "lab bench")?;
        let mut show = |name: &str| -> Result<String> {
            Ok(client.query_one(&format!("SHOW {name}"), &[]).with_context(|| format!("SHOW {name}"))?.get(0))
        };
        Ok(Facts {
            machine: Machine::read(),
            server_version: show("server_version")?,
            fsync: show("fsync")?,
            synchronous_commit: show("synchronous_commit")?,
            wal_sync_method: show("wal_sync_method")?,
            filesystem: sysinfo::mount_of(&cluster.data_dir()).map_or_else(|| "unknown".into(), |m| m.kind),
            client_build: if cfg!(debug_assertions) { "debug" } else { "release" },
        })
    }

    /// One line on durability, as `SHOW` reads it.
    pub fn durability(&self) -> String {
        let warning = if self.fsync == "on" && self.synchronous_commit == "on" { "" } else { " (NOT the durable default: the figures flatter every mode)" };
        format!(
            "fsync={}, synchronous_commit={}, wal_sync_method={} (SHOW), data directory on {}{warning}",
            self.fsync, self.synchronous_commit, self.wal_sync_method, self.filesystem
        )
    }
}

/// A duration as the table shows it: milliseconds with two decimals.
pub fn shown(d: Duration) -> String {
    format!("{:.2}ms", ms(d))
}

/// One row of the table: a cell's medians.
#[derive(Clone, Debug)]
pub struct Row {
    /// The cell.
    pub cell: Cell,
    /// Median writes per second.
    pub per_second: f64,
    /// The median, over every round of every run, of the mode's slice rate
    /// over `unfenced`'s in the same round, at the same writers and scopes.
    pub ratio: f64,
    /// Median p50 and p99 latency.
    pub p50: Duration,
    pub p99: Duration,
    /// Refused writes over all runs (none expected).
    pub refused: u64,
    /// Median WAL bytes per write.
    pub wal_per_write: f64,
}

/// The table's rows, in the order of [`super::cells`]. A ratio is the
/// median over all rounds of all runs of the mode's slice rate over
/// `unfenced`'s in the same round (see [`super`]).
pub fn rows(results: &Results) -> Vec<Row> {
    let med = |xs: Vec<f64>| median(&xs);
    let baseline = |cell: &Cell| {
        results.cells.iter().find(|(c, _)| c.mode == FenceMode::Unfenced && c.writers == cell.writers && c.scopes == cell.scopes).map(|(_, s)| s)
    };
    results
        .cells
        .iter()
        .map(|(cell, samples)| {
            let ratios: Vec<f64> = baseline(cell).map_or(vec![f64::NAN], |base| {
                samples.iter().zip(base).flat_map(|(s, b)| s.slice_rates.iter().zip(&b.slice_rates).map(|(x, y)| x / y)).collect()
            });
            Row {
                cell: *cell,
                per_second: med(samples.iter().map(|s| s.per_second).collect()),
                ratio: med(ratios),
                p50: Duration::from_secs_f64(med(samples.iter().map(|s| s.p50.as_secs_f64()).collect())),
                p99: Duration::from_secs_f64(med(samples.iter().map(|s| s.p99.as_secs_f64()).collect())),
                refused: samples.iter().map(|s| s.refused).sum(),
                wal_per_write: med(samples.iter().map(|s| s.wal_per_write).collect()),
            }
        })
        .collect()
}

/// One target of an issue, reported (never asserted) under the table.
#[derive(Clone, Debug)]
pub struct Target {
    /// The issue that set it.
    pub issue: u32,
    /// The mode it is for.
    pub mode: FenceMode,
    /// The cell, in the book's words.
    pub label: String,
    /// The cell's measured ratio to `unfenced`.
    pub ratio: f64,
    /// The ratio it asks for, at least.
    pub at_least: f64,
}

/// The issues' targets: issue 14's two for the one-statement form, and
/// issue 23's for the reader/writer form, in every cell.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let ratio = |mode: FenceMode, writers: usize, scopes: usize| {
        rows.iter().find(|r| r.cell.mode == mode && r.cell.writers == writers && r.cell.scopes == scopes).map_or(f64::NAN, |r| r.ratio)
    };
    let target = |issue, mode, label: String, (writers, scopes), at_least| Target { issue, mode, label, ratio: ratio(mode, writers, scopes), at_least };
    let mut out = vec![
        target(14, FenceMode::FencedScopeCte, "1 个写入者".to_owned(), (1, 1), 0.85),
        target(14, FenceMode::FencedScopeCte, "16 个写入者、16 个作用域".to_owned(), (16, 16), 0.95),
    ];
    for scopes in SCOPES {
        for writers in WRITERS {
            out.push(target(23, FenceMode::FencedScopeShared, format!("{scopes} 个作用域、{writers} 个写入者"), (writers, scopes), 0.85));
        }
    }
    out
}

/// The whole report as markdown: facts, the write table, the acquire line,
/// the targets. The table and the targets are drawn from the rows of the
/// CSV (`csv`): the figures and the book's facts read those same rows, so
/// a ratio rounds the same way everywhere.
pub fn markdown(results: &Results) -> Result<String> {
    let (f, o) = (&results.facts, &results.options);
    let rows = rows_from_csv(&csv(results))?;
    let mut md = String::new();
    let _ = writeln!(md, "# 栅栏的代价：每种资源端模式的写入吞吐与延迟\n");
    let _ = writeln!(md, "- 机器：{} 核（{}），PostgreSQL {}，数据目录在 {} 上", f.machine.cpus_shown(), f.machine.model, f.server_version, f.filesystem);
    let _ = writeln!(md, "- 持久性（SHOW 读出）：fsync={}，synchronous_commit={}，wal_sync_method={}", f.fsync, f.synchronous_commit, f.wal_sync_method);
    let _ = writeln!(
        md,
        "- 测法：`lab bench --seconds {} --runs {}`，客户端为 {} 构建；每种模式每格写 {} s，同一并发下的 {} 种模式以 0.25 s 为片轮流写；取 {} 次运行的中位数；“相对 unfenced”是同一轮里这一模式的一片与 unfenced 的一片之比（每轮的次序轮换，两片相隔不过一秒左右），取所有轮的中位数；每个写入者一个线程、一条连接；所有写入者持同一个 token（一次持有、多次写入），各自轮流改写自己的 4 个分片；写入者 i 写作用域 i mod 作用域数\n",
        o.seconds,
        o.runs,
        f.client_build,
        o.seconds,
        MODES.len(),
        o.runs
    );
    let _ = writeln!(md, "| 作用域 | 写入者 | 模式 | 写入/秒 | 相对 unfenced | p50 | p99 | WAL 字节/写入 | 被拒 |");
    let _ = writeln!(md, "|---:|---:|---|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} | {:.2}× | {} | {} | {:.0} | {} |",
            r.cell.scopes,
            r.cell.writers,
            r.cell.mode.cli_name(),
            r.per_second,
            r.ratio,
            shown(r.p50),
            shown(r.p99),
            r.wal_per_write,
            r.refused
        );
    }
    let a = &results.acquires;
    let per_second = median(&a.iter().map(|s| s.per_second).collect::<Vec<_>>());
    let p50 = Duration::from_secs_f64(median(&a.iter().map(|s| s.p50.as_secs_f64()).collect::<Vec<_>>()));
    let p99 = Duration::from_secs_f64(median(&a.iter().map(|s| s.p99.as_secs_f64()).collect::<Vec<_>>()));
    let granted = median(&a.iter().map(|s| s.granted as f64).collect::<Vec<_>>());
    let _ = writeln!(md, "\n获取：{ACQUIRERS} 个线程争同一个租约，赢家立即释放（中位数）。\n");
    let _ = writeln!(md, "| 线程 | 尝试/秒 | 每次运行获得授予 | p50 | p99 |");
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|");
    let _ = writeln!(md, "| {ACQUIRERS} | {per_second:.0} | {granted:.0} | {} | {} |", shown(p50), shown(p99));
    let _ = writeln!(
        md,
        "\n接手：每种做法 {} 次接手，每次是一段新的持有（上一个持有者释放之后获取，新的 token），从获取返回到第一次被接受的写入返回（客户端计时，{} 次运行的中位数）。lock-delay 先按数据库时钟等满 {} ms，再做一次不带栅栏的写入。\n",
        super::handover::TAKEOVERS,
        o.runs,
        crate::object::stage::LOCK_DELAY.as_millis()
    );
    let _ = writeln!(md, "| 做法 | p50 | 最长 |");
    let _ = writeln!(md, "|---|---:|---:|");
    for (design, p50, max) in takeovers(results)? {
        let _ = writeln!(md, "| `{}` | {} | {} |", design.name(), shown(p50), shown(max));
    }
    let _ = writeln!(md, "\n目标（只报告、不断言）：");
    for t in targets(&rows) {
        let verdict = if t.ratio >= t.at_least { "达到" } else { "未达到" };
        let _ = writeln!(
            md,
            "- issue {}：{} 相对 unfenced，{}：{:.3}×，目标 ≥ {:.2}×，{verdict}",
            t.issue,
            t.mode.cli_name(),
            t.label,
            t.ratio,
            t.at_least
        );
    }
    Ok(md)
}

/// The table as CSV, one line per cell and one for the acquires, for a chart.
pub fn csv(results: &Results) -> String {
    let mut out = String::from("kind,mode,writers,scopes,per_second,ratio_to_unfenced,p50_ms,p99_ms,wal_bytes_per_write,refused,granted\n");
    for r in rows(results) {
        let _ = writeln!(
            out,
            "write,{},{},{},{:.1},{:.3},{:.3},{:.3},{:.0},{},",
            r.cell.mode.cli_name(),
            r.cell.writers,
            r.cell.scopes,
            r.per_second,
            r.ratio,
            ms(r.p50),
            ms(r.p99),
            r.wal_per_write,
            r.refused
        );
    }
    let a = &results.acquires;
    let m = |f: &dyn Fn(&super::AcquireSample) -> f64| median(&a.iter().map(f).collect::<Vec<_>>());
    let _ = writeln!(
        out,
        "acquire,,{ACQUIRERS},,{:.1},,{:.3},{:.3},,,{:.0}",
        m(&|s| s.per_second),
        m(&|s| ms(s.p50)),
        m(&|s| ms(s.p99)),
        m(&|s| s.granted as f64)
    );
    // The longest takeover goes in the p99 column. (A design with no
    // sample has no line; the markdown, drawn from the same medians, fails.)
    for (design, p50, max) in takeovers(results).unwrap_or_default() {
        let _ = writeln!(out, "takeover,{},,,,,{:.3},{:.3},,,", design.name(), ms(p50), ms(max));
    }
    out
}

/// The table's rows read back from its CSV ([`csv`]): what the figures
/// are drawn from when they are redrawn without measuring again.
pub fn rows_from_csv(text: &str) -> Result<Vec<Row>> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let columns: Vec<&str> = header.split(',').collect();
    let at = |name: &'static str| columns.iter().position(|c| *c == name).map(|i| (i, name)).ok_or_else(|| format!("the CSV has no column {name}: {header}"));
    let (kind, mode, writers, scopes) = (at("kind")?, at("mode")?, at("writers")?, at("scopes")?);
    let (per_second, ratio, p50, p99, wal, refused) = (at("per_second")?, at("ratio_to_unfenced")?, at("p50_ms")?, at("p99_ms")?, at("wal_bytes_per_write")?, at("refused")?);
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        if cells.get(kind.0) != Some(&"write") {
            continue;
        }
        // Each failure names the line and the column.
        let wrong = |(_, name): (usize, &str), what: &str| format!("line {} of the CSV, column {name}: {what}: {line}", n + 2);
        let cell = |column: (usize, &'static str)| cells.get(column.0).copied().filter(|c| !c.is_empty()).ok_or_else(|| wrong(column, "no value"));
        let number = |column| -> Result<f64> { cell(column)?.parse::<f64>().map_err(|_| wrong(column, "not a number").into()) };
        let count = |column| -> Result<usize> { cell(column)?.parse::<usize>().map_err(|_| wrong(column, "not a count").into()) };
        let millis = |column| -> Result<Duration> { Ok(Duration::from_secs_f64(number(column)? / 1000.0)) };
        rows.push(Row {
            cell: Cell { mode: cell(mode)?.parse::<FenceMode>().map_err(|e| wrong(mode, &e))?, writers: count(writers)?, scopes: count(scopes)? },
            per_second: number(per_second)?,
            ratio: number(ratio)?,
            p50: millis(p50)?,
            p99: millis(p99)?,
            refused: count(refused)? as u64,
            wal_per_write: number(wal)?,
        });
    }
    if rows.is_empty() {
        return Err("the CSV holds no write row".into());
    }
    Ok(rows)
}

/// Each takeover design with the median over the runs of its median and
/// of its longest takeover; an error when a design was never timed.
fn takeovers(results: &Results) -> Result<Vec<(super::handover::Takeover, Duration, Duration)>> {
    let mut out = Vec::new();
    for design in super::handover::Takeover::ALL {
        let of: Vec<&super::HandoverSample> = results.handovers.iter().filter(|h| h.design == design).collect();
        if of.is_empty() {
            return Err(format!("the bench timed no takeover in {}", design.name()).into());
        }
        let over_runs = |f: &dyn Fn(&super::HandoverSample) -> Duration| Duration::from_secs_f64(median(&of.iter().map(|h| f(h).as_secs_f64()).collect::<Vec<_>>()));
        out.push((design, over_runs(&|h| h.p50), over_runs(&|h| h.max)));
    }
    Ok(out)
}

/// One takeover design's line of the CSV: its name, the median and the
/// longest time from a grant to the first accepted write.
#[derive(Clone, Debug, PartialEq)]
pub struct TakeoverRow {
    /// `fenced-scope`, `claim-first` or `lock-delay`.
    pub design: String,
    /// The median of the runs' medians.
    pub p50: Duration,
    /// The median of the runs' longest.
    pub max: Duration,
}

/// The takeover lines of the CSV ([`csv`]), in its order; each design of
/// [`super::handover::Takeover::ALL`] must be there once.
pub fn takeovers_from_csv(text: &str) -> Result<Vec<TakeoverRow>> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("takeover,")) {
        let cells: Vec<&str> = line.split(',').collect();
        let millis = |i: usize| -> Result<Duration> {
            let value = cells.get(i).and_then(|c| c.parse::<f64>().ok()).ok_or_else(|| format!("the CSV's takeover line has no time in column {}: {line}", i + 1))?;
            Ok(Duration::from_secs_f64(value / 1000.0))
        };
        out.push(TakeoverRow { design: cells[1].to_owned(), p50: millis(6)?, max: millis(7)? });
    }
    let names: Vec<&str> = out.iter().map(|t| t.design.as_str()).collect();
    let wanted = super::handover::Takeover::ALL.map(super::handover::Takeover::name);
    if names != wanted {
        return Err(format!("the CSV's takeover lines are {names:?}, not one for each of {wanted:?}").into());
    }
    Ok(out)
}

/// Writes the markdown to `out`, the CSV and the figures (one per writer
/// count, see [`chart`]) beside it (`bench-writers-4.svg` …), each whole.
/// The figures are drawn from the CSV's text, as [`redraw`] draws them:
/// one source, so a redraw gives the very same files.
pub fn write_files(results: &Results, out: &Path) -> Result<()> {
    let csv = csv(results);
    let figures = chart::figures(&rows_from_csv(&csv)?);
    report_files::write(out, markdown(results)?, vec![("csv", csv)], figures)
}

/// `lab bench --redraw`: draws the figures again from the CSV beside `out`,
/// measuring nothing; returns the files written.
pub fn redraw(out: &Path) -> Result<Vec<std::path::PathBuf>> {
    let source = out.with_extension("csv");
    let text = std::fs::read_to_string(&source).with_context(|| format!("reading {}", source.display()))?;
    let rows = rows_from_csv(&text).with_context(|| format!("reading {}", source.display()))?;
    let files = report_files::charts_placed(out, chart::figures(&rows))?;
    let written = files.iter().map(|(path, _)| path.clone()).collect();
    report_files::write_all(files)?;
    Ok(written)
}
