//! The cluster's lifecycle: start (all members, or from empty data for a
//! run), stop (followers first, then the leader), reset, and a member's
//! crash (SIGKILL) and restart.

use super::config::{MEMBERS, NAME, STOP_BOUND};
use crate::etcd_client::{self, Leader};
use super::run_members::{wait_gone, LIFECYCLE, RUN_MEMBERS};
use super::EtcdCluster;
use crate::owner::{self, Owner};
use crate::error::{Result, ResultExt};
use crate::safe_dir::SafeDir;
use crate::{interrupt, poll};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs;
use std::path::PathBuf;
use std::time::Instant;

/// The file in the cluster's folder that says where its members' data was
/// made (see `EtcdCluster::layout`).
const LAYOUT: &str = "layout";

impl EtcdCluster {
    /// Starts every member that is not running and waits until etcd has a
    /// leader that every running member follows. From nothing, `owner`
    /// becomes the cluster's owner; members missing from a running cluster
    /// are started for the owner it has. A cluster already up is left as is.
    pub fn start(&self, owner: Owner) -> Result<Leader> {
        let fresh;
        {
            let _lifecycle = LIFECYCLE.lock();
            if interrupt::requested() {
                return Err("interrupted".into());
            }
            let missing: Vec<usize> = (0..MEMBERS).filter(|&i| self.pid(i).is_none()).collect();
            let owner = if missing.len() == MEMBERS { owner } else { self.owner_of_running()? };
            if missing.len() == MEMBERS {
                self.forget_other_layout()?;
            }
            // Made from nothing: no member has data yet.
            fresh = (0..MEMBERS).all(|i| !self.data_dir(i).exists());
            // Every port first: a port held by something else ends the start
            // before any member runs.
            for &i in &missing {
                self.check_ports_free(i)?;
            }
            if !missing.is_empty() {
                // The default folder's parent is the lab's build folder,
                // which a fresh checkout has not made yet.
                if self.dir == super::default_dir() && std::env::var_os("LAB_ETCD_DIR").is_none() {
                    crate::paths::make_build_dir()?;
                }
                let folder = SafeDir::open_or_make(&self.dir, 0o700)?;
                if missing.len() == MEMBERS {
                    owner::write(&self.dir, &owner)?;
                }
                if fresh {
                    folder.write_whole(LAYOUT, &self.layout(), 0o600)?;
                }
            }
            for &i in &missing {
                self.spawn(i, &owner)?;
            }
        }
        let leader = self.wait_for_leader()?;
        self.ensure_auth(fresh)?;
        Ok(leader)
    }

    /// Stops every running member: SIGTERM (etcd closes cleanly), and
    /// SIGKILL for one still there after [`STOP_BOUND`]. Works on the
    /// reader's members from any process, by their pid files.
    ///
    /// The followers go first, then the leader, once it has stepped down. A
    /// leader that gets SIGTERM hands its leadership to a peer it still
    /// counts as connected, and waits for the handover up to etcd's request
    /// timeout: 6 s when that peer is stopping too (measured). A leader that
    /// lost its followers steps down within one or two election timeouts
    /// (raft's CheckQuorum, on in etcd), and a member that is not the leader
    /// exits at once on SIGTERM.
    pub fn stop(&self) -> Result<()> {
        let _lifecycle = LIFECYCLE.lock();
        // This run's own members leave the registry: from here on the stop
        // below is their one owner.
        let own_pid_files: Vec<PathBuf> = (0..MEMBERS).map(|i| self.pid_file(i)).collect();
        RUN_MEMBERS.lock().retain(|m| !own_pid_files.contains(&m.pid_file));
        let running: Vec<(usize, Pid)> =
            (0..MEMBERS).filter_map(|i| self.pid(i).map(|p| (i, Pid::from_raw(p as i32)))).collect();
        let leader = etcd_client::agreed_leader(&self.gateway.statuses()).map(|(index, _, _)| index);
        let (last, first): (Vec<_>, Vec<_>) = running.into_iter().partition(|(i, _)| Some(*i) == leader);
        let start = Instant::now();
        let mut forced = Vec::new();
        for (group, group_is_followers) in [(first, true), (last, false)] {
            for (_, pid) in &group {
                // SIGCONT first: a member a case froze must see the SIGTERM.
                let _ = kill(*pid, Signal::SIGCONT);
                let _ = kill(*pid, Signal::SIGTERM);
            }
            for (i, pid) in group {
                if !wait_gone(pid, STOP_BOUND.saturating_sub(start.elapsed()))? {
                    let _ = kill(pid, Signal::SIGKILL);
                    if !wait_gone(pid, poll::BOUND)? {
                        return Err(format!("etcd member {} (pid {pid}) survived SIGKILL", self.member(i).name).into());
                    }
                    forced.push(self.member(i).name);
                }
                let _ = fs::remove_file(self.pid_file(i));
            }
            if group_is_followers {
                if let Some(i) = leader {
                    self.wait_for_step_down(i);
                }
            }
        }
        owner::clear(&self.dir)?;
        if !forced.is_empty() {
            eprintln!("lab: etcd members {} did not stop within {STOP_BOUND:?} of SIGTERM; killed", forced.join(", "));
        }
        Ok(())
    }

    /// Starts the cluster from empty data for this run (F16, `lab
    /// lease-stores`): its revisions, the tokens, start at 1 again, as every
    /// case starts from fresh databases, so a transcript can lock them. A
    /// cluster that the reader or another live run has up is refused, not
    /// taken over (the run kills its leader); one left by a run that died is
    /// stopped first.
    pub fn start_fresh_for_run(&self) -> Result<Leader> {
        if (0..MEMBERS).any(|i| self.pid(i).is_some()) {
            match owner::read(&self.dir)? {
                Some(run @ Owner::Run { .. }) if run.is_dead_run() => {}
                Some(Owner::Run { pid, .. }) => {
                    return Err(format!("lab run pid {pid} is using etcd cluster {NAME} ({}); wait for it to finish", self.dir.display()).into())
                }
                Some(Owner::Reader) | None => {
                    return Err(format!(
                        "etcd cluster {NAME} ({}) is running for the reader; a run starts it from empty data and kills its \
                         leader: stop it first with `./run.sh etcd stop`",
                        self.dir.display()
                    )
                    .into())
                }
            }
        }
        self.reset()?;
        self.start(Owner::this_run())
    }

    /// Stops the cluster and removes its folder: the next start makes a new
    /// cluster, whose revisions start again at 1. Only a folder the lab made
    /// (it carries the marker) is removed; anything else is refused.
    pub fn reset(&self) -> Result<()> {
        let Some(folder) = SafeDir::open_made(&self.dir)? else { return Ok(()) };
        self.stop()?;
        folder.remove()?;
        // Its password went with the folder; the next start makes another.
        self.gateway.log_out();
        Ok(())
    }

    /// Kills member `i` with SIGKILL, as a crash would, and waits until it
    /// is gone; returns its pid. Its data stays for [`Self::restart_member`].
    pub fn kill_member(&self, i: usize) -> Result<u32> {
        let _lifecycle = LIFECYCLE.lock();
        let name = self.member(i).name;
        let pid = self.pid(i).ok_or_else(|| format!("etcd member {name} is not running"))?;
        let pid = Pid::from_raw(pid as i32);
        // A run's member leaves the registry first: this call is now its one
        // owner, and reaps it.
        RUN_MEMBERS.lock().retain(|m| m.pid != pid);
        // SIGKILL cannot be caught: no clean close, no leadership handover;
        // the others learn of it by the missing heartbeats. What it had
        // acknowledged is safe: etcd syncs its log before it answers.
        kill(pid, Signal::SIGKILL).with_context(|| format!("killing etcd member {name} (pid {pid})"))?;
        if !wait_gone(pid, poll::BOUND)? {
            return Err(format!("etcd member {name} (pid {pid}) survived SIGKILL for {:?}", poll::BOUND).into());
        }
        let _ = fs::remove_file(self.pid_file(i));
        Ok(pid.as_raw() as u32)
    }

    /// Starts member `i` again from its data, for the cluster's owner, and
    /// waits until it follows the leader.
    pub fn restart_member(&self, i: usize) -> Result<Leader> {
        {
            let _lifecycle = LIFECYCLE.lock();
            if interrupt::requested() {
                return Err("interrupted".into());
            }
            let name = self.member(i).name;
            if self.pid(i).is_some() {
                return Err(format!("etcd member {name} is already running").into());
            }
            if (0..MEMBERS).all(|j| self.pid(j).is_none()) {
                return Err(format!("etcd cluster {NAME} is not running: start it, not one member").into());
            }
            let owner = self.owner_of_running()?;
            self.check_ports_free(i)?;
            self.spawn(i, &owner)?;
        }
        self.wait_for_leader()
    }

    /// Where the members are: `loopback` (their sockets in the cluster's
    /// folder) or `hosts` (F19, on the lab's network). A member's data
    /// records the others' addresses, so data made in one layout cannot
    /// start in the other.
    fn layout(&self) -> String {
        if self.hosts.is_some() { "hosts" } else { "loopback" }.to_owned()
    }

    /// Removes the members' data when it was made in another layout (a run
    /// of F19 left it, and the reader now starts the cluster on this
    /// machine): the start then makes the cluster anew.
    fn forget_other_layout(&self) -> Result<()> {
        let Some(folder) = SafeDir::open_made(&self.dir)? else { return Ok(()) };
        let made_in = folder.read_file(LAYOUT, crate::safe_dir::Account::me())?;
        let has_data = (0..MEMBERS).any(|i| self.data_dir(i).exists());
        if has_data && made_in.as_deref().map(str::trim) != Some(self.layout().as_str()) {
            eprintln!("lab: etcd cluster {NAME} ({}) holds data made {}; starting it anew", self.dir.display(), made_in.map_or_else(|| "by an older lab".to_owned(), |l| format!("on {}", l.trim())));
            for i in 0..MEMBERS {
                folder.remove_tree(&self.member(i).name)?;
            }
            // Its password went with the data; the next login makes another.
            self.gateway.log_out();
        }
        Ok(())
    }

    /// The owner to start members for, in a cluster that has running members.
    fn owner_of_running(&self) -> Result<Owner> {
        match owner::read(&self.dir)? {
            Some(run @ Owner::Run { .. }) if run == Owner::this_run() => Ok(run),
            Some(Owner::Run { pid, .. }) => Err(format!(
                "lab run pid {pid} started etcd cluster {NAME} ({}) and still runs; wait for it to finish",
                self.dir.display()
            )
            .into()),
            // Up with no record: started by hand, so the reader's.
            Some(Owner::Reader) | None => Ok(Owner::Reader),
        }
    }
}
