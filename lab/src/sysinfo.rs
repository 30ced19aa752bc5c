//! Facts of this machine and its processes, read from `/proc`, one home
//! for each: the processors, the kernel, the load, the file system under a
//! folder, and a process's state and start time. The reports print the
//! machine's facts beside their numbers (a figure belongs to a machine);
//! the holder guard and the cluster's owner record read `/proc/<pid>/stat`.
//!
//! A fact the machine does not give is shown as `unknown`: these are
//! printed for a reader, never compared or computed with.

use std::path::{Path, PathBuf};

/// What a measurement ran on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// Logical processors this process may use, if the kernel says.
    pub cpus: Option<usize>,
    /// The processor's model, from `/proc/cpuinfo`.
    pub model: String,
    /// The kernel's release, from `/proc/sys/kernel/osrelease`.
    pub kernel: String,
    /// The 1, 5 and 15 minute load averages, from `/proc/loadavg`, as read now.
    pub load: String,
}

impl Machine {
    /// The facts as they are now.
    pub fn read() -> Machine {
        Machine { cpus: cpus(), model: cpu_model(), kernel: read_trimmed("/proc/sys/kernel/osrelease"), load: load_average() }
    }

    /// The processors as a count to print: `2`, or `unknown`.
    pub fn cpus_shown(&self) -> String {
        self.cpus.map_or_else(|| "unknown".into(), |n| n.to_string())
    }
}

/// Logical processors this process may use, if the kernel says.
pub fn cpus() -> Option<usize> {
    std::thread::available_parallelism().ok().map(|n| n.get())
}

/// The first `model name` of `/proc/cpuinfo`.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| info.lines().find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_owned())))
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The 1, 5 and 15 minute load averages: `0.52 0.40 0.31`.
pub fn load_average() -> String {
    read_trimmed("/proc/loadavg").split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// A file's text without its trailing newline, or `unknown`.
fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|t| t.trim().to_owned()).unwrap_or_else(|_| "unknown".into())
}

/// A mounted file system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The device, e.g. `/dev/vda1`.
    pub device: String,
    /// Where it is mounted.
    pub point: PathBuf,
    /// Its type, e.g. `ext4`: what a flush costs depends on it.
    pub kind: String,
}

/// The file system `path` lives on: the mount whose point is the longest
/// prefix of the path (resolved first, when it exists), from
/// `/proc/self/mounts`.
pub fn mount_of(path: &Path) -> Option<Mount> {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    mount_in(&std::fs::read_to_string("/proc/self/mounts").ok()?, &path)
}

/// [`mount_of`] over the text of a mounts table.
fn mount_in(mounts: &str, path: &Path) -> Option<Mount> {
    mounts
        .lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let (device, point, kind) = (fields.next()?, fields.next()?, fields.next()?);
            path.starts_with(point).then(|| Mount { device: device.into(), point: point.into(), kind: kind.into() })
        })
        .max_by_key(|m| m.point.as_os_str().len())
}

/// A process's (or a thread's) name, state, parent and start time, from
/// its `stat`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// The command name (`comm`, at most 15 bytes), e.g. `holder`.
    pub comm: String,
    /// `S` sleeping, `R` running, `T` stopped by a signal, `Z` exited but
    /// not yet reaped.
    pub state: char,
    /// The parent's pid (field 4).
    pub ppid: u32,
    /// Its process group (field 5).
    pub pgrp: u32,
    /// When it started, in clock ticks since boot (field 22): with the pid,
    /// it names one process, never a later one given the same pid.
    pub start_time: u64,
}

/// Parses a `/proc/<pid>/stat` (or `/proc/<pid>/task/<tid>/stat`) line,
/// "pid (comm) S ppid … starttime …". The command name may hold spaces
/// and parentheses, so it ends at the *last* ')', and the fields are
/// counted after it: the state is the first of them, the parent the
/// second, the process group the third, the start time (field 22) the
/// twentieth.
pub fn parse_stat(stat: &str) -> Option<ProcStat> {
    let (head, rest) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_owned();
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(ProcStat { comm, state, ppid, pgrp, start_time: fields.nth(16)?.parse().ok()? })
}

/// A process's [`ProcStat`], or `None` if it is gone.
pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// A process's state letter and start time, or `None` if it is gone: the
/// shape the cluster's owner record reads.
pub fn state_and_start(pid: u32) -> Option<(char, u64)> {
    proc_stat(pid).map(|s| (s.state, s.start_time))
}

/// Each thread's name and state, from `/proc/<pid>/task/<tid>/{comm,stat}`:
/// SIGSTOP stops a process's threads one by one, each on its own way back
/// from the kernel, so "stopped" means every thread shows `T`.
pub fn thread_states(pid: u32) -> std::io::Result<Vec<(String, char)>> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // A thread that ended between the listing and the read shows
        // as '?': never as stopped, so a wait for 'T' goes on.
        threads.push((comm.trim().to_owned(), parse_stat(&stat).map_or('?', |s| s.state)));
    }
    Ok(threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stat line with `comm` as its command name, in state `state`,
    /// started at tick 9876.
    fn stat_line(comm: &str, state: char) -> String {
        format!("4242 ({comm}) {state} 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 9876 123456 789 18446744073709551615")
    }

    /// The name ends at the last ')', whatever it holds, and the fields
    /// follow it; a line cut short or garbled is none.
    #[test]
    fn stat_fields_follow_the_last_parenthesis() {
        let stat = |comm: &str, state| Some(ProcStat { comm: comm.into(), state, ppid: 1, pgrp: 4242, start_time: 9876 });
        assert_eq!(parse_stat(&stat_line("holder", 'T')), stat("holder", 'T'));
        assert_eq!(parse_stat(&stat_line("a) b (c", 'S')), stat("a) b (c", 'S'));
        assert_eq!(parse_stat("4242 (holder) T 1 4242"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    /// This process reads back as alive (running, or sleeping while its
    /// test threads run), with the same start time each time it is read.
    #[test]
    fn this_process_is_alive() {
        let me = proc_stat(std::process::id()).expect("this process has a stat");
        assert!(matches!(me.state, 'R' | 'S'), "{me:?}");
        assert_eq!(state_and_start(std::process::id()).map(|(_, t)| t), Some(me.start_time));
        assert_eq!(proc_stat(u32::MAX), None);
    }

    /// The deepest mount point above a path wins; a path under none is none.
    #[test]
    fn the_deepest_mount_holds_the_path() {
        let mounts = "/dev/vda1 / ext4 rw 0 0\ntmpfs /run tmpfs rw 0 0\n/dev/vdb /run/data xfs rw 0 0\n";
        let kind = |p: &str| mount_in(mounts, Path::new(p)).map(|m| m.kind);
        assert_eq!(kind("/run/data/pg"), Some("xfs".into()));
        assert_eq!(kind("/run/other"), Some("tmpfs".into()));
        assert_eq!(kind("/var/lib"), Some("ext4".into()));
        assert_eq!(mount_in("tmpfs /run tmpfs rw 0 0\n", Path::new("/var")), None);
    }
}

/// This process's peak resident memory so far (`VmHWM` of
/// `/proc/self/status`), in bytes; an error when the kernel does not say.
pub fn peak_memory() -> crate::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).ok_or("/proc/self/status has no VmHWM line")?;
    let kib: u64 = line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().map_err(|e| format!("VmHWM in {line:?}: {e}"))?;
    Ok(kib * 1024)
}
