//! What the suite runs: its groups, each one test process, built from the
//! test binaries cargo made and from the book's chapters.

use super::book;
use super::checked::Reporter;
use crate::cases;
use crate::error::{Result, ResultExt};
use crate::paths;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

/// One test process of the suite.
#[derive(Clone, Debug)]
pub struct Group {
    /// Its name in progress lines and the table: `cli`, `cases F15`,
    /// `book 07-lease-not-enough.md`.
    pub name: String,
    /// The test binary.
    pub program: PathBuf,
    /// Its arguments (filters).
    pub args: Vec<String>,
    /// Variables of its own (the chapter a book group runs).
    pub env: Vec<(String, String)>,
    /// Whether it breaks guards in a scratch copy (one of the pool's).
    pub needs_scratch: bool,
    /// How it says what it checked: libtest's summary, or a file its
    /// runner writes (the cases' snapshot test, the book's commands).
    pub reporter: Reporter,
    /// Seconds it is expected to take, to start the longest first: what it
    /// took last time, else a guess.
    pub estimate: f64,
    /// Whether its verdict needs the machine's time, not a share of what
    /// five groups beside it leave: the incident table's commands promise
    /// how long they take (`# 一分钟内`), and the queue chaos run's fixed
    /// queue is clean only if a healthy worker's heartbeat is never kept
    /// from a core for a ttl (once, under the suite's load, one was: a
    /// healthy worker's job taken back). Such a group runs in a session of
    /// its own, the others nicer (`schedule::NICER_BY`).
    pub ahead: bool,
}

/// The test binaries of the workspace, by target name (`cli`, `cases`, …;
/// `lib` for the library's unit tests), as `cargo test --no-run` built them.
pub struct TestBinaries(pub BTreeMap<String, PathBuf>);

impl TestBinaries {
    /// Builds every test binary (`cargo test --no-run`) and reads where
    /// each is from cargo's messages. Into this checkout's `target/`, where
    /// `run.sh` builds the lab and whose compiled dependencies seed the
    /// copies the groups build (`mutants::scratch::seed_build`):
    /// `--target-dir` outranks a `build.target-dir` in the reader's cargo
    /// config, which would send this build elsewhere.
    pub fn build() -> Result<TestBinaries> {
        let out = Command::new("cargo")
            .args(["test", "--no-run", "--message-format=json-render-diagnostics", "--quiet", "--target-dir", "target"])
            .current_dir(paths::root())
            .stderr(std::process::Stdio::inherit())
            .output()
            .context("running cargo test --no-run")?;
        if !out.status.success() {
            return Err(format!("cargo test --no-run failed ({})", out.status).into());
        }
        let mut found = BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            let (Some(exe), Some(kinds), Some(name)) =
                (message["executable"].as_str(), message["target"]["kind"].as_array(), message["target"]["name"].as_str())
            else {
                continue;
            };
            let kind = kinds.first().and_then(|k| k.as_str()).unwrap_or_default();
            let key = if kind == "lib" { "lib".to_owned() } else if kind == "test" { name.to_owned() } else { continue };
            found.insert(key, PathBuf::from(exe));
        }
        if found.is_empty() {
            return Err("cargo test --no-run named no test binary".into());
        }
        Ok(TestBinaries(found))
    }
}

/// The slices of the cases' snapshot test: each slice is one process with
/// a cluster of its own. The designed waits are uneven (F15 alone runs a
/// 40 s chaos run), so the slices are cut by duration, not by count.
const CASE_SLICES: &[&[&str]] = &[
    &["F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9"],
    &["F10", "F11", "F12", "F13", "F14"],
    &["F15"],
    &["F16"],
    &["F17", "F18", "F19"],
    &["F20", "F21", "F22", "F23", "F24", "F25", "F26", "F27", "F28", "F29", "F30", "F31", "F32", "F33", "F34"],
];

/// The most exercises (`./run.sh try NAME`, about ten seconds each) one
/// group runs: a page of thirteen would otherwise be the suite's longest.
const EXERCISES_PER_SLICE: usize = 5;

/// Guesses, in seconds, for groups the suite has not timed yet.
fn guess(name: &str) -> f64 {
    match name {
        n if n.starts_with("book try-") => 60.0,
        n if n.starts_with("book ") => 40.0,
        n if n.starts_with("cases ") => 45.0,
        "etcd" | "privacy" | "cli" | "bench" | "book" => 40.0,
        "visual" => 70.0,
        // A fresh clone built and run whole by an ordinary account.
        "reader_account" => 300.0,
        _ => 10.0,
    }
}

/// Every group of the suite: each test binary as a whole, except the
/// cases' snapshots (in slices, plus one slice of the book's variants) and
/// the book's commands (a chapter each). A test binary the suite does not
/// know is run whole, never skipped.
pub fn groups(binaries: &TestBinaries, times: &BTreeMap<String, f64>) -> Result<Vec<Group>> {
    let mut out = Vec::new();
    let mut add = |name: String, program: &PathBuf, args: Vec<String>, env: Vec<(String, String)>, needs_scratch: bool, reporter: Reporter, ahead: bool| {
        let estimate = times.get(&name).copied().unwrap_or_else(|| guess(&name));
        out.push(Group { name, program: program.clone(), args, env, needs_scratch, reporter, estimate, ahead });
    };
    for (target, program) in &binaries.0 {
        match target.as_str() {
            "cases" => {
                for slice in CASE_SLICES {
                    add(format!("cases {}", slice.join(" ")), program, slice.iter().map(|s| s.to_string()).collect(), vec![], false, Reporter::File, false);
                }
                let variants: Vec<String> = cases::variants().iter().map(|v| v.name()).collect();
                add("cases variants".into(), program, variants, vec![], false, Reporter::File, false);
            }
            "book_commands" => {
                let dir = paths::root().join("book");
                for chapter in book::chapters(&dir)? {
                    let text = std::fs::read_to_string(dir.join(&chapter)).with_context(|| format!("reading book/{chapter}"))?;
                    let commands = book::commands(&chapter, &text);
                    if commands.is_empty() {
                        continue;
                    }
                    // A page of many exercises (each a build and a case run)
                    // is cut into slices of at most EXERCISES_PER_SLICE.
                    let slices = if book::only_exercises(&commands) { commands.len().div_ceil(EXERCISES_PER_SLICE) } else { 1 };
                    let ahead = commands.iter().any(|c| c.within.is_some() || c.line.starts_with("./run.sh queue-chaos"));
                    for i in 0..slices {
                        let mut env = vec![("LAB_BOOK_CHAPTERS".to_owned(), chapter.clone())];
                        let name = if slices == 1 {
                            format!("book {chapter}")
                        } else {
                            env.push(("LAB_BOOK_SLICE".to_owned(), format!("{i}/{slices}")));
                            format!("book {chapter} {}/{slices}", i + 1)
                        };
                        // --nocapture: its progress reaches the log.
                        add(name, program, vec!["--nocapture".into()], env, book::needs_scratch(&commands), Reporter::LibtestAndFile, ahead);
                    }
                }
            }
            "lib" => add("unit".into(), program, vec![], vec![], false, Reporter::Libtest, false),
            // Its browser test runs an exercise from its page (`try`).
            "notebook" => add("notebook".into(), program, vec![], vec![], true, Reporter::Libtest, false),
            other => add(other.to_owned(), program, vec![], vec![], false, Reporter::Libtest, false),
        }
    }
    // Every slice of cases together must be every case: a case added to the
    // table and to no slice would go unchecked.
    let sliced: Vec<&str> = CASE_SLICES.iter().flat_map(|s| s.iter().copied()).collect();
    if let Some(missing) = cases::ALL.iter().find(|c| !sliced.contains(&c.id)) {
        return Err(format!("case {} is in no slice of the suite (suite/groups.rs, CASE_SLICES)", missing.id).into());
    }
    out.sort_by(|a, b| b.estimate.total_cmp(&a.estimate));
    Ok(out)
}

/// The groups a selection names: each of `only` picks every group whose
/// name contains it (`cases`, `book 07`), and none of them leaves all.
/// A name that picks nothing is refused, naming it and the groups there
/// are: a mistyped name must not run nothing, or less than was asked, and
/// pass.
pub fn select(all: Vec<Group>, only: &[String]) -> Result<Vec<Group>> {
    if only.is_empty() {
        return Ok(all);
    }
    let unmatched: Vec<&String> = only.iter().filter(|o| !all.iter().any(|g| g.name.contains(o.as_str()))).collect();
    if !unmatched.is_empty() {
        let mut names: Vec<&str> = all.iter().map(|g| g.name.as_str()).collect();
        names.sort_unstable();
        let asked: Vec<String> = unmatched.iter().map(|o| format!("{o:?}")).collect();
        return Err(format!(
            "no group of the suite has {} in its name, so nothing would run for it; a GROUP picks every group whose name contains it, and the groups are:\n  {}",
            asked.join(" or "),
            names.join("\n  ")
        )
        .into());
    }
    Ok(all.into_iter().filter(|g| only.iter().any(|o| g.name.contains(o.as_str()))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case runs in some slice, every book chapter with commands is a
    /// group, and a long page of exercises is cut into slices.
    #[test]
    fn the_groups_cover_the_cases_and_the_book() {
        let fake = PathBuf::from("/nonexistent/test-binary");
        let binaries = TestBinaries([("cases".to_owned(), fake.clone()), ("book_commands".to_owned(), fake.clone()), ("lib".to_owned(), fake)].into());
        let all = groups(&binaries, &BTreeMap::new()).unwrap();
        let names: Vec<&str> = all.iter().map(|g| g.name.as_str()).collect();
        for case in cases::ALL {
            assert!(all.iter().any(|g| g.name.starts_with("cases ") && g.args.iter().any(|a| a == case.id)), "{} in no slice: {names:?}", case.id);
        }
        assert!(names.contains(&"cases variants") && names.contains(&"unit"), "{names:?}");
        assert!(names.iter().any(|n| n.starts_with("book try-03-fence.md 1/")), "{names:?}");
        assert!(names.contains(&"book 07-lease-not-enough.md"), "{names:?}");
        // Ahead of the others: the incident table (its promises) and the
        // queue chaos run's chapter (its healthy workers).
        let mut ahead: Vec<&str> = all.iter().filter(|g| g.ahead).map(|g| g.name.as_str()).collect();
        ahead.sort_unstable();
        assert_eq!(ahead, ["book 30-job-queues.md", "book incidents.md"]);
        // Longest first.
        assert!(all.windows(2).all(|w| w[0].estimate >= w[1].estimate));
    }

    /// A selection that names no group is refused, naming what was asked
    /// and the groups there are; one name that matches nothing among names
    /// that do is refused too; a selection that matches keeps its groups.
    #[test]
    fn a_selection_that_matches_nothing_fails() {
        let fake = PathBuf::from("/nonexistent/test-binary");
        let binaries = TestBinaries([("cases".to_owned(), fake.clone()), ("layers".to_owned(), fake.clone()), ("lib".to_owned(), fake)].into());
        let all = groups(&binaries, &BTreeMap::new()).unwrap();
        let only = |names: &[&str]| select(all.clone(), &names.iter().map(|n| n.to_string()).collect::<Vec<_>>());

        let refused = only(&["no-such-group"]).map(|g| g.len()).unwrap_err().to_string();
        assert!(refused.contains("\"no-such-group\""), "{refused}");
        assert!(refused.contains("\n  layers\n") && refused.contains("\n  unit"), "the groups are not listed: {refused}");
        let partly = only(&["layers", "lyers"]).map(|g| g.len()).unwrap_err().to_string();
        assert!(partly.contains("\"lyers\"") && !partly.contains("\"layers\" or"), "{partly}");

        let picked: Vec<String> = only(&["layers", "cases F1 "]).unwrap().into_iter().map(|g| g.name).collect();
        assert_eq!(picked.len(), 2, "{picked:?}");
        assert!(picked.contains(&"layers".to_owned()) && picked.iter().any(|n| n.starts_with("cases F1 F2")), "{picked:?}");
        assert_eq!(only(&[]).unwrap().len(), all.len());
    }
}
