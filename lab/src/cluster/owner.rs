//! Who started the running server, so that a server outlives nobody's
//! intention.
//!
//! A run of cases that starts the server stops it again at its end; the
//! reader's `./run.sh cluster start` keeps it up. A run killed with SIGKILL
//! (or Ctrl-\) cannot clean up: its holders die with it (PR_SET_PDEATHSIG),
//! but the postmaster, daemonised by pg_ctl, stays. So the starter writes its
//! name into `<cluster dir>/owner`: `run <pid> <start time>` or `reader`. A
//! later run that finds the server up and owned by a run that no longer
//! exists takes it over and stops it at its own end. The process start time
//! (field 22 of `/proc/<pid>/stat`) tells a dead run from an unrelated
//! process that was given the same pid later.

use std::fs;
use std::path::{Path, PathBuf};

/// Who started the running server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// A run of cases, which stops it at its end.
    Run {
        /// The run's pid.
        pid: u32,
        /// Its start time in clock ticks since boot, from `/proc/<pid>/stat`.
        started: u64,
    },
    /// The reader (`cluster start`), who stops it with `cluster stop`.
    Reader,
}

impl Owner {
    /// This process, as a run.
    pub fn this_run() -> Owner {
        let pid = std::process::id();
        Owner::Run { pid, started: start_time(pid).unwrap_or(0) }
    }

    /// Whether this owner is a run that no longer exists.
    pub fn is_dead_run(&self) -> bool {
        match self {
            Owner::Run { pid, started } => start_time(*pid) != Some(*started),
            Owner::Reader => false,
        }
    }

    fn text(&self) -> String {
        match self {
            Owner::Run { pid, started } => format!("run {pid} {started}\n"),
            Owner::Reader => "reader\n".into(),
        }
    }

    fn parse(text: &str) -> Option<Owner> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        match fields.as_slice() {
            ["run", pid, started] => Some(Owner::Run { pid: pid.parse().ok()?, started: started.parse().ok()? }),
            ["reader"] => Some(Owner::Reader),
            _ => None,
        }
    }
}

fn file(dir: &Path) -> PathBuf {
    dir.join("owner")
}

/// The recorded owner of the cluster in `dir`, if any. A running server
/// with no record was started by hand (or by an older lab): the reader's.
pub fn read(dir: &Path) -> Option<Owner> {
    fs::read_to_string(file(dir)).ok().and_then(|t| Owner::parse(&t))
}

/// Records the owner of the cluster in `dir`.
pub fn write(dir: &Path, owner: &Owner) -> std::io::Result<()> {
    fs::write(file(dir), owner.text())
}

/// Forgets the owner (the server was stopped).
pub fn clear(dir: &Path) {
    let _ = fs::remove_file(file(dir));
}

/// A process's start time in clock ticks since boot, or `None` if it is gone.
pub(super) fn start_time(pid: u32) -> Option<u64> {
    state_and_start(pid).map(|(_, started)| started)
}

/// A process's state letter (`Z`: exited, not yet reaped) and start time,
/// or `None` if it is gone.
pub(super) fn state_and_start(pid: u32) -> Option<(char, u64)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the last ')' (the command name may hold any character): field 3
    // (the state) is the first, so field 22 (starttime) is the 20th.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.nth(18)?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The record round-trips, and a missing or garbled record means the reader.
    #[test]
    fn owner_round_trips() {
        let run = Owner::Run { pid: 42, started: 12345 };
        assert_eq!(Owner::parse(&run.text()), Some(run));
        assert_eq!(Owner::parse(&Owner::Reader.text()), Some(Owner::Reader));
        assert_eq!(Owner::parse("garbage"), None);
    }

    /// This process is a live run; the same pid with another start time is a dead one.
    #[test]
    fn a_reused_pid_is_not_the_run() {
        let me = Owner::this_run();
        assert!(!me.is_dead_run());
        let Owner::Run { pid, started } = me else { unreachable!() };
        assert!(Owner::Run { pid, started: started + 1 }.is_dead_run());
        assert!(!Owner::Reader.is_dead_run());
    }
}
