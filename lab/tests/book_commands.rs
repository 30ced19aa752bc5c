//! Every command the book tells the reader to type behaves as the book says.
//!
//! The way the Rust book compiles every listing, this test runs every line
//! of every ```sh block of every chapter, in reading order (the order of
//! `book/SUMMARY.md`), exactly as printed.
//! A line's exit status must be 0, or the one its trailing comment promises
//! (`# 退出码 2`: "exit status 2"; a variant run's `diff` is promised 1).
//!
//! Each chapter starts as a fresh checkout does: the project's files as
//! they are (a copy under `target/book-commands/tree`, synced before every
//! chapter, so a command that edits files — the exercises' `git apply` —
//! never touches the developer's own tree), and no cluster. The commands
//! run against a private cluster (`LAB_CLUSTER_DIR`, `LAB_PORT`, which every
//! process of the lab inherits), so they never touch the reader's own, and
//! it is removed afterwards whatever happened.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A command that takes longer than this is a hang, not a slow case.
const COMMAND_BOUND: Duration = Duration::from_secs(300);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// One command line of a ```sh block.
#[derive(Debug, PartialEq)]
struct BookCommand {
    /// `book/<chapter>:<line>`, for messages.
    at: String,
    /// The line as the reader types it (the promise comment is kept: bash ignores it).
    line: String,
    /// The exit status the book promises.
    exit: i32,
}

/// The commands of one chapter, in order.
fn commands(chapter: &str, text: &str) -> Vec<BookCommand> {
    let mut out = Vec::new();
    let mut in_sh = false;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(info) = trimmed.strip_prefix("```") {
            in_sh = !in_sh && matches!(info.trim(), "sh" | "bash" | "console");
            continue;
        }
        if !in_sh || trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let exit = trimmed
            .rsplit_once("# 退出码 ")
            .and_then(|(_, promise)| promise.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
            .unwrap_or(0);
        out.push(BookCommand { at: format!("book/{chapter}:{}", n + 1), line: trimmed.to_owned(), exit });
    }
    out
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
        let port = lab::cluster::free_ports(3).unwrap().to_string();
        let etcd_port_base = lab::cluster::free_ports(14).unwrap().to_string();
        let parent = tempfile::Builder::new().prefix("lab-book-").tempdir().unwrap();
        std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        PrivateCluster { dir: parent.path().join("cluster"), port, etcd_port_base, _parent: parent }
    }

    fn env(&self, cmd: &mut Command) {
        cmd.env("LAB_CLUSTER_DIR", &self.dir).env("LAB_PORT", &self.port).env("LAB_ETCD_PORT_BASE", &self.etcd_port_base);
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
fn checkout_copy() -> PathBuf {
    let copy = root().join("target/book-commands/tree");
    let listed = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(listed.status.success(), "git ls-files failed: the book-commands test needs a git checkout");
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = std::str::from_utf8(name).unwrap();
        let Ok(content) = std::fs::read(root().join(name)) else { continue };
        let to = copy.join(name);
        if std::fs::read(&to).ok().as_deref() != Some(content.as_slice()) {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::write(&to, content).unwrap();
            // Keep the executable bit (run.sh, the tools' scripts).
            let mode = std::fs::metadata(root().join(name)).unwrap().permissions();
            std::fs::set_permissions(&to, mode).unwrap();
        }
    }
    // A repository of its own: git commands in the copy (the exercises'
    // `git apply`, the mutation harness's `git ls-files`) must find the
    // copy, never the developer's repository around it.
    if !copy.join(".git").exists() {
        let init = Command::new("git").args(["init", "-q"]).current_dir(&copy).output().unwrap();
        assert!(init.status.success(), "git init in {}: {}", copy.display(), String::from_utf8_lossy(&init.stderr));
    }
    let tools = copy.join(".tools");
    if root().join(".tools").is_dir() && !tools.exists() {
        std::os::unix::fs::symlink(root().join(".tools"), &tools).unwrap();
    }
    copy
}

/// Runs one line with bash in the checkout copy, within the bound.
fn run(line: &str, copy: &Path, cluster: &PrivateCluster) -> Output {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", line]).current_dir(copy).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // Colours would only get in the way of the messages.
    cmd.env("NO_COLOR", "1");
    cluster.env(&mut cmd);
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

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// The chapters' commands, run in reading order, each exit status as the book says.
#[test]
fn book_commands_behave_as_the_book_says() {
    let summary = std::fs::read_to_string(root().join("book/SUMMARY.md")).unwrap();
    let order: Vec<&str> = summary.split(['(', ')']).filter(|s| s.ends_with(".md")).collect();
    let cluster = PrivateCluster::new();
    let mut problems = Vec::new();
    let mut ran = 0;
    for chapter in &order {
        let text = std::fs::read_to_string(root().join("book").join(chapter)).unwrap();
        let list = commands(chapter, &text);
        if list.is_empty() {
            continue;
        }
        eprintln!("book commands: {chapter} ({} commands)", list.len());
        cluster.reset();
        let copy = checkout_copy();
        for command in list {
            let out = run(&command.line, &copy, &cluster);
            ran += 1;
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
    }
    assert!(problems.is_empty(), "{} of {ran} book commands did not behave as the book says:\n\n{}", problems.len(), problems.join("\n\n"));
    assert!(ran > 0, "no book command ran");
}

/// The parser takes sh lines only, skips comments, and reads the promised exit status.
#[test]
fn commands_and_promises_are_parsed() {
    let text = "x\n```sh\n# a comment\n./run.sh F4\n./run.sh diff F4   # 退出码 1：与证据不同\n```\n```rust\nnot a command\n```\n";
    let list = commands("ch.md", text);
    assert_eq!(
        list,
        vec![
            BookCommand { at: "book/ch.md:4".into(), line: "./run.sh F4".into(), exit: 0 },
            BookCommand { at: "book/ch.md:5".into(), line: "./run.sh diff F4   # 退出码 1：与证据不同".into(), exit: 1 },
        ]
    );
}
