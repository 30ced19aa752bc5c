//! Running the groups: a few at once, each in an environment of its own,
//! with progress while they run and a table of the slowest at the end.

use super::checked::{self, Checked};
use super::groups::{groups, select, Group, TestBinaries};
use crate::error::{Result, ResultExt};
use crate::{interrupt, paths};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// How the suite runs.
#[derive(Clone, Debug)]
pub struct SuiteOptions {
    /// How many groups run at once. Their time is mostly waiting, so more
    /// than the machine's cores: 6 on 2 cores. Beside two busy loops, 4
    /// took 17:19 with the cores not full (each busy loop got under half a
    /// core): the groups were waiting, and 4 at a time left too few to
    /// overlap. Before the exercises built each mutant once, 6 and 8 were
    /// alike (15:40, 15:51): the cores were the limit then, and still are
    /// (eight again, from a fresh clone: each group about twice as slow).
    pub workers: usize,
    /// Only the groups whose name contains one of these (all when empty);
    /// each must pick some group (`groups::select`).
    pub only: Vec<String>,
}

/// How many scratch copies the mutation exercises share: the exercises are
/// most of the suite's longest work, and a copy costs one seeded build. On
/// 6 workers, 3 leave three workers for the other groups at all times.
const SCRATCH_COPIES: usize = 3;

/// The ports the suite's groups pick from: one range per worker slot,
/// below the ephemeral range (see `cluster::free_ports`).
const PORTS_LOW: u32 = 20000;
const PORTS_HIGH: u32 = 32000;

/// How much nicer than the suite every group runs but those whose
/// verdicts need the machine's time (`Group::ahead`), which
/// run in a session of their own. Beside five groups of equal priority on
/// 2 cores, the incidents' `./run.sh F18   # 一分钟内` (8 s alone) took
/// 65 s in CI. Within one scheduling group the kernel weighs a thread at
/// niceness n+5 about a third of one at n; it changes nothing while a core
/// is idle. Where the kernel groups threads by session (autogroup), a
/// session is weighed as a whole, whatever its niceness: such a group's
/// own session weighs as much as the rest of the suite's, and each
/// server `pg_ctl` starts (a new session) as much again.
pub const NICER_BY: i32 = 5;

/// How long one group may run before it is a hang: far above the longest
/// (a chapter of mutation exercises, a few minutes).
const GROUP_BOUND: Duration = Duration::from_secs(20 * 60);

/// A group that is running.
struct Running {
    /// Which group.
    group: Group,
    /// Its process (the leader of its own process group).
    child: Child,
    /// When it started.
    started: Instant,
    /// Its worker slot (its port range).
    slot: usize,
    /// The scratch copy it holds, if it needs one.
    scratch: Option<usize>,
    /// Its own folder (cluster place, etcd folder), removed after it.
    home: PathBuf,
    /// Its log.
    log: PathBuf,
    /// The file its runner writes what it checked to, when it writes one
    /// ([`checked::VAR`]).
    checked: PathBuf,
}

/// How a group ended.
struct Ended {
    /// Its name.
    name: String,
    /// How long it ran.
    took: Duration,
    /// The processor time it used (user and system), with every process
    /// of it that was reaped within it: what it cost the machine.
    cpu: Duration,
    /// Whether it passed (and left nothing running).
    ok: bool,
    /// Its log.
    log: PathBuf,
    /// What it left running, if anything.
    leftovers: Vec<String>,
    /// What it checked, as its runner says (nothing for a group whose
    /// process failed: it has failed already); or why its pass proves
    /// nothing (it ran nothing, or its count cannot be read), which fails it.
    checked: std::result::Result<Checked, String>,
}

/// The process groups and homes of the running groups, for the Ctrl-C cleanup.
static LIVE: Mutex<Vec<(i32, PathBuf)>> = Mutex::new(Vec::new());

/// Runs the suite: builds the test binaries, runs every group, prints the
/// table; `Ok(true)` when every group passed.
pub fn run(options: &SuiteOptions) -> Result<bool> {
    let started = Instant::now();
    let dir = paths::root().join("target").join("suite");
    std::fs::create_dir_all(dir.join("logs"))?;
    eprintln!("suite: building the test binaries…");
    let binaries = TestBinaries::build()?;
    let built = started.elapsed();
    // This machine's times from its last run, else the ones committed
    // beside this file (a run on a 2-core machine), to start the longest first.
    let mut times = parse_times(include_str!("times.tsv"));
    times.extend(read_times(&dir.join("times.tsv")));
    let mut pending: Vec<Group> = select(groups(&binaries, &times)?, &options.only)?;
    let total = pending.len();
    let workers = options.workers.max(1);
    println!("suite: {total} groups on {workers} workers (binaries built in {:.0}s)", built.as_secs_f64());
    interrupt::on_stop(stop_live);

    let mut running: Vec<Running> = Vec::new();
    let mut ended: Vec<Ended> = Vec::new();
    let mut scratch_free = [true; SCRATCH_COPIES];
    let mut last_report = Instant::now();
    while !pending.is_empty() || !running.is_empty() {
        if interrupt::requested() {
            // The interrupt thread stops everything and exits the process.
            std::thread::park();
        }
        // Start what fits: a free slot, and a scratch copy if it needs one.
        while running.len() < workers {
            let Some(at) = pending.iter().position(|g| !g.needs_scratch || scratch_free.contains(&true)) else { break };
            let group = pending.remove(at);
            let slot = (0..workers).find(|s| !running.iter().any(|r| r.slot == *s)).expect("a free slot");
            let scratch = group.needs_scratch.then(|| {
                let i = scratch_free.iter().position(|f| *f).expect("checked above");
                scratch_free[i] = false;
                i
            });
            let r = start(group, slot, workers, scratch, &dir)?;
            println!("[{:>2}/{total}] start {:<40} (slot {slot}{})", ended.len() + running.len() + 1, r.group.name, scratch.map(|s| format!(", scratch {s}")).unwrap_or_default());
            running.push(r);
        }
        std::thread::sleep(Duration::from_millis(200));
        let mut i = 0;
        while i < running.len() {
            let overdue = running[i].started.elapsed() > GROUP_BOUND;
            if overdue {
                signal_group(running[i].child.id() as i32, Signal::SIGINT);
            }
            if let Some((success, cpu)) = reap(running[i].child.id() as i32)? {
                let r = running.remove(i);
                if let Some(s) = r.scratch {
                    scratch_free[s] = true;
                }
                let e = finish(r, success && !overdue, cpu)?;
                println!(
                    "[{:>2}/{total}] {:<5} {:<40} {:>6.1}s cpu {:>5.1}s  (elapsed {})",
                    ended.len() + 1,
                    if e.ok { "ok" } else { "FAIL" },
                    e.name,
                    e.took.as_secs_f64(),
                    e.cpu.as_secs_f64(),
                    clock(started.elapsed())
                );
                ended.push(e);
            } else {
                i += 1;
            }
        }
        if last_report.elapsed() >= Duration::from_secs(60) && !running.is_empty() {
            last_report = Instant::now();
            let names: Vec<String> = running.iter().map(|r| format!("{} ({:.0}s)", r.group.name, r.started.elapsed().as_secs_f64())).collect();
            println!("suite: {} done, {} waiting; running: {}", ended.len(), pending.len(), names.join(", "));
        }
    }
    write_times(&dir.join("times.tsv"), &times, &ended)?;
    Ok(report(&ended, started.elapsed(), built))
}

/// Starts one group in its own process group, with its own environment.
fn start(group: Group, slot: usize, workers: usize, scratch: Option<usize>, dir: &Path) -> Result<Running> {
    // A folder of its own, under a random name (mkdtemp: made atomically,
    // nobody can have placed it first), open to the server account.
    let home = nix::unistd::mkdtemp(&homes_base().join("lab-suite-XXXXXX")).context("making a group's folder")?;
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o711))?;
    let width = (PORTS_HIGH - PORTS_LOW) / workers as u32;
    let (low, high) = (PORTS_LOW + slot as u32 * width, PORTS_LOW + (slot as u32 + 1) * width);
    let stem = group.name.replace([' ', '/'], "_");
    let log = dir.join("logs").join(format!("{stem}.log"));
    let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    // A count left by an earlier run must not speak for this one.
    let checked = dir.join("logs").join(format!("{stem}.checked.json"));
    match std::fs::remove_file(&checked) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(format!("removing the old count {}: {e}", checked.display()).into()),
        _ => {}
    }
    let mut cmd = Command::new(&group.program);
    cmd.args(&group.args)
        .current_dir(paths::root().join("lab"))
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .env("LAB_CLUSTER_DIR", home.join("cluster"))
        // The tests' own private clusters go in here too, so that nothing
        // they leave (a test killed by Ctrl-C runs no Drop) escapes clear_home.
        .env("LAB_TEST_TMP", &home)
        .env("LAB_ETCD_DIR", home.join("etcd-26"))
        .env("LAB_FREE_PORTS", format!("{low}-{high}"))
        .env(checked::VAR, &checked)
        .env("LAB_PORT", crate::cluster::free_ports_in(low, high, crate::cluster::PORTS)?.to_string())
        .env("LAB_ETCD_PORT_BASE", crate::cluster::free_ports_in(low, high, crate::cluster::etcd::PORTS)?.to_string())
        .envs(group.env.iter().map(|(k, v)| (k, v)));
    if let Some(s) = scratch {
        cmd.env("LAB_SCRATCH_DIR", dir.join(format!("scratch-{s}")));
    }
    // Its own process group: a Ctrl-C at the terminal reaches the suite,
    // which passes it on to every group's processes at once.
    if group.ahead {
        // A session of its own is a process group of its own too, and,
        // where the kernel groups by session (autogroup), a share of the
        // cores equal to the whole rest of the suite's, as each server
        // `pg_ctl` starts has.
        // SAFETY: setsid is a system call, safe between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()?;
                Ok(())
            })
        };
    } else {
        cmd.process_group(0);
        // SAFETY: getpriority and setpriority are system calls, safe
        // between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                // Raised from where the suite runs (`nice -n 10 ./run.sh
                // test` stays ordered too): raising one's own niceness is
                // allowed to every account, lowering it is not. What the
                // group starts inherits it, in its session.
                nix::errno::Errno::clear();
                let now = nix::libc::getpriority(nix::libc::PRIO_PROCESS, 0);
                if now == -1 && nix::errno::Errno::last_raw() != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if nix::libc::setpriority(nix::libc::PRIO_PROCESS, 0, (now + NICER_BY).min(19)) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
    }
    let child = cmd.spawn().with_context(|| format!("starting {}", group.name))?;
    LIVE.lock().push((child.id() as i32, home.clone()));
    Ok(Running { group, child, started: Instant::now(), slot, scratch, home, log, checked })
}

/// Where the groups' folders go: `/dev/shm` when it is a memory file
/// system (a tmpfs) as Debian mounts it, sticky and root's; else `/tmp`.
/// Every cluster, standby and etcd member of the suite lives in a group's
/// folder, and they create and delete tens of thousands of files (initdb,
/// CREATE DATABASE, base backups, every schema reset). On this machine's
/// ext4 (no journal, mounted with `discard`) each new file's inode is found
/// by skipping the recently deleted ones one by one: a profile of a whole
/// suite run found a quarter of the servers' processor time there, and two
/// thirds of pg_basebackup's. On a tmpfs that costs nothing. No verdict
/// depends on the disk: the cases force their interleavings with latches
/// and the database's own state, never with the speed of a flush (the
/// bench, which measures it, says which file system it measured on, and
/// the suite judges none of its figures). `mkdtemp` makes the folder
/// under a random name and fails if it exists, in either place.
fn homes_base() -> PathBuf {
    use nix::sys::statfs::{statfs, TMPFS_MAGIC};
    use std::os::unix::fs::MetadataExt;
    let shm = Path::new("/dev/shm");
    let tmpfs = statfs(shm).is_ok_and(|s| s.filesystem_type() == TMPFS_MAGIC);
    let guarded = std::fs::symlink_metadata(shm).is_ok_and(|m| m.is_dir() && m.uid() == 0 && m.mode() & 0o1000 != 0);
    if tmpfs && guarded { shm.to_path_buf() } else { PathBuf::from("/tmp") }
}

/// Judges a group that ended: its exit status, what it says it checked (a
/// pass of nothing fails it), and what it left running in its folder (a
/// server, etcd members), which is stopped and fails it.
fn finish(r: Running, passed: bool, cpu: Duration) -> Result<Ended> {
    LIVE.lock().retain(|(pid, _)| *pid != r.child.id() as i32);
    let mut leftovers = stop_strays(r.child.id() as i32);
    leftovers.extend(clear_home(&r.home));
    let checked = if passed { checked::read(r.group.reporter, &r.log, &r.checked) } else { Ok(Checked::default()) };
    let ok = passed && leftovers.is_empty() && checked.is_ok();
    Ok(Ended { name: r.group.name, took: r.started.elapsed(), cpu, ok, log: r.log, leftovers, checked })
}

/// Kills the processes still in the process group `pgid` once its leader
/// has ended (a test's child that outlived it); returns what they were.
/// Holders and servers run in process groups of their own: a holder dies
/// with its lab (`interrupt::tie_to_lab`), a server is found by clear_home.
fn stop_strays(pgid: i32) -> Vec<String> {
    let mut strays = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Some(stat) = crate::sysinfo::proc_stat(pid) else { continue };
        if stat.pgrp == pgid as u32 && stat.state != 'Z' {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            strays.push(format!("process {pid} ({})", String::from_utf8_lossy(&cmdline).replace('\0', " ").trim()));
        }
    }
    if !strays.is_empty() {
        signal_group(pgid, Signal::SIGKILL);
        wait_until_gone(&[pgid], Duration::from_secs(10));
    }
    strays
}

/// Stops what a group left running in its folder and removes the folder;
/// returns what had to be stopped. The group's tests make their private
/// clusters inside it too (`LAB_TEST_TMP`), so every place and etcd folder
/// in it is asked, the deepest first (the mutants' place is inside a place).
fn clear_home(home: &Path) -> Vec<String> {
    let lab = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("lab"));
    let mut left = Vec::new();
    let mut found = Vec::new();
    lab_folders(home, 0, &mut found);
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for dir in found {
        let ask = |var: &str, args: &[&str]| Command::new(&lab).args(args).env(var, &dir).output();
        if dir.join("server").is_dir() {
            if ask("LAB_CLUSTER_DIR", &["cluster", "status"]).is_ok_and(|o| o.status.success()) {
                left.push(format!("a PostgreSQL server in {}", dir.display()));
            }
            if let Ok(out) = ask("LAB_CLUSTER_DIR", &["cluster", "forget"]) {
                if !out.status.success() {
                    left.push(format!("a cluster folder it could not remove: {}", String::from_utf8_lossy(&out.stderr).trim()));
                }
            }
        } else if dir.join("m1").is_dir() && ask("LAB_ETCD_DIR", &["etcd", "status"]).is_ok_and(|o| o.status.code() == Some(0)) {
            left.push(format!("etcd members in {}", dir.display()));
            let _ = ask("LAB_ETCD_DIR", &["etcd", "stop"]);
        }
    }
    if let Err(e) = std::fs::remove_dir_all(home) {
        left.push(format!("its folder {} ({e})", home.display()));
    }
    left
}

/// The folders the lab made under `dir` (they carry its marker), a few levels down.
fn lab_folders(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    if depth > 4 {
        return;
    }
    if dir.join(crate::safe_dir::MARKER).is_file() {
        found.push(dir.to_path_buf());
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        // Not into links, and not into a server's own folder.
        if entry.file_type().is_ok_and(|t| t.is_dir()) && entry.file_name() != "server" {
            lab_folders(&entry.path(), depth + 1, found);
        }
    }
}

/// Ctrl-C: SIGINT to every running group's processes, a bounded wait for
/// their own cleanup, SIGKILL for what is still there, then their folders.
fn stop_live() {
    let live: Vec<(i32, PathBuf)> = LIVE.lock().clone();
    let groups: Vec<i32> = live.iter().map(|(pgid, _)| *pgid).collect();
    for (pgid, _) in &live {
        signal_group(*pgid, Signal::SIGINT);
    }
    // Each group cleans up after its own Ctrl-C (holders, servers, hosts);
    // then whatever is still there is killed, and only once nothing of the
    // group runs any more (a killed process may still be making a folder)
    // is its home cleared.
    wait_until_gone(&groups, Duration::from_secs(60));
    for (pgid, _) in &live {
        signal_group(*pgid, Signal::SIGKILL);
    }
    wait_until_gone(&groups, Duration::from_secs(10));
    for (_, home) in &live {
        for what in clear_home(home) {
            // Not eprintln!: after SIGHUP the terminal may be gone, and a
            // panic would leave the other groups' folders.
            let _ = writeln!(std::io::stderr(), "suite: stopped what a group left after Ctrl-C: {what}");
        }
    }
}

/// Waits, at most `bound`, until no process of these process groups is left.
fn wait_until_gone(groups: &[i32], bound: Duration) {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline && groups.iter().any(|pgid| !group_gone(*pgid)) {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Reaps the group leader `pid` if it has ended: whether it exited with 0,
/// and the processor time it and the processes it reaped used (`wait4`
/// reports that; std's `Child` does not).
fn reap(pid: i32) -> Result<Option<(bool, Duration)>> {
    use nix::libc;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain integers, for which all zeroes is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 writes only into the two locals it is given.
    let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
    if reaped == 0 {
        return Ok(None);
    }
    if reaped < 0 {
        return Err(format!("waiting for group process {pid}: {}", std::io::Error::last_os_error()).into());
    }
    let time = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    let success = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    Ok(Some((success, time(usage.ru_utime) + time(usage.ru_stime))))
}

/// Whether no process of the group `pgid` is left. Its leader is this
/// process's child: reaped here, so that its zombie does not count as alive
/// (the main thread, which would reap it, is parked during a Ctrl-C).
fn group_gone(pgid: i32) -> bool {
    let _ = waitpid(Pid::from_raw(pgid), Some(WaitPidFlag::WNOHANG));
    kill(Pid::from_raw(-pgid), None).is_err()
}

/// Sends `signal` to every process of the process group `pgid`.
fn signal_group(pgid: i32, signal: Signal) {
    // A negative pid names the process group; the group may be gone already.
    let _ = kill(Pid::from_raw(-pgid), signal);
}

/// `m:ss`.
fn clock(d: Duration) -> String {
    format!("{}:{:02}", d.as_secs() / 60, d.as_secs() % 60)
}

/// The end: failures with the tail of their logs, the slowest groups, the
/// counts of what was checked; `true` when every group passed.
fn report(ended: &[Ended], wall: Duration, built: Duration) -> bool {
    let failed: Vec<&Ended> = ended.iter().filter(|e| !e.ok).collect();
    for e in &failed {
        println!("\n--- FAIL {} ({})", e.name, e.log.display());
        for what in &e.leftovers {
            println!("left running: {what}");
        }
        if let Err(why) = &e.checked {
            println!("{why}");
        }
        let text = std::fs::read_to_string(&e.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for line in &lines[lines.len().saturating_sub(40)..] {
            println!("  {line}");
        }
    }
    let mut slowest: Vec<&Ended> = ended.iter().collect();
    slowest.sort_by_key(|e| std::cmp::Reverse(e.took));
    println!("\nslowest groups:     (took: wall time; cpu: processor time, user + system)");
    for e in slowest.iter().take(12) {
        println!("  {:>7.1}s  cpu {:>6.1}s  {}", e.took.as_secs_f64(), e.cpu.as_secs_f64(), e.name);
    }
    let busy: f64 = ended.iter().map(|e| e.took.as_secs_f64()).sum();
    let cpu: f64 = ended.iter().map(|e| e.cpu.as_secs_f64()).sum();
    let mut counts = Checked::default();
    // Only what passed counts as checked.
    for checked in ended.iter().filter(|e| e.ok).filter_map(|e| e.checked.as_ref().ok()) {
        counts.add(checked);
    }
    println!(
        "\nsuite: {} groups, {} failed; {} wall ({} building), {:.0} s of group time, {:.0} s of processor time\nchecked: {counts}",
        ended.len(),
        failed.len(),
        clock(wall),
        clock(built),
        busy,
        cpu
    );
    let _ = std::io::stdout().flush();
    failed.is_empty()
}

/// The seconds each group took last time, to start the longest first.
fn read_times(path: &Path) -> BTreeMap<String, f64> {
    parse_times(&std::fs::read_to_string(path).unwrap_or_default())
}

/// `name<TAB>seconds` lines.
fn parse_times(text: &str) -> BTreeMap<String, f64> {
    text.lines().filter_map(|l| l.split_once('\t')).filter_map(|(name, s)| Some((name.to_owned(), s.parse().ok()?))).collect()
}

/// Remembers this run's times (and keeps the others').
fn write_times(path: &Path, old: &BTreeMap<String, f64>, ended: &[Ended]) -> Result<()> {
    let mut times = old.clone();
    for e in ended {
        times.insert(e.name.clone(), e.took.as_secs_f64());
    }
    let text: String = times.iter().map(|(n, s)| format!("{n}\t{s:.1}\n")).collect();
    paths::write_whole(path, &text).with_context(|| format!("writing {}", path.display()))
}
