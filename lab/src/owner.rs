//! Who started a server the lab runs (`b3-26`, or the etcd cluster
//! `etcd-26`), so that it outlives nobody's intention.
//!
//! A run of cases that starts the server stops it again at its end; the
//! reader's `./run.sh cluster start` keeps it up. A run killed with SIGKILL
//! (or Ctrl-\) cannot clean up: its holders die with it (PR_SET_PDEATHSIG),
//! but the postmaster, daemonised by pg_ctl, stays. The network namespaces
//! of a partition case need no record: they are held by the run's
//! descriptors and processes, and go with the run (`hosts`).
//! So the starter writes its name into `<folder>/owner`: `run <pid> <start
//! time>` or `reader`. A later run that finds the server still up and
//! owned by a run that no longer exists takes it over and ends it. The
//! process start time (field 22 of `/proc/<pid>/stat`) tells a dead run
//! from an unrelated process that was given the same pid later.

use crate::error::Result;
use crate::safe_dir::{self, SafeDir};
use std::path::Path;

/// Who started a server the lab runs.
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
        // This process runs, so /proc has it.
        Owner::Run { pid, started: start_time(pid).expect("/proc/self/stat is readable") }
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

/// The record's name in a server's folder.
const FILE: &str = "owner";

/// The recorded owner of the server in `dir` (a folder the lab made), if
/// any. A running server with no record was started by hand: the
/// reader's. A record that cannot be read or parsed is an error, not a
/// guess: it decides who stops the server.
pub fn read(dir: &Path) -> Result<Option<Owner>> {
    match SafeDir::open_made(dir)? {
        Some(place) => read_in(&place, FILE),
        None => Ok(None),
    }
}

/// The owner recorded in the file `name` of `place`, if there is one.
pub fn read_in(place: &SafeDir, name: &str) -> Result<Option<Owner>> {
    match place.read_file(name, safe_dir::Account::me())? {
        None => Ok(None),
        Some(text) => Owner::parse(&text).map(Some).ok_or_else(|| format!("{} says {text:?}, which is not an owner record", place.path().join(name).display()).into()),
    }
}

/// Records the owner of the server in `dir` (a folder the lab made).
pub fn write(dir: &Path, owner: &Owner) -> Result<()> {
    let place = SafeDir::open_made(dir)?.ok_or_else(|| format!("{} does not exist", dir.display()))?;
    write_in(&place, FILE, owner)
}

/// Records `owner` in the file `name` of `place`, whole or not at all.
pub fn write_in(place: &SafeDir, name: &str, owner: &Owner) -> Result<()> {
    place.write_whole(name, &owner.text(), 0o600)
}

/// Forgets the owner (the server was stopped).
pub fn clear(dir: &Path) -> Result<()> {
    match SafeDir::open_made(dir)? {
        Some(place) => place.remove_file(FILE),
        None => Ok(()),
    }
}

/// A process's start time in clock ticks since boot, or `None` if it is gone.
pub fn start_time(pid: u32) -> Option<u64> {
    crate::sysinfo::state_and_start(pid).map(|(_, started)| started)
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
