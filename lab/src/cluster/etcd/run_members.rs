//! A run's ownership of its member processes: the registry of the members
//! this process started for a run, the one owner that ends them (a drop of
//! [`EtcdCluster`], or the interrupt cleanup), and the lifecycle lock.

use super::EtcdCluster;
use crate::owner::{self, Owner};
use crate::error::Result;
use crate::poll;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::fs;
use std::path::{Path, PathBuf};
use parking_lot::Mutex;
use std::time::Duration;

/// A member started by this process for a run: its pid, to kill and reap it.
pub(super) struct RunMember {
    /// The member process.
    pub(super) pid: Pid,
    /// Its pid file, removed once it is reaped.
    pub(super) pid_file: PathBuf,
}

/// The members this process started for a run, alive now. One owner ends
/// them: this registry, from a drop or from the interrupt cleanup.
pub(super) static RUN_MEMBERS: Mutex<Vec<RunMember>> = Mutex::new(Vec::new());

/// Serialises start, stop, kill and restart within this process.
pub(super) static LIFECYCLE: Mutex<()> = Mutex::new(());


/// Kills and reaps every member this process started for a run. The
/// interrupt cleanup; safe to call twice.
pub fn stop_run_members() {
    end_run_members(|_| true);
}

fn end_run_members(which: impl Fn(&Path) -> bool) {
    let mut members = RUN_MEMBERS.lock();
    let (ending, keep): (Vec<RunMember>, Vec<RunMember>) = members.drain(..).partition(|m| which(&m.pid_file));
    *members = keep;
    for m in ending {
        // SIGCONT first, so a member a case froze is not left stopped if
        // the kill were to fail; SIGKILL ends it either way. Reaped here,
        // under the lock: afterwards the pid may be reused.
        let _ = kill(m.pid, Signal::SIGCONT);
        let _ = kill(m.pid, Signal::SIGKILL);
        let _ = waitpid(m.pid, None);
        let _ = fs::remove_file(&m.pid_file);
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        let dir = self.dir.clone();
        end_run_members(|pid_file| pid_file.starts_with(&dir));
        match owner::read(&self.dir) {
            Ok(Some(owner)) if owner == Owner::this_run() => {
                if let Err(e) = owner::clear(&self.dir) {
                    eprintln!("lab: could not clear the owner record of {}: {}", self.dir.display(), crate::error::chain(e.as_ref()));
                }
            }
            Ok(_) => {}
            Err(e) => eprintln!("lab: could not read the owner record of {}: {}", self.dir.display(), crate::error::chain(e.as_ref())),
        }
    }
}

/// Waits until process `pid` is gone, within `bound`: reaps it if it is this
/// process's child, else watches `/proc` (a zombie counts as gone: its
/// parent reaps it). `Ok(false)` when the bound ran out.
pub(super) fn wait_gone(pid: Pid, bound: Duration) -> Result<bool> {
    poll::poll_until(bound, Duration::from_millis(10), || -> Result<bool> {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => Ok(false),
            Ok(_) => Ok(true),
            // Not our child: ask /proc.
            Err(nix::errno::Errno::ECHILD) => {
                Ok(crate::sysinfo::state_and_start(pid.as_raw() as u32).is_none_or(|(state, _)| state == 'Z'))
            }
            Err(e) => Err(e.into()),
        }
    })
}
