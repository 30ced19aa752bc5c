//! The book's numbers and names, computed, never typed.
//!
//! A count in the prose ("37 个变异"), a list of cases, a measured figure
//! ("杀掉之后 597.5 ms") goes stale the day the code or the evidence moves on.
//! So the book types none of them: it includes each one by anchor from a
//! small Markdown file under `evidence/26/facts/`, and this module is the one
//! place that computes those files, from the code's own tables (the cases,
//! the variants, the mutations, the redactions) and from the evidence the
//! book already shows (`output.txt`, the snapshots, `bench.md`,
//! `lease-stores.md`, `chaos.md`).
//!
//! [`compute`] is a pure function of [`Inputs`]: the tests feed it a planted
//! input and see the difference. `lab facts` writes the files
//! ([`write`]); `lab facts --check` and the book test compare them with what
//! the code computes now ([`stale`]) and name each file that differs.
//!
//! Each fact is one anchor on lines of its own, which mdBook's
//! `{{#include file:anchor}}` takes without the anchor lines and without a
//! trailing newline, so a fact sits inline in a sentence or a table cell:
//!
//! ```text
//! <!-- ANCHOR: mutations -->
//! 37
//! <!-- ANCHOR_END: mutations -->
//! ```

use crate::cases::{self, Options};
use crate::cluster::etcd::ELECTION_TIMEOUT;
use crate::error::{Result, ResultExt};
use crate::evidence::{self, REDACTIONS};
use crate::lease_stores;
use crate::mutants::{Group, MUTATIONS};
use crate::paths;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// How many of the cases are the article's own (F1–F9); the rest go beyond it.
pub const ARTICLE_CASES: usize = 9;

/// The evidence the facts are read from, as text.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// `evidence/26/output.txt`: the last full run, unredacted.
    pub output: String,
    /// Each case's locked snapshot, by case id (`F1` → `evidence/26/F1.snap`).
    pub snapshots: BTreeMap<String, String>,
    /// `evidence/26/bench.md`: the cost table the book shows.
    pub bench: String,
    /// `evidence/26/lease-stores.md`: one acquire timed on each lease store.
    pub lease_stores: String,
    /// `evidence/26/chaos.md`: the two-minute chaos run, every mode.
    pub chaos: String,
    /// `evidence/26/model.md`: the model checker's table.
    pub model: String,
    /// `evidence/26/model-mutants.md`: the model against the mutations.
    pub model_mutants: String,
    /// The history pages in `evidence/26/history/`: each name (without
    /// `.html`) and its size in bytes.
    pub history_pages: Vec<(String, u64)>,
}

impl Inputs {
    /// Reads the evidence from `evidence/26/`.
    pub fn read() -> Result<Inputs> {
        let dir = paths::evidence_dir();
        let read = |name: &str| fs::read_to_string(dir.join(name)).with_context(|| format!("reading evidence/26/{name}"));
        let mut snapshots = BTreeMap::new();
        for case in cases::ALL {
            snapshots.insert(case.id.to_owned(), read(&format!("{}.snap", case.id))?);
        }
        let mut history_pages = Vec::new();
        let folder = dir.join("history");
        for entry in fs::read_dir(&folder).with_context(|| format!("reading {}", folder.display()))?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".html") {
                history_pages.push((stem.to_owned(), entry.metadata()?.len()));
            }
        }
        Ok(Inputs {
            output: read("output.txt")?,
            snapshots,
            bench: read("bench.md")?,
            lease_stores: read("lease-stores.md")?,
            chaos: read("chaos.md")?,
            model: read("model.md")?,
            model_mutants: read("model-mutants.md")?,
            history_pages,
        })
    }
}

/// One fact: the anchor the book includes, and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    /// The anchor's name, e.g. `mutations`.
    pub anchor: String,
    /// What the include puts in the book: one line for a fact used inline,
    /// several for a table.
    pub text: String,
}

/// One file of facts under `evidence/26/facts/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FactFile {
    /// The file's name, e.g. `code.md`.
    pub name: &'static str,
    /// Where its facts come from, for the file's opening comment.
    pub source: &'static str,
    /// Its facts, in the order they are written.
    pub facts: Vec<Fact>,
}

impl FactFile {
    /// The file's text: an opening comment, then each fact between its anchors.
    pub fn render(&self) -> String {
        let mut out = format!("<!-- 由 `./run.sh facts` 从 {} 算出；不要手改，改代码或证据后重新生成。 -->\n", self.source);
        for fact in &self.facts {
            out.push_str(&format!("<!-- ANCHOR: {0} -->\n{1}\n<!-- ANCHOR_END: {0} -->\n", fact.anchor, fact.text));
        }
        out
    }
}

/// Collects the facts of one file, refusing an anchor twice.
struct Facts(Vec<Fact>);

impl Facts {
    fn add(&mut self, anchor: impl Into<String>, text: impl ToString) {
        let anchor = anchor.into();
        assert!(!self.0.iter().any(|f| f.anchor == anchor), "the fact {anchor} is computed twice");
        self.0.push(Fact { anchor, text: text.to_string() });
    }
}

/// Every facts file, computed from the code and `inputs`.
pub fn compute(inputs: &Inputs) -> Result<Vec<FactFile>> {
    Ok(vec![
        FactFile { name: "code.md", source: "lab/src/cases/mod.rs、lab/src/mutants/mod.rs、lab/src/evidence.rs 里的表", facts: code_facts() },
        FactFile { name: "cases.md", source: "lab/src/cases/mod.rs 的用例表（`./run.sh list` 打印的也是它）", facts: case_facts() },
        FactFile { name: "run.md", source: "evidence/26/output.txt 与各用例的快照", facts: run_facts(inputs)? },
        FactFile { name: "bench.md", source: "evidence/26/bench.md", facts: bench_facts(&inputs.bench)? },
        FactFile { name: "lease-stores.md", source: "evidence/26/lease-stores.md", facts: lease_store_facts(&inputs.lease_stores)? },
        FactFile { name: "chaos.md", source: "evidence/26/chaos.md 与 evidence/26/F15.snap", facts: chaos_facts(inputs)? },
        FactFile { name: "model.md", source: "evidence/26/model.md、evidence/26/model-mutants.md 与 lab/src/model/ 的表", facts: model_facts(inputs)? },
        FactFile { name: "history.md", source: "evidence/26/history/ 里的页面与 lab/src/history/page.rs", facts: history_facts(inputs)? },
    ])
}

/// Ids joined the way the book lists them: `F1、F2、F4`.
fn listed<S: AsRef<str>>(items: &[S]) -> String {
    items.iter().map(AsRef::as_ref).collect::<Vec<_>>().join("、")
}

/// The case a mutation's killer runs (`F4` for `F4 --mode fenced-scope-cte`).
/// A guard of the model is killed by `lab model`, which the book names as
/// the reader runs it.
fn killer_case(killer: &[&str]) -> &'static str {
    let id = killer.first().copied().unwrap_or_default();
    if id == crate::mutants::harness::MODEL {
        return "`./run.sh model`";
    }
    cases::find(id).map_or("?", |c| c.id)
}

/// The cases in the article's order that appear in `ids`, then the other
/// killers among `ids` (`lab model`), once each.
fn in_case_order(ids: impl IntoIterator<Item = &'static str>) -> Vec<&'static str> {
    let ids: Vec<&'static str> = ids.into_iter().collect();
    let mut order: Vec<&'static str> = cases::ALL.iter().map(|c| c.id).filter(|id| ids.contains(id)).collect();
    for id in ids {
        if cases::find(id).is_none() && !order.contains(&id) {
            order.push(id);
        }
    }
    order
}

/// `F1（4 个）、F10（1 个）`: how many of `mutations` each case kills.
fn killers_phrase<'a>(mutations: impl IntoIterator<Item = &'a crate::mutants::Mutation>) -> String {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for m in mutations {
        *count.entry(killer_case(m.killer)).or_default() += 1;
    }
    let order = in_case_order(count.keys().copied().collect::<Vec<_>>());
    listed(&order.iter().map(|id| format!("{id}（{} 个）", count[id])).collect::<Vec<_>>())
}

/// The book's name of a group of exercises, as its anchor says it.
fn group_anchor(group: Group) -> &'static str {
    match group {
        Group::Acquire => "acquire",
        Group::RenewRelease => "renew-release",
        Group::Fence => "fence",
        Group::Client => "client",
        Group::Failover => "failover",
        Group::Chaos => "chaos",
        Group::Etcd => "etcd",
        Group::Faults => "faults",
        Group::Model => "model",
    }
}

/// Counts and names from the code's tables.
fn code_facts() -> Vec<Fact> {
    let mut f = Facts(Vec::new());
    let ids: Vec<&str> = cases::ALL.iter().map(|c| c.id).collect();
    let (first, last) = (ids[0], ids[ids.len() - 1]);
    f.add("cases", ids.len());
    f.add("case-range", format!("{first}–{last}"));
    f.add("article-range", format!("{first}–{}", ids[ARTICLE_CASES - 1]));
    f.add("beyond-range", format!("{}–{last}", ids[ARTICLE_CASES]));
    f.add("beyond-cases", ids.len() - ARTICLE_CASES);

    let variants = cases::variants();
    f.add("modes", crate::vocabulary::FenceMode::ALL.len());
    f.add("scope-fences", crate::vocabulary::FenceMode::SCOPE_FENCES.len());
    f.add("variants", variants.len());
    f.add("variant-names", listed(&variants.iter().map(|v| format!("`{}`", v.name())).collect::<Vec<_>>()));

    f.add("mutations", MUTATIONS.len());
    f.add("mutation-cases", listed(&in_case_order(MUTATIONS.iter().map(|m| killer_case(m.killer)))));
    // The beyond-the-article cases and how many mutations each brought,
    // grouped by that number: `F10、F11 各 1 个，F15、F16 各 2 个`.
    let mut by_count: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for id in &ids[ARTICLE_CASES..] {
        let n = MUTATIONS.iter().filter(|m| killer_case(m.killer) == *id).count();
        by_count.entry(n).or_default().push(id);
    }
    // 各 ("each") only where several cases share the number.
    let phrase: Vec<String> =
        by_count.iter().map(|(n, ids)| if ids.len() > 1 { format!("{} 各 {n} 个", listed(ids)) } else { format!("{} {n} 个", listed(ids)) }).collect();
    f.add("mutations-beyond", phrase.join("，"));
    let groups = [Group::Acquire, Group::RenewRelease, Group::Fence, Group::Client, Group::Failover, Group::Chaos, Group::Etcd, Group::Faults, Group::Model];
    for group in groups {
        let of: Vec<_> = MUTATIONS.iter().filter(|m| m.group == group).collect();
        f.add(format!("exercises-{}", group_anchor(group)), of.len());
        f.add(format!("exercises-{}-killers", group_anchor(group)), killers_phrase(of.iter().copied()));
    }
    debug_assert_eq!(groups.len(), {
        let mut seen: Vec<Group> = MUTATIONS.iter().map(|m| m.group).collect();
        seen.dedup();
        seen.len()
    });

    f.add("redactions", REDACTIONS.len());
    f.add("redaction-tokens", listed(&REDACTIONS.iter().map(|(_, with)| format!("`{with}`")).collect::<Vec<_>>()));
    f.add("etcd-election-timeout", format!("{} ms", ELECTION_TIMEOUT.as_millis()));
    f.add("lease-store-samples", lease_stores::SAMPLES);
    f.0
}

/// The case table as `./run.sh list` prints it: id and title.
fn case_facts() -> Vec<Fact> {
    let options = Options::default();
    let mut table = String::from("| 用例 | 标题（`./run.sh list` 打印的那一行） |\n|---|---|");
    for case in cases::ALL {
        table.push_str(&format!("\n| {} | {} |", case.id, (case.title)(&options).replace('|', "\\|")));
    }
    let mut f = Facts(Vec::new());
    f.add("list", table);
    f.0
}

/// The text after `label` on the first line that holds it, up to the first
/// character `stop` says ends the value.
fn after<'a>(text: &'a str, label: &str, stop: impl Fn(char) -> bool) -> Option<&'a str> {
    let line = text.lines().find(|l| l.contains(label))?;
    let rest = &line[line.find(label)? + label.len()..];
    let end = rest.find(stop).unwrap_or(rest.len());
    Some(rest[..end].trim()).filter(|v| !v.is_empty())
}

/// Like [`after`], or an error naming what was looked for and where.
fn need<'a>(text: &'a str, label: &str, stop: impl Fn(char) -> bool, file: &str) -> Result<&'a str> {
    after(text, label, stop).ok_or_else(|| format!("{file}: no line holds `{label}` followed by a value").into())
}

/// The whole number just before `label` on the first line that holds it
/// (`1220` in `120s: 1220 faults scheduled`), or an error naming the file.
fn number_before(text: &str, label: &str, file: &str) -> Result<String> {
    let line = text.lines().find(|l| l.contains(label)).ok_or_else(|| format!("{file}: no line holds `{label}`"))?;
    let head = &line[..line.find(label).unwrap_or(0)];
    let digits: String = head.chars().rev().take_while(char::is_ascii_digit).collect::<Vec<_>>().into_iter().rev().collect();
    if digits.is_empty() {
        return Err(format!("{file}: no number before `{label}`").into());
    }
    Ok(digits)
}

/// A number of milliseconds as printed (`597.5ms`), for the book (`597.5 ms`).
fn ms(value: &str) -> String {
    format!("{} ms", value.trim_end_matches("ms"))
}

/// The lines of each case in a run's output, by case id: from its `CASE`
/// line up to the next one (`output.txt` has no per-case `SUMMARY` line).
fn output_sections(output: &str) -> BTreeMap<String, Vec<&str>> {
    let mut sections: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in output.lines() {
        if let Some(rest) = line.strip_prefix("CASE ") {
            current = rest.split_whitespace().next().map(str::to_owned);
        }
        if let Some(id) = &current {
            if !line.starts_with("SUMMARY ") {
                sections.entry(id.clone()).or_default().push(line);
            }
        }
    }
    sections
}

/// Facts of the last full run, `output.txt`, against the locked snapshots.
fn run_facts(inputs: &Inputs) -> Result<Vec<Fact>> {
    const FILE: &str = "evidence/26/output.txt";
    let out = &inputs.output;
    let mut f = Facts(Vec::new());
    let summary = out.lines().rev().find_map(|l| l.strip_prefix("SUMMARY ")).ok_or_else(|| format!("{FILE}: no SUMMARY line"))?;
    f.add("summary", format!("`SUMMARY {summary}`"));

    // Which cases' lines in the raw output differ from their locked
    // snapshot: exactly the ones that print a value the redactions mask.
    let sections = output_sections(out);
    let mut differ = Vec::new();
    let mut masked_in = BTreeMap::<&str, Vec<&str>>::new();
    for case in cases::ALL {
        let raw = sections.get(case.id).ok_or_else(|| format!("{FILE}: no CASE {} section", case.id))?;
        let snap = &inputs.snapshots.get(case.id).ok_or_else(|| format!("no snapshot of {}", case.id))?;
        let body = evidence::snapshot_body(snap).ok_or_else(|| format!("evidence/26/{}.snap is not an insta snapshot", case.id))?;
        let locked: Vec<&str> = body.lines().filter(|l| !l.starts_with("SUMMARY ")).collect();
        if *raw != locked {
            differ.push(case.id);
        }
        for (_, with) in REDACTIONS {
            let token = with.split('=').next_back().unwrap_or(with);
            if locked.iter().any(|l| l.contains(token)) {
                masked_in.entry(token).or_default().push(case.id);
            }
        }
    }
    f.add("output-differs", listed(&differ));
    f.add("ms-masked-in", listed(masked_in.get("<MS>ms").map_or(&[][..], Vec::as_slice)));

    let f16 = sections.get("F16").map(|l| l.join("\n")).unwrap_or_default();
    let f14 = sections.get("F14").map(|l| l.join("\n")).unwrap_or_default();
    let digits = |c: char| !(c.is_ascii_digit() || c == '.');
    let number_ms = |c: char| !(c.is_ascii_digit() || c == '.' || c == 'm' || c == 's');
    f.add("etcd-election", ms(need(&f16, "杀掉之后 ", number_ms, FILE)?));
    f.add("f16-remaining", format!("切换前 remaining={}s，切换后 remaining={}s", need(&f16, "切换前 remaining=", digits, FILE)?, need(&f16, "切换后 remaining=", digits, FILE)?));
    // The medians' notes name how many acquires they time (lease_stores::SAMPLES).
    let median = format!("的延迟中位数（{} 次）：", lease_stores::SAMPLES);
    f.add("f16-acquire-median", ms(need(&f16, &median, number_ms, FILE)?));
    f.add("f14-async-median", ms(need(&f14, &format!("异步复制下，主库上一次获取{median}"), number_ms, FILE)?));
    f.add("f14-sync-median", ms(need(&f14, &format!("同步复制（remote_apply）下，主库上一次获取{median}"), number_ms, FILE)?));
    let took = |id: &str| -> Result<String> {
        let lines = sections.get(id).map(|l| l.join("\n")).unwrap_or_default();
        Ok(format!("took={}ms", need(&lines, "(took=", digits, FILE)?))
    };
    f.add("f10-took", took("F10")?);
    f.add("f11-took", took("F11")?);
    Ok(f.0)
}

/// The cells of `bench.md`'s write table: (scopes, writers, mode) → the row's cells.
fn bench_rows(bench: &str) -> BTreeMap<(String, String, String), Vec<String>> {
    let mut rows = BTreeMap::new();
    for line in bench.lines() {
        let cells: Vec<String> = line.trim().trim_matches('|').split('|').map(|c| c.trim().to_owned()).collect();
        // | 作用域 | 写入者 | 模式 | 写入/秒 | 相对 unfenced | p50 | p99 | WAL 字节/写入 | 被拒 |
        if cells.len() == 9 && cells[0].chars().all(|c| c.is_ascii_digit()) && !cells[0].is_empty() {
            rows.insert((cells[0].clone(), cells[1].clone(), cells[2].clone()), cells);
        }
    }
    rows
}

/// Ratios and WAL bytes from the cost table.
fn bench_facts(bench: &str) -> Result<Vec<Fact>> {
    const FILE: &str = "evidence/26/bench.md";
    let rows = bench_rows(bench);
    let cell = |scopes: &str, writers: &str, mode: &str, column: usize| -> Result<String> {
        rows.get(&(scopes.to_owned(), writers.to_owned(), mode.to_owned()))
            .map(|r| r[column].clone())
            .ok_or_else(|| format!("{FILE}: no row for {scopes} scope(s), {writers} writer(s), {mode}").into())
    };
    let mut f = Facts(Vec::new());
    // In the table's own order: scopes, then writers, then mode.
    let mut keys: Vec<&(String, String, String)> = rows.keys().collect();
    keys.sort_by_key(|(s, w, _)| (s.parse::<u32>().unwrap_or(0), w.parse::<u32>().unwrap_or(0)));
    for (scopes, writers, mode) in keys {
        f.add(format!("ratio-{mode}-{scopes}x{writers}"), cell(scopes, writers, mode, 4)?);
    }
    // What the one-statement fence adds to a write's WAL over an unfenced
    // write, on 16 scopes (writers rarely meet on a floor row there).
    let mut extra = Vec::new();
    for writers in ["1", "4", "16"] {
        let wal = |mode| -> Result<i64> { cell("16", writers, mode, 7)?.parse::<i64>().map_err(|e| format!("{FILE}: WAL bytes: {e}").into()) };
        extra.push(wal("fenced-scope-cte")? - wal("unfenced")?);
    }
    f.add("cte-wal-extra", span(&extra));
    // What the reader/writer fence adds to a write's WAL over an unfenced
    // write, in every cell; and its lowest ratio to UNFENCED over the cells.
    let (mut extra, mut lowest) = (Vec::new(), Vec::new());
    for scopes in ["1", "16"] {
        for writers in ["1", "4", "16"] {
            let wal = |mode| -> Result<i64> { cell(scopes, writers, mode, 7)?.parse::<i64>().map_err(|e| format!("{FILE}: WAL bytes: {e}").into()) };
            extra.push(wal("fenced-scope-shared")? - wal("unfenced")?);
            let ratio = cell(scopes, writers, "fenced-scope-shared", 4)?;
            let value: f64 = ratio.trim_end_matches('×').parse().map_err(|e| format!("{FILE}: a ratio: {e}"))?;
            lowest.push((value, ratio));
        }
    }
    f.add("shared-wal-extra", span(&extra));
    let (_, min) = lowest.iter().cloned().fold((f64::INFINITY, String::new()), |a, b| if b.0 < a.0 { b } else { a });
    f.add("shared-min-ratio", min);
    if f.0.is_empty() {
        return Err(format!("{FILE}: no rows in the write table").into());
    }
    Ok(f.0)
}

/// `5` for one value, `3–9` for several.
fn span(values: &[i64]) -> String {
    let (lo, hi) = (values.iter().min().copied().unwrap_or(0), values.iter().max().copied().unwrap_or(0));
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}–{hi}")
    }
}

/// Medians from the lease stores' table, and how they compare.
fn lease_store_facts(table: &str) -> Result<Vec<Fact>> {
    const FILE: &str = "evidence/26/lease-stores.md";
    // | 租约库 | 一次获取要等什么 | 获取延迟中位数 | p90 | 出故障时 |
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---") && !l.contains("获取延迟中位数"))
        .map(|l| l.trim().trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    let median = |starts: &str| -> Result<f64> {
        let row = rows.iter().find(|r| r[0].starts_with(starts)).ok_or_else(|| format!("{FILE}: no row for {starts}"))?;
        row[2].trim_end_matches(" ms").parse::<f64>().map_err(|e| format!("{FILE}: the median of {starts}: {e}").into())
    };
    let (pg, sync_, async_, etcd) = (median("一台 PostgreSQL")?, median("PostgreSQL + 同步")?, median("PostgreSQL + 异步")?, median("etcd")?);
    let mut f = Facts(Vec::new());
    f.add("stores", rows.len());
    f.add("median-postgres", format!("{pg} ms"));
    f.add("median-async", format!("{async_} ms"));
    f.add("median-sync", format!("{sync_} ms"));
    f.add("median-etcd", format!("{etcd} ms"));
    f.add("sync-extra", format!("{:.1} ms", sync_ - async_));
    f.add("etcd-times-postgres", format!("{:.1}", etcd / pg));
    Ok(f.0)
}

/// The chaos table's counts, and the plan of F15's short run.
fn chaos_facts<'a>(inputs: &'a Inputs) -> Result<Vec<Fact>> {
    const FILE: &str = "evidence/26/chaos.md";
    let table = &inputs.chaos;
    let header: Vec<&str> =
        table.lines().find(|l| l.starts_with("| |")).ok_or_else(|| format!("{FILE}: no table header"))?.trim().trim_matches('|').split('|').map(str::trim).collect();
    // A cell may be a link to the mode's history (`[22](history/….html#only=stale)`): its text.
    let text = |cell: &'a str| -> &'a str { cell.strip_prefix('[').and_then(|c| c.split_once("](")).map_or(cell, |(t, _)| t) };
    let modes: Vec<String> = header.iter().skip(1).map(|m| text(m).trim_matches('`').to_lowercase().replace('_', "-")).collect();
    let row = |label: &str| -> Result<Vec<&str>> {
        let line = table.lines().find(|l| l.starts_with(&format!("| {label} |"))).ok_or_else(|| format!("{FILE}: no row `{label}`"))?;
        Ok(line.trim().trim_matches('|').split('|').map(str::trim).skip(1).map(text).collect())
    };
    let mut f = Facts(Vec::new());
    f.add("plan-total", number_before(table, " faults scheduled", FILE)?);
    for (label, anchor) in [
        ("faults injected", "faults"),
        ("stale writes accepted (I3)", "stale"),
        ("tokens reused (I2)", "reused"),
        ("floor regressions (I3)", "regressions"),
        ("lost writes", "lost"),
        ("write attempts", "attempts"),
    ] {
        let values = row(label)?;
        for (mode, value) in modes.iter().zip(values) {
            f.add(format!("{anchor}-{mode}"), value);
        }
    }
    // The page of the mode with stale writes the book points at, filtered to them.
    let stale_row = row("stale writes accepted (I3)")?;
    if let Some((mode, count)) = modes.iter().zip(&stale_row).find(|(m, _)| *m == "fenced-row") {
        f.add("stale-fenced-row-link", format!("[`FENCED_ROW` 的 {count} 次被接受的过期写入](history/chaos-{mode}.html#only=stale)"));
    }
    // F15's plan, printed in its first note and locked (it depends only on the seed).
    let f15 = inputs.snapshots.get("F15").map(String::as_str).unwrap_or_default();
    const F15: &str = "evidence/26/F15.snap";
    f.add("f15-faults", number_before(f15, " faults scheduled", F15)?);
    f.add("f15-aimed", number_before(f15, " of them aimed at the writer", F15)?);
    f.add("f15-pause-long", need(f15, "pause-long ", |c: char| !c.is_ascii_digit(), F15)?);
    Ok(f.0)
}

/// The model checker's totals, and how many mutations it catches.
fn model_facts(inputs: &Inputs) -> Result<Vec<Fact>> {
    use crate::model::mutation::{COUNTERPARTS, NO_COUNTERPART};
    const FILE: &str = "evidence/26/model.md";
    const MUTANTS: &str = "evidence/26/model-mutants.md";
    let mut f = Facts(Vec::new());
    f.add("configurations", number_before(&inputs.model, " configurations", FILE)?);
    f.add("states", number_before(&inputs.model, " states in all", FILE)?);
    f.add("seconds", format!("{} s", need(&inputs.model, "states in all, ", |c: char| !(c.is_ascii_digit() || c == '.'), FILE)?));
    let fenced = inputs.model.lines().find(|l| l.starts_with("| `FENCED_SCOPE` | one server |")).ok_or_else(|| format!("{FILE}: no row for FENCED_SCOPE on one server"))?;
    f.add("states-fenced-scope", fenced.split('|').nth(4).map(str::trim).unwrap_or_default());
    // The length of a configuration's shortest counterexample, as the
    // table's paragraph under it says: `(7 steps, chart …`.
    for (anchor, heading) in [("steps-unfenced", "**`UNFENCED` on one server**"), ("steps-fenced-row", "**`FENCED_ROW` on one server**"), ("steps-async", "**`FENCED_SCOPE` on async standby**")] {
        let line = inputs.model.lines().find(|l| l.starts_with(heading)).ok_or_else(|| format!("{FILE}: no counterexample under {heading}"))?;
        f.add(anchor, number_before(line, " steps, chart", FILE)?);
    }
    f.add("caught", number_before(&inputs.model_mutants, " of ", MUTANTS)?);
    f.add("counterparts", COUNTERPARTS.len());
    f.add("no-counterpart", NO_COUNTERPART.len());
    f.add("mutations", MUTATIONS.len());
    Ok(f.0)
}

/// The evidence's history pages: the list the book links to (cases in
/// their order, then the chaos run's modes), the cases that have one, and
/// the largest page against the limit the history test holds them to.
fn history_facts(inputs: &Inputs) -> Result<Vec<Fact>> {
    let mut pages = inputs.history_pages.clone();
    if pages.is_empty() {
        return Err("evidence/26/history/ holds no page".into());
    }
    // A case's pages in the cases' order (F4 before F10), the chaos run's after them.
    let rank = |name: &str| cases::ALL.iter().position(|c| name == c.id || name.strip_prefix(c.id).is_some_and(|r| r.starts_with('-'))).unwrap_or(usize::MAX);
    pages.sort_by(|a, b| (rank(&a.0), &a.0).cmp(&(rank(&b.0), &b.0)));
    let link = |name: &str| format!("[{name}](history/{name}.html)");
    let mut f = Facts(Vec::new());
    f.add("pages", listed(&pages.iter().map(|(name, _)| link(name)).collect::<Vec<_>>()));
    let mut ids: Vec<&str> = cases::ALL.iter().map(|c| c.id).filter(|id| *id != "F15" && pages.iter().any(|(n, _)| rank(n) < usize::MAX && n.split('-').next() == Some(id))).collect();
    ids.dedup();
    f.add("cases", listed(&ids));
    let (largest, bytes) = pages.iter().max_by_key(|(_, size)| *size).expect("a page");
    f.add("largest", format!("{} KB", bytes.div_ceil(1024)));
    f.add("largest-page", link(largest));
    f.add("limit", format!("{} MB", crate::history::page::MAX_BYTES / (1024 * 1024)));
    Ok(f.0)
}

/// Where the facts files live: `evidence/26/facts/`.
pub fn dir() -> PathBuf {
    paths::evidence_dir().join("facts")
}

/// The files in `dir` whose text differs from `files` (or that are
/// missing), each with a line saying how.
pub fn differences(files: &[FactFile], dir: &Path) -> Vec<String> {
    let mut stale = Vec::new();
    for file in files {
        let path = dir.join(file.name);
        match fs::read_to_string(&path) {
            Ok(text) if text == file.render() => {}
            Ok(text) => {
                let computed = file.render();
                let first = text.lines().zip(computed.lines()).find(|(a, b)| a != b);
                let why = first.map_or("its length differs".to_owned(), |(was, now)| format!("has `{was}` where the code computes `{now}`"));
                stale.push(format!("evidence/26/facts/{} is stale: it {why}", file.name));
            }
            Err(_) => stale.push(format!("evidence/26/facts/{} is missing", file.name)),
        }
    }
    stale
}

/// The committed facts files that differ from what the code and the
/// evidence give now, each named, with the first line that differs.
pub fn stale() -> Result<Vec<String>> {
    Ok(differences(&compute(&Inputs::read()?)?, &dir()))
}

/// Writes every facts file; returns the paths written.
pub fn write() -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for file in compute(&Inputs::read()?)? {
        let path = dir().join(file.name);
        paths::write_whole(&path, &file.render()).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// `lab facts`: writes the files and names them; with `check`, writes
/// nothing and names each stale file instead. True when nothing is stale.
pub fn run(check: bool) -> Result<bool> {
    if !check {
        for path in write()? {
            println!("wrote {}", path.strip_prefix(paths::root()).unwrap_or(&path).display());
        }
        return Ok(true);
    }
    let stale = stale()?;
    for line in &stale {
        eprintln!("lab: {line}");
    }
    if stale.is_empty() {
        println!("evidence/26/facts/ is up to date");
    } else {
        eprintln!("lab: run ./run.sh facts to rewrite them");
    }
    Ok(stale.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The facts the book leans on most are computed from the tables.
    #[test]
    fn counts_come_from_the_tables() {
        let facts = code_facts();
        let get = |a: &str| facts.iter().find(|f| f.anchor == a).map(|f| f.text.clone()).unwrap();
        assert_eq!(get("mutations"), MUTATIONS.len().to_string());
        assert_eq!(get("cases"), cases::ALL.len().to_string());
        assert_eq!(get("variants"), cases::variants().len().to_string());
        assert_eq!(get("case-range"), format!("F1–{}", cases::ALL[cases::ALL.len() - 1].id));
        let sum: usize = facts.iter().filter(|f| f.anchor.starts_with("exercises-") && !f.anchor.ends_with("-killers")).map(|f| f.text.parse::<usize>().unwrap()).sum();
        assert_eq!(sum, MUTATIONS.len(), "every mutation is in one group");
    }

    /// A value planted in the evidence changes the fact computed from it,
    /// and `differences` names the file that no longer matches.
    #[test]
    fn a_planted_value_makes_its_file_stale() {
        let inputs = Inputs::read().unwrap();
        let now = compute(&inputs).unwrap();
        let dir = std::env::temp_dir().join(format!("lab-facts-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        for file in &now {
            fs::write(dir.join(file.name), file.render()).unwrap();
        }
        assert!(differences(&now, &dir).is_empty());

        let mut planted = inputs.clone();
        planted.chaos = planted.chaos.replace("| stale writes accepted (I3) | 0 | 0 |", "| stale writes accepted (I3) | 7 | 0 |");
        assert_ne!(planted.chaos, inputs.chaos, "the planted row is not in chaos.md any more");
        let stale = differences(&compute(&planted).unwrap(), &dir);
        assert_eq!(stale.len(), 1, "{stale:?}");
        assert!(stale[0].starts_with("evidence/26/facts/chaos.md is stale") && stale[0].contains("`7`"), "{}", stale[0]);
        let _ = fs::remove_dir_all(&dir);
    }

    /// A fact that cannot be found is an error naming the file, never a blank.
    #[test]
    fn a_missing_figure_is_an_error() {
        let mut inputs = Inputs::read().unwrap();
        inputs.output = inputs.output.replace("杀掉之后", "之后");
        let err = compute(&inputs).unwrap_err().to_string();
        assert!(err.contains("evidence/26/output.txt") && err.contains("杀掉之后"), "{err}");
    }

    /// The raw run differs from the snapshots exactly where a redaction masks a value.
    #[test]
    fn output_differs_only_where_values_are_masked() {
        let inputs = Inputs::read().unwrap();
        let sections = output_sections(&inputs.output);
        for case in cases::ALL {
            let raw = sections[case.id].join("\n");
            let body = evidence::snapshot_body(&inputs.snapshots[case.id]).unwrap();
            let locked: Vec<&str> = body.lines().filter(|l| !l.starts_with("SUMMARY ")).collect();
            assert_eq!(evidence::redact(&raw), locked.join("\n"), "{}: output.txt and the snapshot differ beyond the redactions", case.id);
        }
    }
}
