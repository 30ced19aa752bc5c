//! `lab model`: the model checked for every mode on every lease store, and
//! again with each mutation that has a counterpart; the verdicts as tables.
//!
//! A verdict is *safe* when no invariant has a counterexample in the whole
//! bounded space, *unsafe* with the shortest counterexample of the most
//! important broken invariant otherwise. Either way every example
//! (`sometimes`) must have been found and the space must not be empty: a
//! verdict reached on nothing is a failure of the check, not a safe mode.

use crate::result_data::ResultData;
use super::holder::{letter, Phase};
use super::mutation::{COUNTERPARTS, NO_COUNTERPART};
use super::properties::{is_invariant, name};
use super::resource::{Outcome, PARTS};
use super::{Action, Bounds, Config, LeaseModel, State, StoreKind};
use crate::vocabulary::FenceMode;
use stateright::{Model, Path};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// What the checker found for one configuration.
pub struct ConfigCheck {
    /// What was checked.
    pub config: Config,
    /// Distinct states explored.
    pub states: usize,
    /// How long the check took.
    pub took: Duration,
    /// Each broken invariant with its shortest counterexample, most
    /// important first.
    pub broken: Vec<(&'static str, Path<State, Action>)>,
    /// The examples the checker found.
    pub found: Vec<&'static str>,
    /// The examples it did not find: each one makes the check meaningless.
    pub missing: Vec<&'static str>,
}

impl ConfigCheck {
    /// The invariants broken, most important first.
    pub fn broken_names(&self) -> Vec<&'static str> {
        self.broken.iter().map(|(n, _)| *n).collect()
    }

    /// No invariant broken.
    pub fn is_safe(&self) -> bool {
        self.broken.is_empty()
    }

    /// The check meant something: states explored, every example found.
    pub fn is_meaningful(&self) -> bool {
        self.states > 0 && self.missing.is_empty()
    }

    /// Whether `property` was broken.
    pub fn breaks(&self, property: &str) -> bool {
        self.broken.iter().any(|(n, _)| *n == property)
    }

    /// The headline counterexample: the most important broken invariant's.
    pub fn counterexample(&self) -> Option<&(&'static str, Path<State, Action>)> {
        self.broken.first()
    }
}

// ANCHOR: check
/// Checks `config` whole, breadth first, so that the first path found to
/// each property is a shortest one (`search::breadth_first`).
pub fn check(config: Config) -> ConfigCheck {
    let model = LeaseModel::new(config);
    let properties = model.properties();
    let started = Instant::now();
    let found = super::search::breadth_first(&model);
    let took = started.elapsed();
    let (mut broken, mut found_examples, mut missing) = (Vec::new(), Vec::new(), Vec::new());
    for p in &properties {
        match (is_invariant(p), found.first.iter().find(|(n, _)| *n == p.name)) {
            (true, Some((_, path))) => broken.push((p.name, path.clone())),
            (true, None) => {}
            (false, Some(_)) => found_examples.push(p.name),
            (false, None) => missing.push(p.name),
        }
    }
    ConfigCheck { config, states: found.states, took, broken, found: found_examples, missing }
}
// ANCHOR_END: check

/// Checks every configuration, each whole on one thread (so each keeps
/// its shortest paths), as many at once as the machine has cores; the
/// results in the order given.
pub fn check_all(configs: &[Config]) -> Vec<ConfigCheck> {
    let threads = check_threads(configs.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: std::sync::Mutex<Vec<Option<ConfigCheck>>> = std::sync::Mutex::new(configs.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(config) = configs.get(i) else { return };
                let checked = check(*config);
                done.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(checked);
            });
        }
    });
    // A thread that panicked has already failed the scope above.
    done.into_inner().unwrap_or_else(|p| p.into_inner()).into_iter().map(|c| c.expect("every configuration checked")).collect()
}

// ANCHOR: expected
/// What the cases and the chaos run say of `mode` on `store`: the
/// invariants that break there (empty: safe). The scope fences keep every
/// one (F4, F6b, F7, and clean chaos runs: the reader/writer form too); UNFENCED lets a stale write
/// through (F5); CHECK_THEN_WRITE too, and moves the floor back (F6a);
/// FENCED_ROW keeps each part's order but not the scope's (F7);
/// VERSION_CAS lets a stale holder that reads afresh through, and CLAIM_FIRST
/// refuses it once the newer holder has claimed (F34); an
/// asynchronous standby, promoted, issues a token again (F14), whatever
/// the mode; a synchronous one does not.
pub fn expected(mode: FenceMode, store: StoreKind) -> &'static [&'static str] {
    match (store, mode) {
        (StoreKind::Async, _) => &[name::I2],
        (_, FenceMode::Unfenced) => &[name::I3],
        (_, FenceMode::CheckThenWrite) => &[name::I3, name::FLOOR],
        (_, FenceMode::FencedRow) => &[name::I3],
        (_, FenceMode::VersionCas) => &[name::I3],
        (_, FenceMode::FencedScope | FenceMode::FencedScopeCte | FenceMode::FencedScopeShared | FenceMode::ClaimFirst) => &[],
    }
}
// ANCHOR_END: expected

/// Where a verdict disagrees with [`expected`], or means nothing; empty
/// when it agrees. A safe expectation wants no invariant broken; an unsafe
/// one wants each expected invariant broken (others may break with it).
pub fn disagreements(v: &ConfigCheck) -> Vec<String> {
    let mut out = Vec::new();
    let what = format!("{} on {}", v.config.mode, v.config.store.name());
    if v.states == 0 {
        out.push(format!("{what}: no state explored"));
    }
    for missing in &v.missing {
        out.push(format!("{what}: the example `{missing}` was never found"));
    }
    let expected = expected(v.config.mode, v.config.store);
    if expected.is_empty() && !v.is_safe() {
        out.push(format!("{what}: expected safe, but {} broke", v.broken_names().join(", ")));
    }
    for property in expected {
        if !v.breaks(property) {
            out.push(format!("{what}: expected `{property}` to break, and it held"));
        }
    }
    out
}

/// Every configuration the table checks: each store, each mode.
pub fn configurations() -> Vec<Config> {
    StoreKind::ALL.iter().flat_map(|store| FenceMode::ALL.iter().map(move |mode| Config::new(*mode, *store))).collect()
}

/// A step, as the table and the Explorer show it.
pub fn action_text(action: &Action) -> String {
    match *action {
        Action::Acquire(h) => format!("{} ACQUIRE", letter(h)),
        Action::Check(h) => format!("{} deadline check", letter(h)),
        Action::Write(h, statement) => format!("{} {}", letter(h), statement.sql_name()),
        Action::Renew(h) => format!("{} RENEW", letter(h)),
        Action::Release(h) => format!("{} RELEASE", letter(h)),
        Action::Crash(h) => format!("{} SIGKILL", letter(h)),
        Action::Restart(h) => format!("{} restarts", letter(h)),
        Action::Expire => "lease expires".to_owned(),
        Action::Replicate => "standby replays".to_owned(),
        Action::Promote => "primary crashes, standby promoted".to_owned(),
    }
}

/// A step with what it did, read from the states before and after.
pub fn step_text(model: &LeaseModel, before: &State, action: &Action, after: &State) -> String {
    let base = action_text(action);
    let outcome = match *action {
        Action::Acquire(h) => match after.holders[h].phase {
            Phase::Done => "none".to_owned(),
            _ => format!("token={}", after.holders[h].token),
        },
        Action::Check(h) => if after.holders[h].phase == Phase::Done { "passed: gives up" } else { "ok" }.to_owned(),
        Action::Write(h, statement) => {
            let part = match before.holders[h].phase {
                Phase::Write { part, .. } => PARTS[usize::from(model.part(h, part))],
                _ => "?",
            };
            let token = before.holders[h].token;
            let verdict = match model.outcome(before, h, statement) {
                Outcome::Next if statement == super::Statement::ReadFloor => format!("floor={}", after.resource.floor),
                Outcome::Next if statement == super::Statement::ReadFloorBeforeLock => format!("floor={}", after.resource.floor),
                Outcome::Next => "ok".to_owned(),
                // FENCED_SCOPE_SHARED's first call found its token above the floor.
                Outcome::Goto(_) => "raise".to_owned(),
                Outcome::Accepted => "accepted".to_owned(),
                Outcome::Refused => "refused".to_owned(),
            };
            format!("{part} token={token} → {verdict}")
        }
        Action::Renew(h) => format!("ok={}", after.holders[h].phase == Phase::Release),
        Action::Release(_) | Action::Crash(_) | Action::Restart(_) | Action::Expire | Action::Replicate | Action::Promote => String::new(),
    };
    if outcome.is_empty() { base } else { format!("{base}: {outcome}") }
}

/// A path's steps, one line each.
pub fn steps(model: &LeaseModel, path: &Path<State, Action>) -> Vec<String> {
    let pairs = path.clone().into_vec();
    let mut out = Vec::new();
    for window in pairs.windows(2) {
        let (before, action) = (&window[0].0, window[0].1.as_ref().expect("a step between two states"));
        out.push(step_text(model, before, action, &window[1].0));
    }
    out
}

/// The file name stem of a configuration's counterexample chart.
pub fn chart_name(config: &Config) -> String {
    match config.store {
        StoreKind::Single => format!("model-{}", config.mode.cli_name()),
        store => format!("model-{}-{}", config.mode.cli_name(), store.cli_name()),
    }
}

/// The verdict table as Markdown: one row per configuration, then each
/// counterexample's steps. With `scale` (the file the book includes), each
/// check's time, the total, the threads and the peak memory (and, beyond
/// two holders, the unreduced search); without (stdout, which the
/// mutation harness compares with a lock), none: times vary from run to run.
pub fn markdown(verdicts: &[ConfigCheck], scale: Option<&Scale>) -> String {
    let bounds = verdicts.first().map_or(Bounds::TABLE, |v| v.config.bounds);
    // Beyond the book's bounds, the table and its totals can be included
    // without the counterexamples, which repeat the book's.
    let mut out = if bounds == Bounds::TABLE { String::new() } else { String::from("<!-- ANCHOR: table -->\n") };
    out += if scale.is_some() {
        "| mode | lease store | verdict | states | time | invariants broken |\n|---|---|---|---:|---:|---|\n"
    } else {
        "| mode | lease store | verdict | states | invariants broken |\n|---|---|---|---:|---|\n"
    };
    for v in verdicts {
        let verdict = if !v.is_meaningful() {
            "**NOT CHECKED**"
        } else if v.is_safe() {
            "safe"
        } else {
            "unsafe"
        };
        let broken = if v.is_safe() { "—".to_owned() } else { v.broken_names().join("; ") };
        let time = if scale.is_some() { format!(" {:.2} s |", v.took.as_secs_f64()) } else { String::new() };
        let _ = writeln!(out, "| `{}` | {} | {verdict} | {} |{time} {broken} |", v.config.mode, v.config.store.name(), v.states);
    }
    let total = scale.map_or(String::new(), |s| format!(", {:.1} s on {} threads, peak memory {} MiB", s.took.as_secs_f64(), s.threads, s.memory >> 20));
    let _ = writeln!(
        out,
        "\n{} configurations, {} states in all{total}. Bounds: {} holders, {} acquires, {} crash.",
        verdicts.len(),
        verdicts.iter().map(|v| v.states).sum::<usize>(),
        bounds.holders,
        bounds.acquires,
        bounds.crashes,
    );
    if let Some(plain) = scale.and_then(|s| s.plain) {
        let differ = verdicts.iter().zip(&plain.checks).filter(|(v, p)| v.broken_names() != p.broken_names()).count();
        let same = if differ == 0 { "the same verdicts".to_owned() } else { format!("**different verdicts in {differ} configurations**") };
        let _ = writeln!(
            out,
            "\nWithout symmetry (holders after holder-a not taken as interchangeable): {} states in all, {:.1} s; {same}.",
            plain.checks.iter().map(|v| v.states).sum::<usize>(),
            plain.took.as_secs_f64()
        );
    }
    if bounds != Bounds::TABLE {
        out += "<!-- ANCHOR_END: table -->\n";
    }
    for v in verdicts.iter().filter(|v| !v.is_safe()) {
        let (property, path) = v.counterexample().expect("unsafe");
        let model = LeaseModel::new(v.config);
        // Charts are drawn for the book's table only (`run`).
        let chart = if bounds == Bounds::TABLE { format!(", chart `{}.mmd`", chart_name(&v.config)) } else { String::new() };
        let _ = writeln!(out, "\n**`{}` on {}**: `{property}`, shortest counterexample ({} steps{chart}):\n", v.config.mode, v.config.store.name(), path.last_state_index());
        for (i, step) in steps(&model, path).iter().enumerate() {
            let _ = writeln!(out, "{}. {step}", i + 1);
        }
    }
    out
}

/// The number of steps of a path.
trait Steps {
    fn last_state_index(&self) -> usize;
}

impl Steps for Path<State, Action> {
    fn last_state_index(&self) -> usize {
        self.clone().into_actions().len()
    }
}

/// One row of the mutants' table.
pub struct MutantCheck {
    /// The patch.
    pub patch: &'static str,
    /// The invariants the mutation broke that hold unmutated, with the
    /// length of the shortest counterexample.
    pub caught_by: Vec<(&'static str, usize)>,
    /// The mutated check.
    pub verdict: ConfigCheck,
}

/// Checks every counterpart's mutation against its unmutated baseline.
pub fn mutants() -> Vec<MutantCheck> {
    let mut baselines: Vec<ConfigCheck> = Vec::new();
    let mut out = Vec::new();
    for c in COUNTERPARTS {
        let base = Config::new(c.mode, c.store);
        if !baselines.iter().any(|b| b.config == base) {
            baselines.push(check(base));
        }
        let baseline = baselines.iter().find(|b| b.config == base).expect("checked above");
        let verdict = check(Config { mutation: Some(c.mutation), ..base });
        let caught_by = verdict.broken.iter().filter(|(n, _)| !baseline.breaks(n)).map(|(n, p)| (*n, p.last_state_index())).collect();
        out.push(MutantCheck { patch: c.patch, caught_by, verdict });
    }
    out
}

/// The mutants' table as Markdown.
pub fn mutants_markdown(rows: &[MutantCheck], took: Duration) -> String {
    let mut out = String::from("| patch (`mutants/`) | checked as | states | caught by (shortest counterexample) |\n|---|---|---:|---|\n");
    for r in rows {
        let caught = if r.caught_by.is_empty() {
            "**SURVIVED**".to_owned()
        } else {
            r.caught_by.iter().map(|(n, len)| format!("{n} ({len} steps)")).collect::<Vec<_>>().join("; ")
        };
        let _ = writeln!(out, "| `{}` | `{}` on {} | {} | {caught} |", r.patch, r.verdict.config.mode, r.verdict.config.store.name(), r.verdict.states);
    }
    let caught = rows.iter().filter(|r| !r.caught_by.is_empty()).count();
    let _ = writeln!(out, "\n{caught} of {} patches with a counterpart caught by the model, {:.1} s. No counterpart in the model:\n", rows.len(), took.as_secs_f64());
    out.push_str("| patch | why the model has no counterpart |\n|---|---|\n");
    for (patch, why) in NO_COUNTERPART {
        let _ = writeln!(out, "| `{patch}` | {why} |");
    }
    out.push_str("\nThe shortest counterexample that caught each patch, step by step (its chart: `model-mutants/<patch>.mmd`):\n");
    for r in rows {
        let Some((property, len)) = r.caught_by.first() else { continue };
        let (_, path) = r.verdict.broken.iter().find(|(n, _)| n == property).expect("caught by a broken invariant");
        let model = LeaseModel::new(r.verdict.config);
        let _ = writeln!(out, "\n<!-- ANCHOR: {0} -->\n<details>\n<summary><code>{0}</code>: {property}, {len} steps</summary>\n", r.patch);
        for (i, step) in steps(&model, path).iter().enumerate() {
            let _ = writeln!(out, "{}. {step}", i + 1);
        }
        let _ = writeln!(out, "\n</details>\n<!-- ANCHOR_END: {} -->", r.patch);
    }
    out
}

// ANCHOR: run
/// `lab model`: checks every configuration; prints a transcript: its CASE
/// line, the table (without times), one line per configuration, which fails
/// where the verdict disagrees with the cases and the chaos run or means
/// nothing; with `out`, writes the table with times there, its data
/// beside it as JSON (`model.json` for `model.md`), and each
/// counterexample's chart beside it. Times go to stderr, never into stdout
/// (the mutation harness compares stdout with a lock). True when every
/// verdict agrees.
pub fn run(out: Option<&std::path::Path>, holders: usize) -> crate::Result<bool> {
    let bounds = Bounds { holders, ..Bounds::TABLE };
    let configs: Vec<Config> = configurations().into_iter().map(|c| Config { bounds, ..c }).collect();
    let started = Instant::now();
    let verdicts = check_all(&configs);
    let took = started.elapsed();
    let memory = crate::sysinfo::peak_memory()?;
    for v in &verdicts {
        eprintln!("model: {} on {}: {} states, {:.2} s", v.config.mode, v.config.store.name(), v.states, v.took.as_secs_f64());
    }
    // Beyond two holders, the same again without symmetry: what it saves,
    // and a check of the reduction itself (with two there is nothing to
    // permute, and the two searches are one).
    let plain = (holders > Bounds::TABLE.holders).then(|| {
        let unreduced: Vec<Config> = configs.iter().map(|c| Config { symmetric: false, ..*c }).collect();
        let started = Instant::now();
        let checks = check_all(&unreduced);
        Plain { checks, took: started.elapsed() }
    });
    let scale = Scale { took, threads: check_threads(configs.len()), memory, plain: plain.as_ref() };
    let mut t = crate::transcript::Transcript::streaming(std::io::stdout());
    let title = format!("模型检查：{} 种资源端模式在三种租约库上，界限之内的每一种交错，结论与用例、混沌运行对照", FenceMode::ALL.len());
    t.case("MODEL", &if holders == Bounds::TABLE.holders { title } else { format!("{title}（{holders} 个持有者）") });
    print!("{}", markdown(&verdicts, None));
    if let Some(out) = out {
        crate::paths::write_whole(out, &markdown(&verdicts, Some(&scale)))?;
        ResultData::write(&super::results::ModelData::of(&verdicts, &scale), &out.with_extension("json"))?;
        // The charts are the book's two-holder counterexamples (the replays' schedules).
        if holders == Bounds::TABLE.holders {
            let dir = out.parent().unwrap_or(std::path::Path::new("."));
            for v in verdicts.iter().filter(|v| !v.is_safe()) {
                let (property, path) = v.counterexample().expect("unsafe");
                let model = LeaseModel::new(v.config);
                let chart = super::timeline::gantt(&model, path, &format!("{} · {} · {property}", v.config.mode, v.config.store.name()));
                crate::paths::write_whole(&dir.join(format!("{}.mmd", chart_name(&v.config))), &chart)?;
            }
        }
        eprintln!("model: table written to {}", out.display());
    }
    for v in &verdicts {
        let verdict = if v.is_safe() { "safe".to_owned() } else { format!("unsafe: {}", v.broken_names().join("; ")) };
        let problems = disagreements(v);
        t.check(problems.is_empty(), format!("{} 在 {} 上：{verdict}（{} 个状态），与用例和混沌运行一致", v.config.mode, v.config.store.name(), v.states), || problems.join("; "));
    }
    if let Some(plain) = &plain {
        for (v, p) in verdicts.iter().zip(&plain.checks) {
            t.check(
                v.broken_names() == p.broken_names() && p.is_meaningful() && p.states >= v.states,
                format!("{} 在 {} 上：不做对称约简时结论相同（{} 个状态）", v.config.mode, v.config.store.name(), p.states),
                || format!("unreduced: broken {:?}, missing {:?}, {} states against {}", p.broken_names(), p.missing, p.states, v.states),
            );
        }
    }
    t.summary();
    eprintln!("model: {} configurations checked in {:.1} s", verdicts.len(), took.as_secs_f64());
    Ok(t.failed() == 0)
}

/// How many threads `check_all` uses for `configs` configurations.
pub fn check_threads(configs: usize) -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(configs.max(1))
}

/// The same configurations searched without symmetry.
pub struct Plain {
    /// Their checks.
    pub checks: Vec<ConfigCheck>,
    /// All of them, on `check_threads` threads.
    pub took: Duration,
}

/// What a table's run cost: its time on how many threads, the process's
/// peak memory after it, and the same without symmetry (beyond two holders).
pub struct Scale<'a> {
    /// The whole table.
    pub took: Duration,
    /// Threads, one configuration each at a time.
    pub threads: usize,
    /// Peak resident memory, in bytes, after the table (before `plain`).
    pub memory: u64,
    /// Without symmetry.
    pub plain: Option<&'a Plain>,
}
// ANCHOR_END: run

/// `lab model --mutants`: the model against every mutation that has a
/// counterpart; true when every one is caught. With `out`, writes the
/// table there, its data beside it as JSON (`model-mutants.json`) and, in
/// a folder of the same name beside it, the chart of the shortest
/// counterexample that caught each mutation (`model-mutants/<patch>.mmd`).
pub fn run_mutants(out: Option<&std::path::Path>) -> crate::Result<bool> {
    let started = Instant::now();
    let rows = mutants();
    let took = started.elapsed();
    let table = mutants_markdown(&rows, took);
    print!("{table}");
    if let Some(out) = out {
        crate::paths::write_whole(out, &table)?;
        ResultData::write(&super::results::MutantsData::of(&rows, took), &out.with_extension("json"))?;
        let dir = out.with_extension("");
        for r in &rows {
            let Some((property, _)) = r.caught_by.first() else { continue };
            let (_, path) = r.verdict.broken.iter().find(|(n, _)| n == property).expect("caught by a broken invariant");
            let model = LeaseModel::new(r.verdict.config);
            let title = format!("{} · {} · {property}", r.patch, r.verdict.config.mode);
            crate::paths::write_whole(&dir.join(format!("{}.mmd", r.patch)), &super::timeline::gantt(&model, path, &title))?;
        }
        eprintln!("model: table written to {}, a chart per caught mutation in {}", out.display(), dir.display());
    }
    Ok(rows.iter().all(|r| !r.caught_by.is_empty() && r.verdict.states > 0))
}


#[cfg(test)]
mod tests {
    use super::*;

    /// Every configuration's verdict is what the cases and the chaos run
    /// say, on states explored, with every example found.
    #[test]
    fn verdicts_agree_with_the_cases_and_the_chaos_run() {
        let problems: Vec<String> = configurations().into_iter().map(check).flat_map(|v| disagreements(&v)).collect();
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// A planted wrong expectation is a disagreement, and so is a verdict
    /// reached on nothing: the comparison can fail.
    #[test]
    fn a_planted_wrong_verdict_disagrees() {
        let mut unfenced = check(Config::new(FenceMode::Unfenced, StoreKind::Single));
        assert!(disagreements(&unfenced).is_empty());
        // As if the model had called UNFENCED safe.
        unfenced.broken.clear();
        assert_eq!(disagreements(&unfenced), ["UNFENCED on one server: expected `I3 no stale write accepted` to break, and it held"]);
        // As if the fenced scope had broken I3.
        let mut fenced = check(Config::new(FenceMode::FencedScope, StoreKind::Single));
        fenced.broken.push((name::I3, check(Config::new(FenceMode::Unfenced, StoreKind::Single)).broken[0].1.clone()));
        assert_eq!(disagreements(&fenced).len(), 1);
        // Nothing explored, an example never found.
        fenced.broken.clear();
        fenced.states = 0;
        fenced.missing.push(name::STALE_REFUSED);
        assert_eq!(disagreements(&fenced).len(), 2);
    }

    /// The counterexample of UNFENCED is F5's timeline: A checks, its lease
    /// expires, B takes over and writes, A's stale write lands.
    #[test]
    fn unfenced_counterexample_is_f5s_timeline() {
        let v = check(Config::new(FenceMode::Unfenced, StoreKind::Single));
        let (property, path) = v.counterexample().unwrap();
        assert_eq!(*property, name::I3);
        assert_eq!(
            steps(&LeaseModel::new(v.config), path),
            [
                "A ACQUIRE: token=1",
                "A deadline check: ok",
                "lease expires",
                "B ACQUIRE: token=2",
                "B deadline check: ok",
                "B UNFENCED_WRITE: summary token=2 → accepted",
                "A UNFENCED_WRITE: summary token=1 → accepted",
            ]
        );
    }

    /// Every mutation with a counterpart is caught by an invariant that
    /// holds without it.
    #[test]
    fn every_counterpart_mutation_is_caught() {
        let survivors: Vec<&str> = mutants().iter().filter(|r| r.caught_by.is_empty()).map(|r| r.patch).collect();
        assert!(survivors.is_empty(), "the model does not catch: {survivors:?}");
    }
}
