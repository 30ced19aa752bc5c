//! The README's commands as most readers run them: an ordinary account, on
//! Debian's default PATH, in a fresh clone in its own home.
//!
//! As root, the test makes the account `lab-reader` when it is missing,
//! puts a Rust toolchain where that account can read it (a copy of root's,
//! by hard links when the file system allows), and bundles the committed
//! HEAD of this checkout. Then, as the account: `git clone`, `./run.sh F1`
//! (the first command, with no folder made by hand), `./run.sh` (every
//! case, the network hosts of F15 and F17-F19 among them, made without
//! root), chapter 15's `diff` of its output with the locked full run (exit
//! 1: the masked values differ), each case's `./run.sh diff` against its
//! locked snapshot (the transcripts are root's), and `./run.sh chaos --mode fenced-scope
//! --duration 30s`, whose verdict must come with partitions injected.
//! After each run of cases and the chaos run: nothing of the reader's is left running, and so no
//! namespace of its either (a namespace lives only while a process is in
//! it or holds it). At the end the clone's `evidence/` is as checked out:
//! a reader's command never changes the locked evidence.
//!
//! As any other account than root, the test is already an ordinary one:
//! it runs the same commands as itself, on its own PATH's Rust and
//! Debian's PATH, in a clone in a private temporary folder. What it runs is what is
//! committed: the clone does not see uncommitted changes (it says so when
//! there are some).

mod common;

use common::{assert_exit, stderr, stdout};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The reader's account.
const READER: &str = "lab-reader";

/// Root's folder for what the reader must read: the toolchain, the bundle
/// (`/var/lib`: only root can make a name there).
const SHARED: &str = "/var/lib/lease-fencing-lab-reader";

/// Debian's PATH for an ordinary account (/etc/login.defs, ENV_PATH): no
/// /usr/sbin, where `nft` is.
const DEBIAN_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/games";

/// The account, made when it is missing; its uid, gid and home.
fn reader() -> nix::unistd::User {
    if nix::unistd::User::from_name(READER).unwrap().is_none() {
        let out = Command::new("useradd").args(["--create-home", "--shell", "/bin/bash", READER]).output().unwrap();
        assert!(out.status.success(), "useradd {READER}: {}", stderr(&out));
    }
    nix::unistd::User::from_name(READER).unwrap().unwrap()
}

/// Runs `program` as root, failing the test if it fails.
fn root(program: &str, args: &[&str]) -> Output {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", stderr(&out));
    out
}

/// A folder of root's under [`SHARED`] that everyone may read.
fn shared(name: &str) -> PathBuf {
    for dir in [Path::new(SHARED).to_path_buf(), Path::new(SHARED).join(name)] {
        if !dir.exists() {
            std::fs::create_dir(&dir).unwrap();
        }
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        assert!(meta.is_dir() && std::os::unix::fs::MetadataExt::uid(&meta) == 0, "{} is not root's folder", dir.display());
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    Path::new(SHARED).join(name)
}

/// The folder of a Rust toolchain the reader can run: root's own
/// (`rustc --print sysroot`), copied once per version.
fn toolchain() -> PathBuf {
    let sysroot = stdout(&root("rustc", &["--print", "sysroot"])).trim().to_owned();
    let version = stdout(&root("rustc", &["--version"])).split_whitespace().nth(1).unwrap().to_owned();
    let copy = shared("rust").join(version);
    if !copy.join("bin/cargo").is_file() {
        let partial = copy.with_extension("partial");
        let _ = std::fs::remove_dir_all(&partial);
        // Hard links: no second copy of about a gigabyte on the same disk.
        let linked = Command::new("cp").args(["-al", &sysroot]).arg(&partial).status().unwrap().success();
        if !linked {
            let _ = std::fs::remove_dir_all(&partial);
            root("cp", &["-a", &sysroot, partial.to_str().unwrap()]);
        }
        std::fs::rename(&partial, &copy).unwrap();
    }
    copy
}

/// A bundle of HEAD the reader can clone, in `dir`.
fn bundle(dir: &Path) -> PathBuf {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let dirty = Command::new("git").args(["status", "--porcelain", "--untracked-files=no"]).current_dir(top).output().unwrap();
    if !dirty.stdout.is_empty() {
        eprintln!("NOTE: this checkout has uncommitted changes; the reader's clone has HEAD only");
    }
    let file = dir.join("p.bundle");
    let out = Command::new("git").args(["bundle", "create", "-q"]).arg(&file).arg("HEAD").current_dir(top).output().unwrap();
    assert!(out.status.success(), "git bundle: {}", stderr(&out));
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    file
}

/// The reader's session: runs shell commands as the account, in the
/// folder that holds its clone `p`, with only the variables a login would
/// give it (and the suite's ports).
struct Reader {
    /// The account; `None`: this process's own (not root).
    account: Option<nix::unistd::User>,
    /// Its home.
    home: PathBuf,
    /// The folder the clone `p` is made in.
    dir: PathBuf,
    /// Its PATH: Debian's, after the toolchain's folder.
    path: String,
}

impl Reader {
    /// The clone.
    fn clone_dir(&self) -> PathBuf {
        self.dir.join("p")
    }

    fn sh(&self, script: &str) -> Output {
        let name = self.account.as_ref().map_or_else(|| std::env::var("USER").unwrap_or_default(), |u| u.name.clone());
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", script])
            .env_clear()
            .env("HOME", &self.home)
            .env("USER", &name)
            .env("LOGNAME", &name)
            .env("PATH", &self.path)
            .env("LANG", "C.UTF-8")
            .current_dir(&self.dir);
        if let Some(user) = &self.account {
            cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        }
        // The suite's ports for this group, so that the reader's servers
        // never meet another group's.
        for var in ["LAB_PORT", "LAB_ETCD_PORT_BASE", "LAB_FREE_PORTS"] {
            if let Ok(value) = std::env::var(var) {
                cmd.env(var, value);
            }
        }
        cmd.output().unwrap()
    }

    /// The reader's processes still running (zombies waiting for pid 1
    /// aside): any of the account's, when the test made it; any whose
    /// program, working folder or command line is in the clone.
    fn running(&self) -> Vec<String> {
        let clone = self.clone_dir();
        let clone = clone.to_string_lossy();
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            let Ok(meta) = std::fs::metadata(entry.path()) else { continue };
            let cmdline = String::from_utf8_lossy(&std::fs::read(entry.path().join("cmdline")).unwrap_or_default()).replace('\0', " ");
            let within = |link: &str| std::fs::read_link(entry.path().join(link)).is_ok_and(|p| p.to_string_lossy().starts_with(&*clone));
            let theirs = self.account.as_ref().is_some_and(|u| std::os::unix::fs::MetadataExt::uid(&meta) == u.uid.as_raw());
            if !(theirs || within("exe") || within("cwd") || cmdline.contains(&*clone)) {
                continue;
            }
            let Some(stat) = lab::sysinfo::proc_stat(pid) else { continue };
            if stat.state != 'Z' {
                found.push(format!("pid {pid} [{}]: {cmdline}", stat.state));
            }
        }
        found
    }

    /// Fails if anything of the reader's still runs a few seconds after
    /// `after` (a server's last processes take a moment to exit).
    fn assert_nothing_left(&self, after: &str) {
        let start = std::time::Instant::now();
        let mut left = self.running();
        while !left.is_empty() && start.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(100));
            left = self.running();
        }
        assert!(left.is_empty(), "after {after}, the reader's processes still run:\n{}", left.join("\n"));
    }
}

/// Removes the reader's clone and its cluster's folders, whatever happened.
struct CloneGone<'a>(&'a Reader);

impl Drop for CloneGone<'_> {
    fn drop(&mut self) {
        let _ = self.0.sh("cd p 2>/dev/null && ./run.sh cluster forget >/dev/null 2>&1; cd .. && rm -rf p");
    }
}

/// The reader: `lab-reader` made by root, or this account itself.
fn the_reader(scratch: &Path) -> (Reader, PathBuf) {
    if nix::unistd::Uid::effective().is_root() {
        let user = reader();
        let path = format!("{}:{DEBIAN_PATH}", toolchain().join("bin").display());
        let bundle = bundle(&shared("bundle"));
        (Reader { home: user.dir.clone(), dir: user.dir.clone(), account: Some(user), path }, bundle)
    } else {
        // Rust where this account's PATH has it: cargo's folder.
        let cargo = stdout(&Command::new("sh").args(["-c", "command -v cargo"]).output().unwrap()).trim().to_owned();
        let bin = Path::new(&cargo).parent().expect("cargo is on PATH").to_path_buf();
        let path = format!("{}:{DEBIAN_PATH}", bin.display());
        let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
        (Reader { account: None, home, dir: scratch.to_path_buf(), path }, bundle(scratch))
    }
}

/// Fresh clone, ordinary account, Debian's PATH: `./run.sh F1`, `./run.sh`
/// and a chaos run with partitions all pass, and leave nothing behind.
#[test]
fn an_ordinary_account_runs_every_case_from_a_fresh_clone() {
    let scratch = common::temp_dir("lab-reader-");
    let (me, bundle) = the_reader(scratch.path());
    let _gone = CloneGone(&me);
    assert_exit(&me.sh(&format!("rm -rf p && git clone -q {} p", bundle.display())), 0, "git clone as the reader");
    me.assert_nothing_left("the clone");
    assert!(!me.clone_dir().join("target").exists(), "the clone has a target/ already");

    let first = me.sh("cd p && ./run.sh F1");
    assert_exit(&first, 0, "./run.sh F1 as the reader, in a fresh clone");
    assert!(stdout(&first).contains("SUMMARY passed=18 failed=0"), "{}", stdout(&first));
    me.assert_nothing_left("./run.sh F1");

    let all = me.sh("cd p && ./run.sh");
    assert_exit(&all, 0, "./run.sh as the reader");
    let summary = stdout(&all).lines().find(|l| l.starts_with("SUMMARY ")).unwrap_or_default().to_owned();
    assert!(summary.ends_with(" failed=0"), "{summary}\n{}", stdout(&all));
    for case in ["F15", "F17", "F18", "F19"] {
        assert!(stdout(&all).contains(&format!("CASE {case} ::")), "{case} did not run:\n{}", stdout(&all));
    }
    assert!(!stderr(&all).contains("only root"), "{}", stderr(&all));
    me.assert_nothing_left("./run.sh");

    // Chapter 15's comparison with the locked full run: both are raw
    // output, so the values the snapshots mask differ (F2's timestamps at
    // least), and diff exits 1; 2 would be a missing file.
    let compared = me.sh("cd p && diff evidence/26/output.txt target/lab/output.txt >/dev/null");
    assert_exit(&compared, 1, "diff evidence/26/output.txt target/lab/output.txt as the reader (chapter 15)");
    // The same transcripts as root's: each case's matches its locked
    // snapshot, with the same redactions.
    let diffs = me.sh("cd p && for c in $(./run.sh list | awk '/^F[0-9]/ { print $1 }'); do ./run.sh diff $c || exit 1; done");
    assert_exit(&diffs, 0, "./run.sh diff of every case as the reader");
    assert_eq!(stdout(&diffs).matches(" matches evidence/26/F").count(), lab::cases::ALL.len(), "{}", stdout(&diffs));

    let chaos = me.sh("cd p && ./run.sh chaos --mode fenced-scope --duration 30s");
    assert_exit(&chaos, 0, "./run.sh chaos as the reader");
    let table = stdout(&chaos);
    let count = |row: &str| -> u64 {
        let line = table.lines().find(|l| l.starts_with(row)).unwrap_or_else(|| panic!("no row {row:?} in:\n{table}"));
        line.split_whitespace().last().unwrap().parse().unwrap()
    };
    assert!(count("  partition-split") + count("  partition-isolate") > 0, "no partition was injected:\n{table}");
    assert_eq!(count("partitions that did not cut"), 0, "{table}");
    assert!(table.lines().any(|l| l.starts_with("verdict") && l.trim_end().ends_with("clean")), "{table}");
    me.assert_nothing_left("./run.sh chaos");

    // A reader's commands write under target/lab/, never into the locked
    // evidence: the clone's evidence/ is as it was checked out.
    let status = me.sh("cd p && git status --porcelain --untracked-files=all -- evidence/");
    assert_exit(&status, 0, "git status of evidence/ as the reader");
    assert_eq!(stdout(&status), "", "the reader's commands changed the locked evidence");
    assert!(me.clone_dir().join("target/lab/output.txt").is_file(), "./run.sh wrote no target/lab/output.txt");
}
