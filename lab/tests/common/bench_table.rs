//! What a one-second `bench` run must have written: the markdown table with
//! every cell once, the CSV, a figure per writer count, and progress. Its
//! numbers are never judged: performance is the bench's output, not a
//! test's verdict. The book's own `./run.sh bench --seconds 1 --runs 1`
//! (chapter 22) is checked with it, so the suite measures once.

use std::path::Path;

/// The modes as the table names them, baseline first.
const MODES: [&str; 7] = ["unfenced", "fenced-row", "fenced-scope", "fenced-scope-cte", "fenced-scope-shared", "version-cas", "claim-first"];

/// The takeover table's designs, as its rows name them.
const TAKEOVERS: [&str; 3] = ["fenced-scope", "claim-first", "lock-delay"];

/// Fails with the first thing missing from a one-second, one-run bench
/// that wrote its table to `out` and printed `stdout` and `stderr`.
pub fn check(out: &Path, stdout: &str, stderr: &str) -> Result<(), String> {
    macro_rules! ensure {
        ($cond:expr, $($why:tt)+) => { if !$cond { return Err(format!($($why)+)); } };
    }
    let read = |path: &Path| std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()));
    let md = read(out)?;
    ensure!(stdout == md, "stdout and {} must be the same table", out.display());
    for fact in ["核", "PostgreSQL 1", "fsync=", "synchronous_commit=", "`lab bench --seconds 1 --runs 1`"] {
        ensure!(md.contains(fact), "the facts lack {fact:?}:\n{md}");
    }
    // The write table: one row per (scopes, writers, mode), in table order.
    let rows: Vec<Vec<&str>> = md
        .lines()
        .filter(|l| MODES.iter().any(|m| l.contains(&format!("| {m} |"))))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    let expected: Vec<String> =
        ["1", "16"].iter().flat_map(|s| ["1", "4", "16"].iter().flat_map(move |w| MODES.iter().map(move |m| format!("{s} {w} {m}")))).collect();
    let seen: Vec<String> = rows.iter().map(|r| r[..3.min(r.len())].join(" ")).collect();
    ensure!(seen == expected, "the rows are not every (scopes, writers, mode) once, in order:\n{md}");
    for row in &rows {
        ensure!(row.len() == 9, "a row of 9 columns: {row:?}");
        ensure!(row[3].parse::<f64>().is_ok_and(|w| w > 0.0), "writes/s of {row:?}");
        ensure!(row[4].ends_with('×'), "a ratio in {row:?}");
        ensure!(row[5].ends_with("ms") && row[6].ends_with("ms"), "latencies in {row:?}");
        ensure!(row[7].parse::<f64>().is_ok_and(|b| b > 0.0), "WAL bytes per write of {row:?}");
        ensure!(row[8] == "0", "every write of the bench holds the current token and must be accepted: {row:?}");
    }
    ensure!(rows.iter().filter(|r| r[2] == "unfenced").all(|r| r[4] == "1.00×"), "the baseline's ratio is 1:\n{md}");
    ensure!(md.contains("| 16 |") && md.contains("尝试/秒"), "the acquire table is missing:\n{md}");
    for design in TAKEOVERS {
        let row = md.lines().find(|l| l.starts_with(&format!("| `{design}` |"))).ok_or_else(|| format!("no takeover row for {design}:\n{md}"))?;
        ensure!(row.matches("ms").count() == 2, "the takeover row of {design} has its two latencies: {row}");
    }
    // Issue 14's two targets, and issue 23's in each of the six cells.
    ensure!(md.matches("目标 ≥").count() == 2 + 6, "not every target is reported:\n{md}");

    let csv = read(&out.with_extension("csv"))?;
    let lines: Vec<&str> = csv.lines().collect();
    ensure!(
        lines.first() == Some(&"kind,mode,writers,scopes,per_second,ratio_to_unfenced,p50_ms,p99_ms,wal_bytes_per_write,refused,granted"),
        "the CSV's header:\n{csv}"
    );
    ensure!(lines.len() == 1 + expected.len() + 1 + TAKEOVERS.len(), "a CSV line per cell, one for the acquires and one per takeover design:\n{csv}");
    ensure!(lines[1..=expected.len()].iter().all(|l| l.starts_with("write,") && l.split(',').count() == 11), "the CSV's write lines:\n{csv}");
    ensure!(lines[expected.len() + 1].starts_with("acquire,,16,"), "the CSV's acquire line:\n{csv}");
    for (line, design) in lines[expected.len() + 2..].iter().zip(TAKEOVERS) {
        ensure!(line.starts_with(&format!("takeover,{design},")) && line.split(',').count() == 11, "the CSV's takeover line of {design}:\n{csv}");
    }

    // One figure per writer count: a bar per fenced mode and scope count
    // (two each), and the legend's swatch.
    for writers in ["1", "4", "16"] {
        let figure = read(&out.with_file_name(format!("{}-writers-{writers}.svg", stem(out))))?;
        ensure!(figure.starts_with("<svg ") && figure.contains(&format!("{writers} 个写入者")), "the figure for {writers} writers:\n{figure}");
        for mode in ["FENCED_ROW", "FENCED_SCOPE", "FENCED_SCOPE_CTE", "FENCED_SCOPE_SHARED", "VERSION_CAS", "CLAIM_FIRST"] {
            ensure!(figure.matches(&format!("data-series=\"{mode}\"")).count() == 3, "{mode} in the figure for {writers} writers:\n{figure}");
        }
    }
    // Progress: one line per group of cells (2 scope counts × 3 writer
    // counts), one for the acquires and one for the takeovers.
    ensure!(stderr.contains("[8/8]"), "no progress on stderr:\n{stderr}");
    Ok(())
}

/// The table a book command's measuring bench writes (`./run.sh bench …
/// --out FILE`, not `--redraw`): `FILE`, or `None` for any other command.
pub fn measured_table(line: &str) -> Option<&str> {
    let words: Vec<&str> = line.split('#').next().unwrap_or_default().split_whitespace().collect();
    if words.get(..2) != Some(&["./run.sh", "bench"][..]) || words.contains(&"--redraw") {
        return None;
    }
    words.windows(2).find(|w| w[0] == "--out").map(|w| w[1])
}

/// The name the figures are given beside the table: `bench-mine` for `target/bench-mine.md`.
pub fn stem(out: &Path) -> String {
    out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}
