//! Every command the book tells the reader to type behaves as the book says.
//!
//! The way the Rust book compiles every listing, this test runs every line
//! of every ```sh block of every chapter, in reading order (the order of
//! `book/SUMMARY.md`), exactly as printed.
//! A line's exit status must be 0, or the one its trailing comment promises
//! (`# 退出码 2`: "exit status 2"; a variant run's `diff` is promised 1);
//! a line that promises to be done within a minute (`# 一分钟内`, the
//! incident table's commands) must be.
//!
//! Each chapter starts as a fresh checkout does after its first build:
//! the project's files as they are (a copy under `target/book-commands/`,
//! synced and built before every chapter, so a command that edits files —
//! the exercises' `git apply` — never touches the developer's own tree),
//! and no cluster. The commands
//! run against a private cluster (`LAB_CLUSTER_DIR`, `LAB_PORT`, which every
//! process of the lab inherits), so they never touch the reader's own, and
//! it is removed afterwards whatever happened. The bench (`./run.sh
//! bench`) measures with the debug client the chapter has built already
//! (`LAB_BENCH_CLIENT=debug`), not a release build of its own: a test
//! never judges its figures.
//!
//! No command may change `evidence/`: a reader's runs write under
//! `target/lab/`, and re-locking the evidence (`./run.sh lock`, `--out
//! evidence/26/…`) is for the project, never a step of the book. Each
//! command's changes to the copy's `evidence/` (a file added, removed or
//! rewritten) fail the test.
//!
//! `LAB_BOOK_CHAPTERS=07-lease-not-enough.md,…` runs those chapters only:
//! the suite (`./run.sh test`) runs each chapter as a group of its own, in
//! parallel. The chapters share one checkout copy, made and synced by one
//! chapter at a time. A chapter that changes the project's files (`git
//! apply`) runs in a copy of its own, so it never stops the others. A
//! chapter that breaks guards (`./run.sh try`) uses the scratch copy
//! `LAB_SCRATCH_DIR` names.

#[path = "common/bench_table.rs"]
mod bench_table;

use lab::suite::book::{chapters, commands, edits_files, only_exercises};
use nix::fcntl::{Flock, FlockArg};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A command that takes longer than this is a hang, not a slow case.
const COMMAND_BOUND: Duration = Duration::from_secs(300);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A private cluster for the book's commands, removed on drop: its place
/// inside a folder `tempfile` made (a random name, created atomically),
/// opened to 0711 for the server account.
struct PrivateCluster {
    dir: PathBuf,
    port: String,
    etcd_port_base: String,
    _parent: tempfile::TempDir,
}

impl PrivateCluster {
    fn new() -> PrivateCluster {
        use std::os::unix::fs::PermissionsExt;
        let port = lab::cluster::free_ports(lab::cluster::PORTS).unwrap().to_string();
        let etcd_port_base = lab::cluster::free_ports(lab::cluster::etcd::PORTS).unwrap().to_string();
        let builder = tempfile::Builder::new().prefix("lab-book-").to_owned();
        // Under the suite's folder for the group, when it runs in the suite.
        let parent = match std::env::var_os("LAB_TEST_TMP") {
            Some(dir) => builder.tempdir_in(dir),
            None => builder.tempdir(),
        }
        .unwrap();
        std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        PrivateCluster { dir: parent.path().join("cluster"), port, etcd_port_base, _parent: parent }
    }

    fn env(&self, cmd: &mut Command) {
        cmd.env("LAB_CLUSTER_DIR", &self.dir).env("LAB_PORT", &self.port).env("LAB_ETCD_PORT_BASE", &self.etcd_port_base);
        // The etcd folder beside the cluster's: never the copy's shared one.
        cmd.env("LAB_ETCD_DIR", self.dir.with_file_name("etcd-26"));
    }

    /// Stops the server and deletes the folder: the state of a fresh checkout.
    fn reset(&self) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lab"));
        cmd.args(["cluster", "reset"]);
        self.env(&mut cmd);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "lab cluster reset failed: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        self.reset();
    }
}

/// The copy of the checkout the commands run in, made equal to the
/// project's files (what git tracks and untracked files it does not
/// ignore). Only files that differ are rewritten, so the copy's own
/// `target/` builds incrementally from one run to the next. The pinned book
/// tools are shared through a link rather than installed again.
fn checkout_copy(name: &str) -> PathBuf {
    let copy = root().join("target/book-commands").join(name);
    std::fs::create_dir_all(&copy).unwrap();
    // Its own build, its own repository and the link to the book tools stay.
    lab::mutants::scratch::mirror(&copy, &["target", ".git", ".tools"]).unwrap();
    // Its first build reuses the project's compiled dependencies.
    lab::mutants::scratch::seed_build(&root().join("target"), &copy.join("target")).unwrap();
    // A repository of its own: git commands in the copy (the exercises'
    // `git apply`, the mutation harness's `git ls-files`) must find the
    // copy, never the developer's repository around it.
    // (Made by one chapter at a time, see `locked_copy`.)
    if !copy.join(".git").exists() {
        let init = Command::new("git").args(["init", "-q"]).current_dir(&copy).output().unwrap();
        assert!(init.status.success(), "git init in {}: {}", copy.display(), String::from_utf8_lossy(&init.stderr));
    }
    let tools = copy.join(".tools");
    if root().join(".tools").is_dir() && !tools.exists() {
        std::os::unix::fs::symlink(root().join(".tools"), &tools).unwrap();
    }
    // Built, as a reader's checkout is after its first `./run.sh` (the
    // same command as run.sh's build, so the commands' own builds are
    // no-ops): a command's time is its own run, never the copy's build.
    // The incidents' `./run.sh F14   # 一分钟内`, first in its chapter and
    // started beside chapter 22, once paid that build, 82 s beside two
    // busy loops.
    let build = Command::new("cargo").args(["build", "--bins", "--quiet", "--target-dir", "target"]).current_dir(&copy).output().unwrap();
    assert!(build.status.success(), "cargo build in {}: {}", copy.display(), String::from_utf8_lossy(&build.stderr));
    copy
}

/// Runs one line with bash in the checkout copy, within the bound.
fn run(line: &str, copy: &Path, cluster: &PrivateCluster) -> Output {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", line]).current_dir(copy).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // Colours would only get in the way of the messages.
    cmd.env("NO_COLOR", "1");
    // `./run.sh bench` builds an optimised client, so that the client's own
    // CPU does not blur the figures a reader measures. A test never judges
    // the figures (bench_table.rs checks the table's shape), so here it
    // measures with the debug client the copy has built already: the same
    // code, and no release build of every dependency (55 s of processor
    // time even unoptimised, 165 s to 270 s of the chapter's wall time).
    cmd.env("LAB_BENCH_CLIENT", "debug");
    cluster.env(&mut cmd);
    // The suite's count file is this test's to write, not a command's
    // (a command that runs the cases' snapshot test would write there).
    cmd.env_remove(lab::suite::checked::VAR);
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let start = Instant::now();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&done);
    let watchdog = std::thread::spawn(move || {
        while !flag.load(std::sync::atomic::Ordering::SeqCst) {
            if start.elapsed() > COMMAND_BOUND {
                // SIGINT, as the reader's Ctrl-C: the lab cleans up and exits.
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGINT);
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    watchdog.join().unwrap();
    out
}

/// Every file under `evidence/` of the copy, with its length and time of
/// last change: a command that writes one changes its entry.
fn evidence_state(copy: &Path) -> std::collections::BTreeMap<PathBuf, (u64, std::time::SystemTime)> {
    fn walk(dir: &Path, into: &mut std::collections::BTreeMap<PathBuf, (u64, std::time::SystemTime)>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())).flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                walk(&entry.path(), into);
            } else {
                into.insert(entry.path(), (meta.len(), meta.modified().unwrap()));
            }
        }
    }
    let mut state = std::collections::BTreeMap::new();
    walk(&copy.join("evidence"), &mut state);
    state
}

/// What changed in `evidence/` between two states: the files, named from the copy's root.
fn evidence_changes(copy: &Path, before: &std::collections::BTreeMap<PathBuf, (u64, std::time::SystemTime)>) -> Vec<String> {
    let after = evidence_state(copy);
    let name = |p: &Path| p.strip_prefix(copy).unwrap_or(p).display().to_string();
    let mut changed: Vec<String> = after.iter().filter(|(p, s)| before.get(*p) != Some(s)).map(|(p, _)| name(p)).collect();
    changed.extend(before.keys().filter(|p| !after.contains_key(*p)).map(|p| format!("{} (removed)", name(p))));
    changed
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// The copy a chapter runs in: the shared copy `tree`, or, for a chapter
/// that changes the project's files, `edit-tree`, a copy of its own, held
/// alone for the whole chapter (the returned lock). Making or syncing a
/// copy is done by one chapter at a time, under a lock held only for
/// that: a chapter never waits for another chapter's commands to end,
/// which would hold up every group behind it.
fn locked_copy(edits: bool) -> (PathBuf, Option<Flock<std::fs::File>>) {
    let name = if edits { "edit-tree" } else { "tree" };
    let dir = root().join("target/book-commands");
    std::fs::create_dir_all(&dir).unwrap();
    let alone = |lock: &str| {
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(lock)).unwrap();
        Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| e).unwrap()
    };
    let held = edits.then(|| alone(&format!("{name}.lock")));
    let making = alone(&format!("{name}.making.lock"));
    let copy = checkout_copy(name);
    drop(making);
    (copy, held)
}

/// The chapters' commands, run in reading order, each exit status as the book says.
#[test]
fn book_commands_behave_as_the_book_says() {
    let mut order = chapters(&root().join("book")).unwrap();
    if let Ok(only) = std::env::var("LAB_BOOK_CHAPTERS") {
        let wanted: Vec<&str> = only.split(',').map(str::trim).filter(|c| !c.is_empty()).collect();
        if let Some(unknown) = wanted.iter().find(|w| !order.iter().any(|c| c == *w)) {
            panic!("LAB_BOOK_CHAPTERS names {unknown}, which book/SUMMARY.md does not list");
        }
        order.retain(|c| wanted.contains(&c.as_str()));
    }
    let cluster = PrivateCluster::new();
    let mut problems = Vec::new();
    let mut ran = 0;
    for chapter in &order {
        let text = std::fs::read_to_string(root().join("book").join(chapter)).unwrap();
        let mut list = commands(chapter, &text);
        if list.is_empty() {
            continue;
        }
        // LAB_BOOK_SLICE=i/n: every n-th command from the i-th, for a page
        // of exercises only (each runs on its own), as the suite cuts it.
        if let Ok(slice) = std::env::var("LAB_BOOK_SLICE") {
            let (i, n) = slice.split_once('/').and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?))).expect("LAB_BOOK_SLICE is i/n");
            assert!(only_exercises(&list) && i < n, "LAB_BOOK_SLICE={slice} on {chapter}, which is not a page of exercises only");
            list = list.into_iter().enumerate().filter(|(k, _)| k % n == i).map(|(_, c)| c).collect();
        }
        let start = Instant::now();
        let (copy, _lock) = locked_copy(edits_files(&list));
        eprintln!("book commands: {chapter} ({} commands, its copy ready in {:.1}s)", list.len(), start.elapsed().as_secs_f64());
        cluster.reset();
        for command in list {
            let began = Instant::now();
            let evidence_before = evidence_state(&copy);
            let out = run(&command.line, &copy, &cluster);
            let took = began.elapsed();
            let changed = evidence_changes(&copy, &evidence_before);
            if !changed.is_empty() {
                problems.push(format!("{}: `{}` changed the locked evidence, which a reader's command never does: {}", command.at, command.line, changed.join(", ")));
            }
            ran += 1;
            // In the group's log: which command of a slow chapter is slow.
            eprintln!("book commands: {:>6.1}s  {}", took.as_secs_f64(), command.line);
            if let Some(bound) = command.within.filter(|b| took > *b) {
                problems.push(format!("{}: `{}` took {:.0} s, the book says it is done within {} s", command.at, command.line, took.as_secs_f64(), bound.as_secs()));
            }
            // The bench is measured here only (tests/bench.rs measures
            // nothing): what it wrote must be the whole table.
            if let Some(grid) = bench_table::measured_table(&command.line).filter(|_| out.status.success()) {
                if let Err(why) = bench_table::check(&copy.join(&grid.table), &grid, &String::from_utf8_lossy(&out.stdout), &String::from_utf8_lossy(&out.stderr)) {
                    problems.push(format!("{}: `{}` wrote an incomplete bench: {why}", command.at, command.line));
                }
            }
            if out.status.code() != Some(command.exit) {
                problems.push(format!(
                    "{}: `{}` exited {}, the book says {}\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
                    command.at,
                    command.line,
                    out.status,
                    command.exit,
                    tail(&out.stdout),
                    tail(&out.stderr)
                ));
            }
        }
        eprintln!("book commands: {chapter} done in {:.1}s", start.elapsed().as_secs_f64());
    }
    println!("book commands: ran {ran} commands of {} chapters", order.len());
    // The suite's count (`suite::checked`): what ran; it is read only when this passes.
    lab::suite::checked::Checked { book_commands: ran, ..Default::default() }.report_to_suite().unwrap();
    assert!(problems.is_empty(), "{} of {ran} book commands did not behave as the book says:\n\n{}", problems.len(), problems.join("\n\n"));
    assert!(ran > 0, "no book command ran");
}

/// The evidence check sees a file rewritten, added and removed.
#[test]
fn a_command_that_writes_evidence_is_seen() {
    let copy = tempfile::tempdir().unwrap();
    let evidence = copy.path().join("evidence/26");
    std::fs::create_dir_all(&evidence).unwrap();
    std::fs::write(evidence.join("bench.md"), "locked\n").unwrap();
    std::fs::write(evidence.join("F1.snap"), "locked\n").unwrap();
    let before = evidence_state(copy.path());
    assert!(evidence_changes(copy.path(), &before).is_empty(), "nothing was written yet");
    std::fs::write(evidence.join("bench.md"), "measured again\n").unwrap();
    std::fs::write(evidence.join("output.json"), "{}").unwrap();
    std::fs::remove_file(evidence.join("F1.snap")).unwrap();
    assert_eq!(
        evidence_changes(copy.path(), &before),
        ["evidence/26/bench.md", "evidence/26/output.json", "evidence/26/F1.snap (removed)"]
    );
}
