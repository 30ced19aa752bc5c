//! The book's numbers and names, computed, never typed.
//!
//! A count in the prose ("37 个变异"), a list of cases, a measured figure
//! ("杀掉之后 597.5 ms") goes stale the day the code or the evidence moves on.
//! So the book types none of them: it includes each one by anchor from a
//! small Markdown file under `evidence/26/facts/`, and this module is the one
//! place that computes those files, from the code's own tables (the cases,
//! the variants, the mutations, the redactions) and from the evidence's
//! data (`output.json`, the snapshots, `bench.csv`, `lease-stores.json`,
//! `chaos.json`, `model.json`, `model-mutants.json`, and the sizes of the
//! history pages), each file read by its one reader (see
//! [`crate::result_data`]), never from the Markdown the book shows.
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

mod code;

use code::{case_facts, code_facts, listed, try_facts};
use crate::bench::report::Row as BenchRow;
use crate::cases::run_data::RunData;
use crate::chaos::results::ChaosData;
use crate::queue::chaos::QueueChaosData;
use crate::lease_stores::StoresData;
use crate::model::results::{ModelData, MutantsData};
use crate::result_data::ResultData;
use crate::vocabulary::FenceMode;
use crate::cases;
use crate::error::{Result, ResultExt};
use crate::evidence::{self, REDACTIONS};
use crate::mutants::MUTATIONS;
use crate::paths;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// How many of the cases are the article's own (F1–F9); the rest go beyond it.
pub const ARTICLE_CASES: usize = 9;

/// The evidence the facts are read from.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// `evidence/26/output.json`: the last full run, as data.
    pub run: RunData,
    /// Each case's locked snapshot, by case id (`F1` → `evidence/26/F1.snap`).
    pub snapshots: BTreeMap<String, String>,
    /// `evidence/26/bench.csv`: the cost table's rows, which its table and
    /// figures are drawn from.
    pub bench: Vec<BenchRow>,
    /// `evidence/26/bench.csv`'s takeover lines: grant to first write.
    pub takeovers: Vec<crate::bench::report::TakeoverRow>,
    /// `evidence/26/bench.csv`'s acquire lines: contended acquires per store.
    pub acquires: Vec<crate::bench::report::AcquireRow>,
    /// `evidence/26/lease-stores.json`: one acquire timed on each lease store.
    pub lease_stores: StoresData,
    /// `evidence/26/chaos.json`: the two-minute chaos run, every mode.
    pub chaos: ChaosData,
    /// `evidence/26/chaos-queue.json`: the job queue under the nemesis,
    /// the fixed queue and every bug.
    pub chaos_queue: QueueChaosData,
    /// `evidence/26/queues.json`: real queue crates under the nemesis.
    pub queues: crate::queue::crates::QueuesData,
    /// `evidence/26/model.json`: the model checker's table.
    pub model: ModelData,
    /// `evidence/26/model-3.json`: the same table with three holders.
    pub model_3: ModelData,
    /// `evidence/26/model-mutants.json`: the model against the mutations.
    pub model_mutants: MutantsData,
    /// `evidence/26/s3-probe.json`: conditional PUTs raced on a real
    /// S3-compatible server (`./run.sh s3-probe`, the `s3probe/` project).
    pub s3_probe: serde_json::Value,
    /// The history pages in `evidence/26/history/`: each name (without
    /// `.html`) and its size in bytes.
    pub history_pages: Vec<(String, u64)>,
}

impl Inputs {
    /// Reads the evidence from `evidence/26/`.
    pub fn read() -> Result<Inputs> {
        Inputs::read_in(&paths::evidence_dir())
    }

    /// Reads the evidence from `dir`, laid out as `evidence/26/` is.
    pub fn read_in(dir: &Path) -> Result<Inputs> {
        let read = |name: &str| fs::read_to_string(dir.join(name)).with_context(|| format!("reading {}", dir.join(name).display()));
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
            run: RunData::read(&dir.join("output.json"))?,
            snapshots,
            bench: crate::bench::report::rows_from_csv(&read("bench.csv")?).with_context(|| format!("reading {}", dir.join("bench.csv").display()))?,
            takeovers: crate::bench::report::takeovers_from_csv(&read("bench.csv")?).with_context(|| format!("reading {}", dir.join("bench.csv").display()))?,
            acquires: crate::bench::report::acquires_from_csv(&read("bench.csv")?).with_context(|| format!("reading {}", dir.join("bench.csv").display()))?,
            lease_stores: StoresData::read(&dir.join("lease-stores.json"))?,
            chaos: ChaosData::read(&dir.join("chaos.json"))?,
            chaos_queue: QueueChaosData::read(&dir.join("chaos-queue.json"))?,
            queues: crate::queue::crates::QueuesData::read(&dir.join("queues.json"))?,
            model: ModelData::read(&dir.join("model.json"))?,
            model_3: ModelData::read(&dir.join("model-3.json"))?,
            model_mutants: MutantsData::read(&dir.join("model-mutants.json"))?,
            s3_probe: serde_json::from_str(&read("s3-probe.json")?).with_context(|| format!("reading {}", dir.join("s3-probe.json").display()))?,
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
        FactFile { name: "try.md", source: "lab/src/mutants/mod.rs 的变异表（`./run.sh try` 打印的也是它）", facts: try_facts() },
        FactFile { name: "run.md", source: "evidence/26/output.json 与各用例的快照", facts: run_facts(inputs)? },
        FactFile { name: "bench.md", source: "evidence/26/bench.csv", facts: bench_facts(&inputs.bench, &inputs.takeovers, &inputs.acquires)? },
        FactFile { name: "lease-stores.md", source: "evidence/26/lease-stores.json", facts: lease_store_facts(&inputs.lease_stores)? },
        FactFile { name: "chaos.md", source: "evidence/26/chaos.json 与 evidence/26/output.json", facts: chaos_facts(inputs)? },
        FactFile { name: "chaos-queue.md", source: "evidence/26/chaos-queue.json", facts: queue_chaos_facts(&inputs.chaos_queue)? },
        FactFile { name: "queues.md", source: "evidence/26/queues.json", facts: queues_facts(&inputs.queues)? },
        FactFile { name: "model.md", source: "evidence/26/model.json、evidence/26/model-mutants.json 与 lab/src/model/ 的表", facts: model_facts(inputs)? },
        FactFile { name: "history.md", source: "evidence/26/history/ 里的页面与 lab/src/history/page.rs", facts: history_facts(inputs)? },
        FactFile { name: "s3-probe.md", source: "evidence/26/s3-probe.json", facts: s3_probe_facts(&inputs.s3_probe)? },
    ])
}


/// A figure of the run's case `id`, or an error naming the file, the case
/// and the figure.
fn figure(run: &RunData, id: &str, name: &str) -> Result<f64> {
    const FILE: &str = "evidence/26/output.json";
    run.case(id).and_then(|c| c.figure(name).map_err(Into::into)).with_context(|| FILE.to_owned())
}

/// Facts of the last full run, `output.json`, against the locked snapshots.
fn run_facts(inputs: &Inputs) -> Result<Vec<Fact>> {
    let run = &inputs.run;
    let mut f = Facts(Vec::new());
    f.add("summary", format!("`SUMMARY passed={} failed={}`", run.passed, run.failed));

    // How long each case took in that run (its own time, without the
    // cluster's start and stop), and the slowest: what "a few seconds"
    // in the prose is measured as.
    for case in cases::ALL {
        let time = run.times.iter().find(|t| t.id == case.id).ok_or_else(|| format!("evidence/26/output.json: no time of {}", case.id))?;
        f.add(format!("elapsed-{}", case.id), format!("{:.1} s", time.elapsed_ms / 1000.0));
    }
    let slowest = run.times.iter().max_by(|a, b| a.elapsed_ms.total_cmp(&b.elapsed_ms)).ok_or("evidence/26/output.json: no case times")?;
    f.add("slowest-case", format!("{}（{:.1} s）", slowest.id, slowest.elapsed_ms / 1000.0));
    let whole: f64 = run.times.iter().map(|t| t.elapsed_ms).sum();
    f.add("cases-elapsed", format!("{:.0} s", whole / 1000.0));

    // Which cases' lines in the raw run differ from their locked snapshot:
    // exactly the ones that print a value the redactions mask.
    let mut differ = Vec::new();
    let mut masked_in = BTreeMap::<&str, Vec<&str>>::new();
    for case in cases::ALL {
        let raw = run.case(case.id).context("evidence/26/output.json")?.text();
        let snap = &inputs.snapshots.get(case.id).ok_or_else(|| format!("no snapshot of {}", case.id))?;
        let locked = evidence::snapshot_body(snap).ok_or_else(|| format!("evidence/26/{}.snap is not an insta snapshot", case.id))?;
        if raw.lines().ne(locked.lines().filter(|l| !l.starts_with("SUMMARY "))) {
            differ.push(case.id);
        }
        for (_, with) in REDACTIONS {
            let token = with.split('=').next_back().unwrap_or(with);
            if locked.contains(token) {
                masked_in.entry(token).or_default().push(case.id);
            }
        }
    }
    f.add("output-differs", listed(&differ));
    f.add("ms-masked-in", listed(masked_in.get("<MS>ms").map_or(&[][..], Vec::as_slice)));

    let ms = |value: f64| format!("{value:.1} ms");
    f.add("etcd-election", ms(figure(run, "F16", "election_ms")?));
    f.add(
        "f16-remaining",
        format!("切换前 remaining={}s，切换后 remaining={}s", figure(run, "F16", "remaining_before_s")?, figure(run, "F16", "remaining_after_s")?),
    );
    f.add("f16-acquire-median", ms(figure(run, "F16", "acquire_median_ms")?));
    f.add("f14-async-median", ms(figure(run, "F14", "async_acquire_median_ms")?));
    f.add("f14-sync-median", ms(figure(run, "F14", "sync_acquire_median_ms")?));
    f.add("f10-took", format!("took={}ms", figure(run, "F10", "took_ms")?));
    f.add("f11-took", format!("took={}ms", figure(run, "F11", "took_ms")?));
    Ok(f.0)
}

/// Ratios and WAL bytes from the cost table's rows, as its table shows
/// them (`bench::report::markdown` draws it from the same rows).
fn bench_facts(rows: &[BenchRow], takeovers: &[crate::bench::report::TakeoverRow], acquires: &[crate::bench::report::AcquireRow]) -> Result<Vec<Fact>> {
    use crate::bench::{SCOPES, WRITERS};
    const FILE: &str = "evidence/26/bench.csv";
    if rows.is_empty() {
        return Err(format!("{FILE}: no rows in the write table").into());
    }
    let row = |scopes: usize, writers: usize, mode: FenceMode| -> Result<&BenchRow> {
        rows.iter()
            .find(|r| r.cell.scopes == scopes && r.cell.writers == writers && r.cell.mode == mode)
            .ok_or_else(|| format!("{FILE}: no row for {scopes} scope(s), {writers} writer(s), {}", mode.cli_name()).into())
    };
    let ratio = |r: &BenchRow| format!("{:.2}×", r.ratio);
    let wal = |scopes, writers, mode| -> Result<i64> { Ok(row(scopes, writers, mode)?.wal_per_write.round() as i64) };
    let mut f = Facts(Vec::new());
    // In the table's own order: scopes, then writers, then mode.
    let mut ordered: Vec<&BenchRow> = rows.iter().collect();
    ordered.sort_by_key(|r| (r.cell.scopes, r.cell.writers));
    for r in ordered {
        f.add(format!("ratio-{}-{}x{}", r.cell.mode.cli_name(), r.cell.scopes, r.cell.writers), ratio(r));
    }
    // WAL bytes compare between modes only where the writes touch few
    // pages: with a thousand scopes and more (or 64 writers' parts), the
    // full-page images written after each checkpoint land on whichever mode
    // first touches a page.
    // What the one-statement fence adds to a write's WAL over an unfenced
    // write, on 16 scopes with at most 16 writers (each its own floor row).
    use crate::bench::report::WAL_COMPARED_UP_TO as FEW;
    let mut extra = Vec::new();
    for writers in WRITERS.into_iter().filter(|&w| w <= FEW) {
        extra.push(wal(FEW, writers, FenceMode::FencedScopeCte)? - wal(FEW, writers, FenceMode::Unfenced)?);
    }
    f.add("cte-wal-extra", span(&extra));
    // What the reader/writer fence adds to a write's WAL over an unfenced
    // write on 1 and 16 scopes with at most 16 writers (64 writers touch
    // enough pages for the images to show); its lowest and highest ratio to UNFENCED
    // over every cell, where the lowest is, and in how many cells it is
    // within 5 % of UNFENCED.
    let (mut extra, mut shared) = (Vec::new(), Vec::new());
    for scopes in SCOPES {
        for writers in WRITERS {
            if scopes <= FEW && writers <= FEW {
                extra.push(wal(scopes, writers, FenceMode::FencedScopeShared)? - wal(scopes, writers, FenceMode::Unfenced)?);
            }
            shared.push(row(scopes, writers, FenceMode::FencedScopeShared)?);
        }
    }
    f.add("shared-wal-extra", span(&extra));
    let lowest = shared.iter().min_by(|a, b| a.ratio.total_cmp(&b.ratio)).ok_or("no cell was read")?;
    f.add("shared-min-ratio", ratio(lowest));
    // Every cell at that ratio as the table shows it: a tie names them all.
    let at_lowest: Vec<String> =
        shared.iter().filter(|r| ratio(r) == ratio(lowest)).map(|r| format!("{} 个作用域、{} 个写入者", r.cell.scopes, r.cell.writers)).collect();
    f.add("shared-min-cell", at_lowest.join("；"));
    let highest = shared.iter().max_by(|a, b| a.ratio.total_cmp(&b.ratio)).ok_or("no cell was read")?;
    f.add("shared-max-ratio", ratio(highest));
    // Rounded as the table shows it, so the count agrees with the reader's eye.
    let within = shared.iter().filter(|r| (r.ratio * 100.0).round() >= (crate::bench::report::TARGET * 100.0).round()).count();
    f.add("shared-cells-at-target", within);
    f.add("bench-cells", shared.len());
    // A takeover's time from the grant to the first accepted write, per design.
    for t in takeovers {
        f.add(format!("takeover-{}", t.design), crate::bench::report::shown(t.p50));
    }
    // The contended acquires, on each store, and how many times etcd's fit in PostgreSQL's.
    for a in acquires {
        f.add(format!("acquire-{}", a.id), format!("{:.0}", a.per_second));
        f.add(format!("acquire-{}-p50", a.id), crate::bench::report::shown(a.p50));
    }
    let rate = |id: &str| acquires.iter().find(|a| a.id == id).map(|a| a.per_second).ok_or_else(|| format!("{FILE}: no acquire line for {id}"));
    f.add("acquire-postgres-over-etcd", format!("{:.1}", rate("postgres")? / rate("etcd")?));
    Ok(f.0)
}

/// The race of conditional PUTs on s3s-fs (`./run.sh s3-probe`): how many
/// writers and rounds, and per server variant and probe the rounds with
/// more than one success and the torn ones. A missing field is an error.
fn s3_probe_facts(data: &serde_json::Value) -> Result<Vec<Fact>> {
    const FILE: &str = "evidence/26/s3-probe.json";
    let field = |v: &serde_json::Value, name: &str| -> Result<serde_json::Value> {
        v.get(name).cloned().ok_or_else(|| format!("{FILE}: no field {name} in {v}").into())
    };
    let count = |v: &serde_json::Value, name: &str| -> Result<u64> { field(v, name)?.as_u64().ok_or_else(|| format!("{FILE}: {name} is not a count").into()) };
    let text = |v: &serde_json::Value, name: &str| -> Result<String> { field(v, name)?.as_str().map(str::to_owned).ok_or_else(|| format!("{FILE}: {name} is not text").into()) };
    let mut f = Facts(Vec::new());
    let versions = field(data, "versions")?;
    f.add("s3s-fs-version", text(&versions, "s3s-fs")?);
    f.add("object-store-version", text(&versions, "object_store")?);
    let results = field(data, "results")?;
    let results = results.as_array().filter(|r| !r.is_empty()).ok_or_else(|| format!("{FILE}: no results"))?;
    let (writers, rounds) = (count(&results[0], "writers")?, count(&results[0], "rounds")?);
    f.add("writers", writers);
    f.add("rounds", rounds);
    for r in results {
        if (count(r, "writers")?, count(r, "rounds")?) != (writers, rounds) {
            return Err(format!("{FILE}: the probes did not all run {writers} writers for {rounds} rounds").into());
        }
        let name = format!("{}-{}", text(r, "variant")?, text(r, "probe")?);
        f.add(format!("doubles-{name}"), count(r, "rounds_with_double_success")?);
        f.add(format!("most-{name}"), count(r, "max_successes_in_a_round")?);
        f.add(format!("torn-{name}"), count(r, "torn_rounds")?);
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

/// Medians from the lease stores' data (`lease-stores.json`), and how they
/// compare: each as the table shows it, to a tenth of a millisecond (the
/// ratio from the unrounded ones).
fn lease_store_facts(data: &StoresData) -> Result<Vec<Fact>> {
    const FILE: &str = "evidence/26/lease-stores.json";
    let median = |id: &str| -> Result<f64> { Ok((data.store(id).context(FILE)?.median_ms * 10.0).round() / 10.0) };
    let (pg, sync_, async_, etcd) = (median("postgres")?, median("postgres-sync")?, median("postgres-async")?, median("etcd")?);
    let mut f = Facts(Vec::new());
    f.add("stores", data.stores.len());
    f.add("median-postgres", format!("{pg:.1} ms"));
    f.add("median-async", format!("{async_:.1} ms"));
    f.add("median-sync", format!("{sync_:.1} ms"));
    f.add("median-etcd", format!("{etcd:.1} ms"));
    f.add("sync-extra", format!("{:.1} ms", sync_ - async_));
    // A ratio from the unrounded medians: rounded to a tenth of a
    // millisecond, PostgreSQL's third of one would skew it by a tenth.
    let exact = |id: &str| -> Result<f64> { Ok(data.store(id).context(FILE)?.median_ms) };
    f.add("etcd-times-postgres", format!("{:.1}", exact("etcd")? / exact("postgres")?));
    Ok(f.0)
}

/// The chaos run's counts, from its data (`chaos.json`), and the plan of
/// F15's short run.
fn chaos_facts(inputs: &Inputs) -> Result<Vec<Fact>> {
    let chaos = &inputs.chaos;
    let mut f = Facts(Vec::new());
    f.add("plan-total", chaos.scheduled);
    for m in &chaos.modes {
        let mode = m.mode.cli_name();
        let v = &m.verdict;
        f.add(format!("faults-{mode}"), m.fates.injected);
        f.add(format!("stale-{mode}"), v.stale_accepted);
        f.add(format!("reused-{mode}"), v.tokens_reused);
        f.add(format!("regressions-{mode}"), v.floor_regressions);
        f.add(format!("lost-{mode}"), v.lost_writes);
        f.add(format!("attempts-{mode}"), v.attempts);
    }
    // The page of the mode with stale writes the book points at, filtered to them.
    let fenced_row = chaos.mode(FenceMode::FencedRow).context("evidence/26/chaos.json")?;
    f.add(
        "stale-fenced-row-link",
        format!("[`FENCED_ROW` 的 {} 次被接受的过期写入](history/{}.html#only=stale)", fenced_row.verdict.stale_accepted, fenced_row.history),
    );
    // F15's plan (it depends only on the seed).
    f.add("f15-faults", figure(&inputs.run, "F15", "plan_faults")?);
    f.add("f15-aimed", figure(&inputs.run, "F15", "plan_aimed")?);
    f.add("f15-pause-long", figure(&inputs.run, "F15", "plan_pause_long")?);
    Ok(f.0)
}

/// Real queue crates under the nemesis, from their data (`queues.json`):
/// the run's shape, and each crate's and fence's counts as
/// `<crate>-<fence>-<count>` (`graphile-none-stale-effects`).
fn queues_facts(data: &crate::queue::crates::QueuesData) -> Result<Vec<Fact>> {
    const FILE: &str = "evidence/26/queues.json";
    use crate::queue::crates::{nemesis::CrateFault, CrateName, HandlerFence};
    let mut f = Facts(Vec::new());
    f.add("seed", data.seed);
    f.add("jobs", data.jobs);
    f.add("workers", data.workers);
    f.add("fault-every", data.fault_every);
    f.add("crates", CrateName::ALL.len());
    f.add("fault-kinds", CrateFault::ALL.len());
    for krate in CrateName::ALL {
        f.add(format!("{}-published", krate.name()), krate.published());
        for fence in HandlerFence::ALL {
            let row = data
                .rows
                .iter()
                .find(|r| r.krate == krate && r.fence == fence)
                .ok_or_else(|| format!("{FILE}: no row of {} with --fence {}", krate.name(), fence.name()))?;
            let c = &row.counts;
            let name = |what: &str| format!("{}-{}-{what}", krate.name(), fence.name());
            f.add(name("runs-twice"), c.runs_twice);
            f.add(name("stale-effects"), c.stale_effects);
            f.add(name("superseded-completions"), c.superseded_completions);
            f.add(name("refused-completions"), c.refused_completions);
            f.add(name("lost"), c.lost);
            for (fault, plural) in [(CrateFault::Pause, "pauses"), (CrateFault::Kill, "kills"), (CrateFault::Delay, "delays"), (CrateFault::Restart, "restarts")] {
                f.add(name(plural), row.struck.get(&fault).copied().unwrap_or(0));
            }
            f.add(name("restart-held"), row.restart_held);
            f.add(name("restart-returned"), row.restart_returned);
            f.add(name("exited"), row.exited.len());
            let takeover = row.takeover_median_ms.ok_or_else(|| format!("{FILE}: {} --fence {} has no takeover time", krate.name(), fence.name()))?;
            f.add(name("takeover"), format!("{:.1} s", takeover / 1e3));
            f.add(name("command"), format!("`{}`", row.command));
        }
    }
    Ok(f.0)
}

/// The queue chaos run's shape and counts, from its data (`chaos-queue.json`).
fn queue_chaos_facts(data: &QueueChaosData) -> Result<Vec<Fact>> {
    const FILE: &str = "evidence/26/chaos-queue.json";
    let mut f = Facts(Vec::new());
    f.add("workers", data.workers);
    f.add("duration", format!("{} s", data.duration_s));
    f.add("fault-every", data.fault_every);
    // The nemesis's lengths, from the code, against the ttl.
    use crate::queue::chaos::{keeper, nemesis::QueueFault, worker};
    let ttl = crate::params::TTL;
    let shown = |d: std::time::Duration| format!("{} ms", d.as_millis());
    f.add("ttl", shown(ttl));
    f.add("fault-kinds", QueueFault::ALL.len());
    f.add("pause-short", shown(ttl / worker::SHORT_PAUSE_SHARE));
    f.add("outlast", shown(ttl * worker::OUTLAST_TTLS));
    f.add("long", shown(ttl * worker::LONG_TTLS));
    f.add("skew", shown(ttl * keeper::SKEW_TTLS));
    f.add("switches", data.rows.len());
    f.add("jobs", crate::queue::chaos::run::jobs(data.workers, std::time::Duration::from_secs_f64(data.duration_s)));
    // Which rows each harm shows up in: the prose names them from here, so
    // a table locked again cannot leave the prose behind.
    let rows_where = |count: fn(&crate::queue::chaos::judge::QueueCounts) -> usize| {
        let rows: Vec<&str> = data.rows.iter().filter(|r| count(&r.counts) > 0).map(|r| r.row.as_str()).collect();
        if rows.is_empty() { "没有哪一行".to_owned() } else { rows.join("、") }
    };
    f.add("rows-stale-heartbeats", rows_where(|c| c.stale_heartbeats));
    f.add("rows-stale-completions", rows_where(|c| c.stale_completions));
    f.add("rows-stale-effects", rows_where(|c| c.stale_effects));
    f.add("rows-claimed-after-done", rows_where(|c| c.claimed_after_done));
    f.add("rows-live-taken-back", rows_where(|c| c.live_taken_back));
    f.add("rows-healthy-taken-back", rows_where(|c| c.healthy_taken_back));
    let fixed = data.rows.iter().find(|r| r.fixed()).ok_or_else(|| format!("{FILE}: no row of the fixed queue"))?;
    f.add("fixed-claims", fixed.counts.claims);
    f.add("fixed-runs-twice", fixed.counts.runs_twice);
    f.add("fixed-harm", fixed.counts.harm());
    let bugs: Vec<_> = data.rows.iter().filter(|r| !r.fixed()).collect();
    f.add("bugs", bugs.len());
    f.add("bugs-caught", bugs.iter().filter(|r| r.counts.harm() > 0).count());
    let faults: usize = data.rows.iter().flat_map(|r| r.faults.values()).map(|c| c.injected).sum();
    f.add("faults-injected", faults);
    Ok(f.0)
}

/// The model checker's totals, and how many mutations it catches.
fn model_facts(inputs: &Inputs) -> Result<Vec<Fact>> {
    use crate::model::mutation::{COUNTERPARTS, NO_COUNTERPART};
    use crate::model::store::StoreKind;
    const FILE: &str = "evidence/26/model.json";
    let model = &inputs.model;
    let mut f = Facts(Vec::new());
    f.add("configurations", model.configurations.len());
    f.add("states", model.configurations.iter().map(|c| c.states).sum::<usize>());
    f.add("seconds", format!("{:.1} s", model.seconds));
    f.add("states-fenced-scope", model.configuration(FenceMode::FencedScope, StoreKind::Single).context(FILE)?.states);
    // The length of a configuration's shortest counterexample.
    for (anchor, mode, store) in
        [("steps-unfenced", FenceMode::Unfenced, StoreKind::Single), ("steps-fenced-row", FenceMode::FencedRow, StoreKind::Single), ("steps-async", FenceMode::FencedScope, StoreKind::Async)]
    {
        let row = model.configuration(mode, store).context(FILE)?;
        let steps = row.counterexample_steps.ok_or_else(|| format!("{FILE}: {mode} on {} has no counterexample", store.name()))?;
        f.add(anchor, steps);
    }
    f.add("threads", model.threads);
    // Three holders (`lab model --holders 3`): the reduced search, and the
    // same without symmetry.
    const FILE_3: &str = "evidence/26/model-3.json";
    let three = &inputs.model_3;
    if three.holders != 3 || three.configurations.len() != model.configurations.len() {
        return Err(format!("{FILE_3}: {} holders, {} configurations; wanted 3 holders and the {} of model.json", three.holders, three.configurations.len(), model.configurations.len()).into());
    }
    let states = three.configurations.iter().map(|c| c.states).sum::<usize>();
    let unreduced = three.unreduced.as_ref().ok_or_else(|| format!("{FILE_3} has no search without symmetry"))?;
    f.add("three-states", states);
    f.add("three-seconds", format!("{:.1} s", three.seconds));
    f.add("three-threads", three.threads);
    f.add("three-rate", format!("{:.0}", states as f64 / three.seconds));
    f.add("three-memory", format!("{} MiB", three.peak_memory >> 20));
    f.add("three-unreduced-states", unreduced.states);
    f.add("three-unreduced-seconds", format!("{:.1} s", unreduced.seconds));
    f.add("three-saved", format!("{:.1}", unreduced.states as f64 / states as f64));
    // The book says the third holder changes no verdict and no shortest
    // counterexample's length: a table that says otherwise refuses here.
    for (two, three) in model.configurations.iter().zip(&three.configurations) {
        if (two.mode, two.store, &two.broken, two.counterexample_steps) != (three.mode, three.store, &three.broken, three.counterexample_steps) {
            return Err(format!("{FILE_3}: {} on {} differs from the two-holder table (broken {:?} in {:?} steps against {:?} in {:?})", three.mode, three.store.name(), three.broken, three.counterexample_steps, two.broken, two.counterexample_steps).into());
        }
    }
    f.add("caught", inputs.model_mutants.patches.iter().filter(|p| !p.caught_by.is_empty()).count());
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

/// Writes every facts file whose text changed (an unchanged one is left
/// alone, so a clean checkout stays clean); returns the paths written.
pub fn write() -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for file in compute(&Inputs::read()?)? {
        let path = dir().join(file.name);
        let text = file.render();
        if fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        paths::write_whole(&path, &text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// `lab facts`: writes the files that changed and names them; with
/// `check`, writes nothing and names each stale file instead. True when
/// nothing is stale.
pub fn run(check: bool) -> Result<bool> {
    if !check {
        let written = write()?;
        for path in &written {
            println!("wrote {}", path.strip_prefix(paths::root()).unwrap_or(path).display());
        }
        if written.is_empty() {
            println!("evidence/26/facts/ is up to date: nothing written");
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
        let dir = tempfile::tempdir().unwrap();
        for file in &now {
            fs::write(dir.path().join(file.name), file.render()).unwrap();
        }
        assert!(differences(&now, dir.path()).is_empty());

        let mut planted = inputs.clone();
        let fenced = planted.chaos.modes.iter_mut().find(|m| m.mode == FenceMode::FencedScope).unwrap();
        fenced.verdict.stale_accepted = 7;
        let stale = differences(&compute(&planted).unwrap(), dir.path());
        assert_eq!(stale.len(), 1, "{stale:?}");
        assert!(stale[0].starts_with("evidence/26/facts/chaos.md is stale") && stale[0].contains("`7`"), "{}", stale[0]);
    }

    /// A figure the run did not record is an error naming the file, the
    /// case and the figure, never a blank.
    #[test]
    fn a_missing_figure_is_an_error() {
        let mut inputs = Inputs::read().unwrap();
        inputs.run.cases.iter_mut().find(|c| c.id == "F16").unwrap().figures.remove("election_ms");
        let err = crate::error::chain(compute(&inputs).unwrap_err().as_ref());
        assert!(err.contains("evidence/26/output.json") && err.contains("F16") && err.contains("election_ms"), "{err}");
    }

    /// A copy of the evidence's data files in a folder of its own, laid out
    /// as `evidence/26/` (the history pages left out: only their sizes count).
    fn evidence_copy() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("history")).unwrap();
        for entry in fs::read_dir(paths::evidence_dir()).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".json") || name.ends_with(".snap") || name == "bench.csv" {
                fs::copy(entry.path(), tmp.path().join(&name)).unwrap();
            }
        }
        assert!(Inputs::read_in(tmp.path()).is_ok(), "the copy reads as the evidence does");
        tmp
    }

    /// A numeric field removed from a result file is an error of the facts'
    /// reading that names the file and the field: from the bench's CSV a
    /// column, from the chaos run's JSON a key.
    #[test]
    fn a_removed_field_is_named() {
        let copy = evidence_copy();
        let csv = fs::read_to_string(copy.path().join("bench.csv")).unwrap();
        let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let at = header.iter().position(|c| *c == "wal_bytes_per_write").unwrap();
        let without: String = csv.lines().map(|l| l.split(',').enumerate().filter(|(i, _)| *i != at).map(|(_, c)| c).collect::<Vec<_>>().join(",") + "\n").collect();
        fs::write(copy.path().join("bench.csv"), without).unwrap();
        let err = crate::error::chain(Inputs::read_in(copy.path()).unwrap_err().as_ref());
        assert!(err.contains("wal_bytes_per_write") && err.contains("bench.csv"), "{err}");

        let copy = evidence_copy();
        let path = copy.path().join("chaos.json");
        let mut value: serde_json::Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        value["modes"][0]["verdict"].as_object_mut().unwrap().remove("stale_accepted");
        fs::write(&path, value.to_string()).unwrap();
        let err = crate::error::chain(Inputs::read_in(copy.path()).unwrap_err().as_ref());
        assert!(err.contains("stale_accepted") && err.contains("chaos.json"), "{err}");
    }

    /// The raw run differs from the snapshots exactly where a redaction masks a value.
    #[test]
    fn output_differs_only_where_values_are_masked() {
        let inputs = Inputs::read().unwrap();
        for case in cases::ALL {
            let raw = inputs.run.case(case.id).unwrap().text();
            let body = evidence::snapshot_body(&inputs.snapshots[case.id]).unwrap();
            let locked: Vec<&str> = body.lines().filter(|l| !l.starts_with("SUMMARY ")).collect();
            assert_eq!(evidence::redact(raw.trim_end()), locked.join("\n"), "{}: output.json and the snapshot differ beyond the redactions", case.id);
        }
    }
}
