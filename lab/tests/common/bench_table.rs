//! What a one-second `bench` run must have written: the markdown table with
//! every cell of the grid it named once, the CSV, a figure per scope count,
//! and progress. Its numbers are never judged: performance is the bench's
//! output, not a test's verdict. The book's own `./run.sh bench --seconds 1
//! --runs 1 --writers … --scopes …` (chapter 22) is checked with it, so the
//! suite measures once, and only the cells the reader is told to measure.

use std::path::Path;

/// The modes as the table names them, baseline first.
const MODES: [&str; 7] = ["unfenced", "fenced-row", "fenced-scope", "fenced-scope-cte", "fenced-scope-shared", "version-cas", "claim-first"];

/// The takeover table's designs, as its rows name them.
const TAKEOVERS: [&str; 3] = ["fenced-scope", "claim-first", "lock-delay"];

/// The bench's whole grid, when a command names no `--writers` or `--scopes`.
const WRITERS: [&str; 4] = ["1", "4", "16", "64"];
const SCOPES: [&str; 4] = ["1", "16", "1000", "10000"];

/// A measuring bench command: where it writes its table, and its grid.
pub struct Measured {
    /// `--out`.
    pub table: String,
    /// `--writers` (or the whole grid's), as typed.
    pub writers: Vec<String>,
    /// `--scopes` (or the whole grid's), as typed.
    pub scopes: Vec<String>,
}

/// Fails with the first thing missing from a one-second, one-run bench
/// with the grid `grid` that wrote its table to `out` and printed `stdout`
/// and `stderr`.
pub fn check(out: &Path, grid: &Measured, stdout: &str, stderr: &str) -> Result<(), String> {
    macro_rules! ensure {
        ($cond:expr, $($why:tt)+) => { if !$cond { return Err(format!($($why)+)); } };
    }
    let read = |path: &Path| std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()));
    let md = read(out)?;
    ensure!(stdout == md, "stdout and {} must be the same table", out.display());
    for fact in ["核", "PostgreSQL 1", "fsync=", "synchronous_commit=", "`lab bench --seconds 1 --runs 1"] {
        ensure!(md.contains(fact), "the facts lack {fact:?}:\n{md}");
    }
    // The write table: one row per (scopes, writers, mode), in table order.
    let rows: Vec<Vec<&str>> = md
        .lines()
        .filter(|l| MODES.iter().any(|m| l.contains(&format!("| {m} |"))))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    let expected: Vec<String> =
        grid.scopes.iter().flat_map(|s| grid.writers.iter().flat_map(move |w| MODES.iter().map(move |m| format!("{s} {w} {m}")))).collect();
    let seen: Vec<String> = rows.iter().map(|r| r[..3.min(r.len())].join(" ")).collect();
    ensure!(seen == expected, "the rows are not every (scopes, writers, mode) of the grid once, in order:\n{md}");
    let range = |cell: &str| {
        let mut ends = cell.split('–');
        matches!((ends.next().map(str::parse::<f64>), ends.next().map(str::parse::<f64>), ends.next()), (Some(Ok(low)), Some(Ok(high)), None) if low <= high)
    };
    for row in &rows {
        ensure!(row.len() == 11, "a row of 11 columns: {row:?}");
        ensure!(row[3].parse::<f64>().is_ok_and(|w| w > 0.0), "writes/s of {row:?}");
        ensure!(range(row[4]), "the runs' lowest and highest writes/s in {row:?}");
        ensure!(row[5].ends_with('×'), "a ratio in {row:?}");
        ensure!(range(row[6]), "the ratios' quartiles in {row:?}");
        ensure!(row[7].ends_with("ms") && row[8].ends_with("ms"), "latencies in {row:?}");
        ensure!(row[9].parse::<f64>().is_ok_and(|b| b > 0.0), "WAL bytes per write of {row:?}");
        ensure!(row[10] == "0", "every write of the bench holds the current token and must be accepted: {row:?}");
    }
    ensure!(rows.iter().filter(|r| r[2] == "unfenced").all(|r| r[5] == "1.00×"), "the baseline's ratio is 1:\n{md}");
    for store in ["PostgreSQL", "etcd"] {
        ensure!(md.lines().any(|l| l.starts_with(&format!("| {store} | 16 |"))), "the acquire table has no row for {store}:\n{md}");
    }
    for design in TAKEOVERS {
        let row = md.lines().find(|l| l.starts_with(&format!("| `{design}` |"))).ok_or_else(|| format!("no takeover row for {design}:\n{md}"))?;
        ensure!(row.matches("ms").count() == 2, "the takeover row of {design} has its two latencies: {row}");
    }
    // Issue 45's target in each cell of the grid.
    let cells = grid.writers.len() * grid.scopes.len();
    ensure!(md.matches("目标 ≥").count() == cells, "not every target is reported:\n{md}");

    let csv = read(&out.with_extension("csv"))?;
    let lines: Vec<&str> = csv.lines().collect();
    ensure!(
        lines.first()
            == Some(&"kind,mode,writers,scopes,per_second,ratio_to_unfenced,p50_ms,p99_ms,wal_bytes_per_write,refused,granted,per_second_min,per_second_max,ratio_p25,ratio_p75"),
        "the CSV's header:\n{csv}"
    );
    let stores = ["postgres", "etcd"];
    ensure!(lines.len() == 1 + expected.len() + stores.len() + TAKEOVERS.len(), "a CSV line per cell, one per store's acquires and one per takeover design:\n{csv}");
    ensure!(lines[1..=expected.len()].iter().all(|l| l.starts_with("write,") && l.split(',').count() == 15), "the CSV's write lines:\n{csv}");
    for (line, store) in lines[expected.len() + 1..].iter().zip(stores) {
        ensure!(line.starts_with(&format!("acquire,{store},16,")) && line.split(',').count() == 15, "the CSV's acquire line of {store}:\n{csv}");
    }
    for (line, design) in lines[expected.len() + 1 + stores.len()..].iter().zip(TAKEOVERS) {
        ensure!(line.starts_with(&format!("takeover,{design},")) && line.split(',').count() == 15, "the CSV's takeover line of {design}:\n{csv}");
    }

    // One figure per scope count: for each fenced mode a line (or a lone
    // point) through a point per writer count, and the legend's swatch.
    for scopes in &grid.scopes {
        let figure = read(&out.with_file_name(format!("{}-scopes-{scopes}.svg", stem(out))))?;
        ensure!(figure.starts_with("<svg ") && figure.contains(&format!("{scopes} 个作用域")), "the figure for {scopes} scopes:\n{figure}");
        for mode in ["FENCED_ROW", "FENCED_SCOPE", "FENCED_SCOPE_CTE", "FENCED_SCOPE_SHARED", "VERSION_CAS", "CLAIM_FIRST"] {
            let marks = figure.matches(&format!("data-mode=\"{mode}\"")).count() + figure.matches(&format!("data-series=\"{mode}\"")).count();
            let lines = usize::from(grid.writers.len() > 1);
            ensure!(marks == grid.writers.len() + lines + 1, "{mode} in the figure for {scopes} scopes: {marks} marks:\n{figure}");
        }
    }
    // Progress: one line per group of cells, two for the acquires and one
    // for the takeovers.
    let steps = cells + 3;
    ensure!(stderr.contains(&format!("[{steps}/{steps}]")), "no progress on stderr, or not to [{steps}/{steps}]:\n{stderr}");
    Ok(())
}

/// A book command's measuring bench (`./run.sh bench … --out FILE`, not
/// `--redraw`): its table and grid, or `None` for any other command.
pub fn measured_table(line: &str) -> Option<Measured> {
    let words: Vec<&str> = line.split('#').next().unwrap_or_default().split_whitespace().collect();
    if words.get(..2) != Some(&["./run.sh", "bench"][..]) || words.contains(&"--redraw") {
        return None;
    }
    let flag = |name: &str| words.windows(2).find(|w| w[0] == name).map(|w| w[1]);
    let listed = |name: &str, whole: &[&str]| -> Vec<String> {
        let mut counts: Vec<usize> = flag(name).map_or_else(|| whole.iter().map(|c| c.parse().unwrap()).collect(), |l| l.split(',').map(|c| c.parse().unwrap()).collect());
        counts.sort_unstable();
        counts.dedup();
        counts.iter().map(usize::to_string).collect()
    };
    Some(Measured { table: flag("--out")?.to_owned(), writers: listed("--writers", &WRITERS), scopes: listed("--scopes", &SCOPES) })
}

/// The name the figures are given beside the table: `bench-mine` for `target/bench-mine.md`.
pub fn stem(out: &Path) -> String {
    out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}
