//! The bench's output: the facts of the machine and the server it ran on,
//! the table of medians with each mode's ratio to `unfenced`, and the files
//! the book reads: markdown to include, the CSV, and the figures drawn from
//! it ([`chart`]), which `lab bench --redraw` draws again from the CSV.

use super::{chart, AcquireSample, Cell, Results, ACQUIRERS, MODES};
use crate::cluster::Cluster;
use crate::error::{Result, ResultExt};
use crate::vocabulary::FenceMode;
use crate::stats::{median, ms, quantile_of};
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
    /// The lowest and the highest run's writes per second.
    pub per_second_low: f64,
    pub per_second_high: f64,
    /// The median, over every round of every run, of the mode's slice rate
    /// over `unfenced`'s in the same round, at the same writers and scopes.
    pub ratio: f64,
    /// The first and third quartiles of those same ratios: their spread.
    pub ratio_p25: f64,
    pub ratio_p75: f64,
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
            let rates: Vec<f64> = samples.iter().map(|s| s.per_second).collect();
            Row {
                cell: *cell,
                per_second: median(&rates),
                per_second_low: lowest(&rates),
                per_second_high: highest(&rates),
                ratio_p25: quantile_of(&ratios, 0.25),
                ratio_p75: quantile_of(&ratios, 0.75),
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
    /// The cell.
    pub cell: Cell,
    /// The cell's measured ratio to `unfenced`, and its quartiles.
    pub ratio: f64,
    pub ratio_p25: f64,
    pub ratio_p75: f64,
    /// The ratio it asks for, at least.
    pub at_least: f64,
}

/// Issue 45's target: a fence at this ratio to `unfenced` or above.
pub const TARGET: f64 = 0.95;

/// WAL bytes per write are compared between modes only in cells of at
/// most this many scopes and writers: there the writes touch few pages,
/// and the full-page images written after each checkpoint do not swamp
/// what a mode adds.
pub const WAL_COMPARED_UP_TO: usize = 16;

/// Issue 45's target: a fence within 5 % of `unfenced` in every cell. The
/// reader/writer fence is the cheapest of the scope fences, so it is the
/// one held to it, in each cell measured.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    rows.iter()
        .filter(|r| r.cell.mode == FenceMode::FencedScopeShared)
        .map(|r| Target { issue: 45, cell: r.cell, ratio: r.ratio, ratio_p25: r.ratio_p25, ratio_p75: r.ratio_p75, at_least: TARGET })
        .collect()
}

/// The lowest and the highest of the runs' figures (NaN for none, as the median).
fn lowest(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NAN, f64::min)
}
fn highest(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NAN, f64::max)
}

/// A range as the table shows it: `low–high` with `decimals` decimals.
fn span(low: f64, high: f64, decimals: usize) -> String {
    format!("{low:.decimals$}–{high:.decimals$}")
}

/// The whole report as markdown: facts, the write table, the acquire and
/// takeover tables, the targets. Every table is drawn from the CSV (`csv`):
/// the figures and the book's facts read those same lines, so a figure
/// rounds the same way everywhere.
pub fn markdown(results: &Results) -> Result<String> {
    let (f, o) = (&results.facts, &results.options);
    let text = csv(results);
    let rows = rows_from_csv(&text)?;
    let mut md = String::new();
    let _ = writeln!(md, "# 栅栏的代价：每种资源端模式的写入吞吐与延迟\n");
    let _ = writeln!(md, "- 机器：{} 核（{}），PostgreSQL {}，数据目录在 {} 上", f.machine.cpus_shown(), f.machine.model, f.server_version, f.filesystem);
    let _ = writeln!(md, "- 持久性（SHOW 读出）：fsync={}，synchronous_commit={}，wal_sync_method={}", f.fsync, f.synchronous_commit, f.wal_sync_method);
    let _ = writeln!(
        md,
        "- 测法：`lab bench --seconds {} --runs {}{}`，客户端为 {} 构建；每种模式每格写 {} s，同一组写入者（每个写入者一个线程、一条连接）以 {} s 为片轮流用 {} 种模式写；“写入/秒”取 {} 次运行的中位数，旁边是最低和最高的一次；“相对 unfenced”是同一轮里这一模式的一片与 unfenced 的一片之比（每轮的次序轮换，一轮 {} s），取所有轮的中位数，旁边是这些比值的四分位（p25 和 p75）；所有写入者持同一个 token（一次持有、多次写入）；作用域比写入者少时，写入者 i 写作用域 i mod 作用域数，否则写作用域 i、i + 写入者数、……，轮流改写自己的分片（每人至少 {} 个）；version-cas 和 claim-first 在每个作用域各写自己的一个对象，互不改动对方的版本\n",
        o.seconds,
        o.runs,
        grid_flags(o),
        f.client_build,
        o.seconds,
        super::writers::SLICE.as_secs_f64(),
        MODES.len(),
        o.runs,
        super::writers::SLICE.as_secs_f64() * MODES.len() as f64,
        super::writers::PARTS
    );
    let _ = writeln!(md, "| 作用域 | 写入者 | 模式 | 写入/秒 | 各次运行 | 相对 unfenced | 四分位 | p50 | p99 | WAL 字节/写入 | 被拒 |");
    let _ = writeln!(md, "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} | {} | {:.2}× | {} | {} | {} | {:.0} | {} |",
            r.cell.scopes,
            r.cell.writers,
            r.cell.mode.cli_name(),
            r.per_second,
            span(r.per_second_low, r.per_second_high, 0),
            r.ratio,
            span(r.ratio_p25, r.ratio_p75, 2),
            shown(r.p50),
            shown(r.p99),
            r.wal_per_write,
            r.refused
        );
    }
    let _ = writeln!(md, "\n获取：{ACQUIRERS} 个线程争同一个租约，赢家立即释放；同一个循环（经 `LeaseService`）分别在 PostgreSQL 和三个成员的 etcd 上跑（{} 次运行的中位数，旁边是最低和最高的一次）。\n", o.runs);
    let _ = writeln!(md, "| 租约库 | 线程 | 尝试/秒 | 各次运行 | 每次运行获得授予 | p50 | p99 |");
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|");
    for a in acquires_from_csv(&text)? {
        let _ = writeln!(
            md,
            "| {} | {ACQUIRERS} | {:.0} | {} | {:.0} | {} | {} |",
            a.store,
            a.per_second,
            span(a.per_second_low, a.per_second_high, 0),
            a.granted,
            shown(a.p50),
            shown(a.p99)
        );
    }
    let _ = writeln!(
        md,
        "\n接手：每种做法 {} 次接手，每次是一段新的持有（上一个持有者释放之后获取，新的 token），从获取返回到第一次被接受的写入返回（客户端计时，{} 次运行的中位数）。lock-delay 先按数据库时钟等满 {} ms，再做一次不带栅栏的写入。\n",
        super::handover::TAKEOVERS,
        o.runs,
        crate::object::stage::LOCK_DELAY.as_millis()
    );
    let _ = writeln!(md, "| 做法 | p50 | 最长 |");
    let _ = writeln!(md, "|---|---:|---:|");
    for t in takeovers_from_csv(&text)? {
        let _ = writeln!(md, "| `{}` | {} | {} |", t.design, shown(t.p50), shown(t.max));
    }
    let _ = writeln!(md, "\n目标（只报告、不断言）：");
    for t in targets(&rows) {
        let verdict = if t.ratio >= t.at_least { "达到" } else { "未达到" };
        let _ = writeln!(
            md,
            "- issue {}：{} 相对 unfenced，{} 个作用域、{} 个写入者：{:.3}×（四分位 {}），目标 ≥ {:.2}×，{verdict}",
            t.issue,
            t.cell.mode.cli_name(),
            t.cell.scopes,
            t.cell.writers,
            t.ratio,
            span(t.ratio_p25, t.ratio_p75, 3),
            t.at_least
        );
    }
    Ok(md)
}

/// The flags that narrowed the grid, as the reader typed them (none for
/// the whole grid).
fn grid_flags(o: &super::BenchOptions) -> String {
    let listed = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let mut flags = String::new();
    if o.writers != super::WRITERS {
        flags += &format!(" --writers {}", listed(&o.writers));
    }
    if o.scopes != super::SCOPES {
        flags += &format!(" --scopes {}", listed(&o.scopes));
    }
    flags
}

/// One lease store's acquires over the runs.
#[derive(Clone, Debug)]
pub struct AcquireRow {
    /// `postgres` or `etcd`, as the CSV names it.
    pub id: &'static str,
    /// As the table names it.
    pub store: &'static str,
    /// Median attempts per second, and the lowest and highest run's.
    pub per_second: f64,
    pub per_second_low: f64,
    pub per_second_high: f64,
    /// Median grants per run.
    pub granted: f64,
    /// Median p50 and p99 latency of an attempt.
    pub p50: Duration,
    pub p99: Duration,
}

/// Each store's medians, PostgreSQL first; an error when a store was never measured.
pub fn acquire_rows(results: &Results) -> Result<Vec<AcquireRow>> {
    let mut out = Vec::new();
    for (id, store) in [("postgres", "PostgreSQL"), ("etcd", "etcd")] {
        let of: Vec<&AcquireSample> = results.acquires.iter().filter(|a| a.store == id).collect();
        if of.is_empty() {
            return Err(format!("the bench measured no acquire on {store}").into());
        }
        let values = |f: &dyn Fn(&AcquireSample) -> f64| of.iter().map(|a| f(a)).collect::<Vec<f64>>();
        let rates = values(&|a| a.per_second);
        out.push(AcquireRow {
            id,
            store,
            per_second: median(&rates),
            per_second_low: lowest(&rates),
            per_second_high: highest(&rates),
            granted: median(&values(&|a| a.granted as f64)),
            p50: Duration::from_secs_f64(median(&values(&|a| a.p50.as_secs_f64()))),
            p99: Duration::from_secs_f64(median(&values(&|a| a.p99.as_secs_f64()))),
        });
    }
    Ok(out)
}

/// The table as CSV, one line per cell and one for the acquires, for a chart.
pub fn csv(results: &Results) -> String {
    let mut out = String::from(
        "kind,mode,writers,scopes,per_second,ratio_to_unfenced,p50_ms,p99_ms,wal_bytes_per_write,refused,granted,per_second_min,per_second_max,ratio_p25,ratio_p75\n",
    );
    for r in rows(results) {
        let _ = writeln!(
            out,
            "write,{},{},{},{:.1},{:.3},{:.3},{:.3},{:.0},{},,{:.1},{:.1},{:.3},{:.3}",
            r.cell.mode.cli_name(),
            r.cell.writers,
            r.cell.scopes,
            r.per_second,
            r.ratio,
            ms(r.p50),
            ms(r.p99),
            r.wal_per_write,
            r.refused,
            r.per_second_low,
            r.per_second_high,
            r.ratio_p25,
            r.ratio_p75
        );
    }
    // A store never measured has no line; the markdown, drawn from the
    // same medians, fails.
    for a in acquire_rows(results).unwrap_or_default() {
        let _ = writeln!(
            out,
            "acquire,{},{ACQUIRERS},,{:.1},,{:.3},{:.3},,,{:.0},{:.1},{:.1},,",
            a.id,
            a.per_second,
            ms(a.p50),
            ms(a.p99),
            a.granted,
            a.per_second_low,
            a.per_second_high
        );
    }
    // The longest takeover goes in the p99 column. (A design with no
    // sample has no line; the markdown, drawn from the same medians, fails.)
    for (design, p50, max) in takeovers(results).unwrap_or_default() {
        let _ = writeln!(out, "takeover,{},,,,,{:.3},{:.3},,,,,,,", design.name(), ms(p50), ms(max));
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
    let (low, high, p25, p75) = (at("per_second_min")?, at("per_second_max")?, at("ratio_p25")?, at("ratio_p75")?);
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
            per_second_low: number(low)?,
            per_second_high: number(high)?,
            ratio: number(ratio)?,
            ratio_p25: number(p25)?,
            ratio_p75: number(p75)?,
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

/// The acquire lines of the CSV ([`csv`]), PostgreSQL's then etcd's, each
/// there once; a missing number is an error that names the line.
pub fn acquires_from_csv(text: &str) -> Result<Vec<AcquireRow>> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("acquire,")) {
        let cells: Vec<&str> = line.split(',').collect();
        let number = |i: usize| -> Result<f64> {
            Ok(cells.get(i).and_then(|c| c.parse::<f64>().ok()).ok_or_else(|| format!("the CSV's acquire line has no number in column {}: {line}", i + 1))?)
        };
        let millis = |i: usize| -> Result<Duration> { Ok(Duration::from_secs_f64(number(i)? / 1000.0)) };
        let (id, store) = match cells[1] {
            "postgres" => ("postgres", "PostgreSQL"),
            "etcd" => ("etcd", "etcd"),
            other => return Err(format!("the CSV's acquire line names no store the bench measures ({other:?}): {line}").into()),
        };
        out.push(AcquireRow {
            id,
            store,
            per_second: number(4)?,
            per_second_low: number(11)?,
            per_second_high: number(12)?,
            granted: number(10)?,
            p50: millis(6)?,
            p99: millis(7)?,
        });
    }
    let ids: Vec<&str> = out.iter().map(|a| a.id).collect();
    if ids != ["postgres", "etcd"] {
        return Err(format!("the CSV's acquire lines are {ids:?}, not one for postgres and one for etcd").into());
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

/// Writes the markdown to `out`, the CSV and the figures (one per scope
/// count, see [`chart`]) beside it (`bench-scopes-16.svg` …), each whole.
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
