//! The chaos run's table: the checker's counts, one column per mode, as
//! `lab chaos` prints it and as the book includes it (`evidence/26/chaos.md`),
//! and its charts; all drawn from the run's data ([`ChaosData`]).

use super::results::{ChaosData, ModeData};
use crate::result_data::ResultData;
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
/// by kind, the fates of the faults not injected, and the verdict.
fn rows(data: &ChaosData) -> Vec<Row> {
    let modes = &data.modes;
    let count = |label: &str, f: &dyn Fn(&ModeData) -> usize| Row { label: label.into(), values: modes.iter().map(|m| f(m).to_string()).collect(), findings: None };
    let found = |kind: FindingKind, row: Row| Row { findings: Some(kind), ..row };
    let mut rows = vec![
        count("write attempts", &|m| m.verdict.attempts),
        count("accepted", &|m| m.verdict.accepted),
        count("refused", &|m| m.verdict.refused),
        count("holdings granted", &|m| m.verdict.holdings),
        found(FindingKind::Stale, count("stale writes accepted (I3)", &|m| m.verdict.stale_accepted)),
        found(FindingKind::Reused, count("tokens reused (I2)", &|m| m.verdict.tokens_reused)),
        found(FindingKind::Regression, count("floor regressions (I3)", &|m| m.verdict.floor_regressions)),
        found(FindingKind::Lost, count("lost writes", &|m| m.verdict.lost_writes)),
        count("faults injected", &|m| m.fates.injected),
    ];
    for kind in FaultKind::ALL {
        // A kind the history has no fault of: none was injected.
        rows.push(count(&format!("  {kind}"), &|m| m.verdict.faults.get(&kind).copied().unwrap_or(0)));
    }
    // With the faults injected, these make up the schedule: each fault of it
    // met exactly one of the four fates (`workload::Fate`).
    rows.push(count("faults with no target", &|m| m.fates.no_target));
    rows.push(count("partitions that did not cut", &|m| m.fates.did_not_cut));
    rows.push(count("faults not reached before the end", &|m| m.fates.not_reached));
    rows.push(count("holder processes", &|m| m.holder_processes));
    rows.push(count("  failed (server restarts)", &|m| m.failed));
    rows.push(Row { label: "verdict".into(), values: modes.iter().map(|m| m.verdict.judgement().word().into()).collect(), findings: None });
    rows
}

/// The table as text: a label column, then one right-aligned column per mode.
pub fn table(data: &ChaosData) -> String {
    let rows = rows(data);
    let heads: Vec<String> = data.modes.iter().map(|m| m.mode.name().to_owned()).collect();
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
pub fn markdown(data: &ChaosData) -> String {
    let rows = rows(data);
    let modes = &data.modes;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "`lab chaos --seed {} --holders {} --duration {}s --mode {}`：{}\n",
        data.seed,
        data.holders,
        data.duration_s,
        match modes.as_slice() {
            [one] => one.mode.cli_name(),
            _ => "all",
        },
        data.plan
    );
    let page = |m: &ModeData| format!("{HISTORY_DIR}/{}.html", m.history);
    let _ = writeln!(out, "| | {} |", modes.iter().map(|m| format!("[`{}`]({})", m.mode.name(), page(m))).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(modes.len()));
    for row in &rows {
        let label = row.label.trim_start();
        let label = if row.label.starts_with(' ') { format!("　{label}") } else { label.to_owned() };
        let cells: Vec<String> = row
            .values
            .iter()
            .zip(modes)
            .map(|(value, m)| match row.findings {
                Some(kind) if value != "0" => format!("[{value}]({}#only={})", page(m), kind.name()),
                _ => value.clone(),
            })
            .collect();
        let _ = writeln!(out, "| {label} | {} |", cells.join(" | "));
    }
    let took: Vec<String> = modes.iter().map(|m| format!("{} {:.0}s", m.mode.name(), m.seconds)).collect();
    let _ = writeln!(out, "\n机器：{}。每种模式实际用时（含读取历史）：{}。", data.machine, took.join("，"));
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
pub fn charts(data: &ChaosData) -> Vec<(FenceMode, String)> {
    data.modes
        .iter()
        .map(|m| {
            let tokens: Vec<String> = m.accepted_tokens.iter().map(i64::to_string).collect();
            let top = m.accepted_tokens.iter().max().copied().unwrap_or(0) + 1;
            let chart = format!(
                "xychart-beta\n    title \"{}：被接受的写入的 token，按接受顺序\"\n    x-axis \"第几次被接受的写入\" 1 --> {}\n    y-axis \"token\" 0 --> {top}\n    line [{}]\n",
                m.mode,
                tokens.len().max(1),
                tokens.join(", ")
            );
            (m.mode, chart)
        })
        .collect()
}

/// Writes the data to `out` with `.json`, the table drawn from it to
/// `out`, and one chart per mode beside it (`chaos-fenced-scope.mmd` …),
/// each whole.
pub fn write_files(data: &ChaosData, out: &Path) -> Result<()> {
    ResultData::write(data, &out.with_extension("json"))?;
    let charts = charts(data).into_iter().map(|(mode, chart)| (format!("{}.mmd", mode.cli_name()), chart)).collect();
    report_files::write(out, markdown(data), Vec::new(), charts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chart is the accepted tokens in the order given, one chart per
    /// mode, its axes sized to them.
    #[test]
    fn a_chart_draws_the_accepted_tokens_in_order() {
        let mode = ModeData {
            mode: FenceMode::Unfenced,
            history: "chaos-unfenced".into(),
            verdict: Default::default(),
            fates: Default::default(),
            holder_processes: 0,
            failed: 0,
            seconds: 0.0,
            accepted_tokens: vec![1, 3, 2, 4],
        };
        let data = ChaosData {
            schema: 1,
            seed: 1,
            holders: 1,
            duration_s: 1.0,
            plan: String::new(),
            scheduled: 0,
            aimed: 0,
            scheduled_by_kind: Default::default(),
            machine: String::new(),
            modes: vec![mode],
        };
        let charts = charts(&data);
        assert_eq!(charts.len(), 1);
        let (mode, chart) = &charts[0];
        assert_eq!(*mode, FenceMode::Unfenced);
        assert!(chart.starts_with("xychart-beta\n"), "{chart}");
        assert!(chart.contains("x-axis \"第几次被接受的写入\" 1 --> 4\n"), "{chart}");
        assert!(chart.contains("y-axis \"token\" 0 --> 5\n"), "{chart}");
        assert!(chart.contains("line [1, 3, 2, 4]\n"), "{chart}");
    }
}
