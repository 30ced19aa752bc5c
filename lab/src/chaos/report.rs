//! The chaos run's table: the checker's counts, one column per mode, as
//! `lab chaos` prints it and as the book includes it (`evidence/26/chaos.md`).

use super::run::{Config, ModeRun};
use super::schedule::Schedule;
use crate::vocabulary::FaultKind;
use crate::error::Result;
use crate::history::FindingKind;
use crate::report_files;
use crate::vocabulary::FenceMode;
use crate::sysinfo::Machine;
use std::fmt::Write;
use std::path::Path;

/// The folder beside the table where each mode's history is written
/// (`evidence/26/history/` beside `evidence/26/chaos.md`); the table's
/// links lead there.
pub const HISTORY_DIR: &str = "history";

/// One row of the table: a label and each mode's value.
struct Row {
    /// What the row counts.
    label: String,
    /// One value per mode.
    values: Vec<String>,
    /// The checker's findings this row counts: in the Markdown, a count
    /// above zero links to its mode's history page showing just those.
    findings: Option<FindingKind>,
}

/// The rows, in the order of the checker's own rendering, then the faults
/// by kind, what found no target, and the verdict.
fn rows(runs: &[ModeRun]) -> Vec<Row> {
    let count = |label: &str, f: &dyn Fn(&ModeRun) -> usize| Row { label: label.into(), values: runs.iter().map(|r| f(r).to_string()).collect(), findings: None };
    let found = |kind: FindingKind, row: Row| Row { findings: Some(kind), ..row };
    let mut rows = vec![
        count("write attempts", &|r| r.verdict.attempts),
        count("accepted", &|r| r.verdict.accepted),
        count("refused", &|r| r.verdict.refused),
        count("holdings granted", &|r| r.verdict.holdings),
        found(FindingKind::Stale, count("stale writes accepted (I3)", &|r| r.verdict.stale_accepted)),
        found(FindingKind::Reused, count("tokens reused (I2)", &|r| r.verdict.tokens_reused)),
        found(FindingKind::Regression, count("floor regressions (I3)", &|r| r.verdict.floor_regressions)),
        found(FindingKind::Lost, count("lost writes", &|r| r.verdict.lost_writes)),
        count("faults injected", &|r| r.verdict.faults.values().sum()),
    ];
    for kind in FaultKind::ALL {
        rows.push(count(&format!("  {kind}"), &|r| r.verdict.faults.get(&kind).copied().unwrap_or(0)));
    }
    rows.push(count("faults with no target", &|r| r.missed.values().sum()));
    rows.push(count("partitions that did not cut", &|r| r.uncut));
    rows.push(count("holder processes", &|r| r.started));
    rows.push(count("  failed (server restarts)", &|r| r.failed));
    rows.push(Row {
        label: "verdict".into(),
        values: runs.iter().map(|r| r.verdict.judgement().word().into()).collect(),
        findings: None,
    });
    rows
}

/// The table as text: a label column, then one right-aligned column per mode.
pub fn table(runs: &[ModeRun]) -> String {
    let rows = rows(runs);
    let heads: Vec<String> = runs.iter().map(|r| r.mode.name().to_owned()).collect();
    let widths: Vec<usize> =
        heads.iter().enumerate().map(|(i, h)| rows.iter().map(|r| r.values[i].len()).chain([h.len()]).max().unwrap_or(0)).collect();
    let label_width = rows.iter().map(|r| r.label.len()).max().unwrap_or(0);
    let mut out = String::new();
    let line = |label: &str, values: &[String]| {
        let cells: Vec<String> = values.iter().zip(&widths).map(|(v, w)| format!("{v:>w$}")).collect();
        format!("{label:<label_width$}  {}", cells.join("  ")).trim_end().to_owned()
    };
    let _ = writeln!(out, "{}", line("", &heads));
    for row in &rows {
        let _ = writeln!(out, "{}", line(&row.label, &row.values));
    }
    out
}

/// The table as Markdown, with what the run was and where it ran: the
/// file the book includes. Each mode's name links to its history's page
/// in [`HISTORY_DIR`] beside the table, and each count of findings above
/// zero to the page showing just those operations (`#only=stale`).
pub fn markdown(config: &Config, schedule: &Schedule, runs: &[ModeRun], machine: &str) -> String {
    let rows = rows(runs);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "`lab chaos --seed {} --holders {} --duration {}s --mode {}`：{}\n",
        config.seed,
        config.holders,
        config.duration.as_secs(),
        match runs {
            [one] => one.mode.cli_name(),
            _ => "all".into(),
        },
        schedule
    );
    let page = |run: &ModeRun| format!("{HISTORY_DIR}/{}.html", run.record.run.name);
    let _ = writeln!(out, "| | {} |", runs.iter().map(|r| format!("[`{}`]({})", r.mode.name(), page(r))).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(runs.len()));
    for row in &rows {
        let label = row.label.trim_start();
        let label = if row.label.starts_with(' ') { format!("　{label}") } else { label.to_owned() };
        let cells: Vec<String> = row
            .values
            .iter()
            .zip(runs)
            .map(|(value, run)| match row.findings {
                Some(kind) if value != "0" => format!("[{value}]({}#only={})", page(run), kind.name()),
                _ => value.clone(),
            })
            .collect();
        let _ = writeln!(out, "| {label} | {} |", cells.join(" | "));
    }
    let took: Vec<String> = runs.iter().map(|r| format!("{} {:.0}s", r.mode.name(), r.took.as_secs_f64())).collect();
    let _ = writeln!(out, "\n机器：{machine}。每种模式实际用时（含读取历史）：{}。", took.join("，"));
    out
}

/// The machine's facts for the record, as the book's table states them:
/// processors, model, load at the start, kernel, and the server's version.
pub fn machine_line(machine: &Machine, server_version: &str) -> String {
    format!(
        "{} 个 CPU（{}），开始时负载 {}，Linux {}，PostgreSQL {server_version}",
        machine.cpus_shown(),
        machine.model,
        machine.load,
        machine.kernel
    )
}

/// One chart per mode (mermaid's xychart draws no legend, so one mode a
/// chart): the token of each accepted write in the order the resource
/// recorded it. A scope fence draws a staircase that never steps down; a
/// stale write accepted is a dip below a step already drawn.
pub fn charts(runs: &[ModeRun]) -> Vec<(FenceMode, String)> {
    runs.iter()
        .map(|run| {
            let tokens: Vec<String> = run.accepted_tokens.iter().map(i64::to_string).collect();
            let top = run.accepted_tokens.iter().max().copied().unwrap_or(0) + 1;
            let chart = format!(
                "xychart-beta\n    title \"{}：被接受的写入的 token，按接受顺序\"\n    x-axis \"第几次被接受的写入\" 1 --> {}\n    y-axis \"token\" 0 --> {top}\n    line [{}]\n",
                run.mode,
                tokens.len().max(1),
                tokens.join(", ")
            );
            (run.mode, chart)
        })
        .collect()
}

/// Writes the table to `out` and one chart per mode beside it
/// (`chaos-fenced-scope.mmd` …), each whole.
pub fn write_files(config: &Config, schedule: &Schedule, runs: &[ModeRun], machine: &str, out: &Path) -> Result<()> {
    let charts = charts(runs).into_iter().map(|(mode, chart)| (format!("{}.mmd", mode.cli_name()), chart)).collect();
    report_files::write(out, markdown(config, schedule, runs, machine), Vec::new(), charts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chart is the accepted tokens in the order given, one chart per
    /// mode, its axes sized to them.
    #[test]
    fn a_chart_draws_the_accepted_tokens_in_order() {
        let run = ModeRun::judged(FenceMode::Unfenced, Default::default(), vec![1, 3, 2, 4]);
        let charts = charts(&[run]);
        assert_eq!(charts.len(), 1);
        let (mode, chart) = &charts[0];
        assert_eq!(*mode, FenceMode::Unfenced);
        assert!(chart.starts_with("xychart-beta\n"), "{chart}");
        assert!(chart.contains("x-axis \"第几次被接受的写入\" 1 --> 4\n"), "{chart}");
        assert!(chart.contains("y-axis \"token\" 0 --> 5\n"), "{chart}");
        assert!(chart.contains("line [1, 3, 2, 4]\n"), "{chart}");
    }
}
