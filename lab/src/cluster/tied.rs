//! The servers a run starts as its own children, beside `b3-26`: F14's
//! primary and standby, and the servers of the partition cases, each on a
//! host of the lab's network.
//!
//! Each lives in a place of its own inside `b3-26`'s place (a *sibling*:
//! `<place>/<role>`, on `LAB_PORT` + an offset), made once and kept between
//! runs like `b3-26`'s, and lives exactly as long as the run that started
//! it. Its postmaster is this process's child ([`Cluster::launch`]), with
//! three nets, as for the holders: its owner's drop stops it (an error, a
//! failed check, a panic); the interrupt handler stops it on Ctrl-C; and
//! when the run is killed outright (SIGKILL), the kernel's parent-death
//! signal gives the postmaster SIGQUIT, PostgreSQL's immediate shutdown.
//! That signal follows the *thread* that started the server, so a run
//! starts these servers from the thread that runs the case. A server found
//! running in such a place anyway can only be the leftover of a run that
//! died past all three (the run lock keeps every other run out): it is
//! stopped, with a line on stderr.
//!
//! A server on a host starts inside it (its postmaster is born in the
//! host's namespace), listens on the host's address as well as on its
//! loopback, and lets the lab's subnet in (`pg_hba.conf`; see
//! [`super::lifecycle`]).

use super::lifecycle::end_postmaster;
use super::{Cluster, NAME};
use crate::error::Result;
use crate::hosts::Host;
use crate::interrupt;
use std::process::Child;
use parking_lot::Mutex;

/// The postmasters this process started as its children, to stop and reap.
static TIED: Mutex<Vec<(Cluster, Child)>> = Mutex::new(Vec::new());

impl Cluster {
    /// A server inside this cluster's place: `<place>/<role>` on this port +
    /// `offset` (F14's `primary` and `standby`, the partition cases'
    /// `lease` and `resource`).
    pub fn sibling(&self, role: &str, offset: u16) -> Result<Cluster> {
        let port = self.port.checked_add(offset).ok_or_else(|| format!("LAB_PORT={} leaves no room for the {role} server at +{offset}", self.port))?;
        Ok(Cluster { name: format!("{NAME}-{role}"), dir: self.dir.join(role), port, ..self.clone() })
    }

    /// The same server, made (by initdb) with WAL segments of `mb` MB
    /// rather than 16: F14's and F18's primary, whose standby is copied
    /// from it again and again, and whose copy carries the WAL written
    /// during it, at least one whole segment. A server found made with
    /// another size is made again at its next start.
    pub fn with_wal_segment_mb(self, mb: u32) -> Cluster {
        Cluster { wal_segment_mb: Some(mb), ..self }
    }

    /// The same server, run on `host` of the lab's network.
    pub fn on_host(self, host: &Host) -> Cluster {
        Cluster { host: Some(host.clone()), ..self }
    }

    /// The host it runs on, if any.
    pub fn host(&self) -> Option<&Host> {
        self.host.as_ref()
    }
}

/// A sibling server a run started, stopped cleanly when dropped (its data
/// is kept for the next run, which then starts without a recovery).
pub struct TiedServer {
    /// The server.
    server: Cluster,
}

impl TiedServer {
    /// Starts `server` as this process's child (see the module's opening).
    pub fn start(server: Cluster) -> Result<TiedServer> {
        start_tied(&server)?;
        Ok(TiedServer { server })
    }

    /// Launches `server` as this process's child and returns as soon as
    /// its postmaster is spawned (after the checks every start makes, and
    /// initdb on a first start), while it boots: [`Starting::ready`] waits
    /// for it. In between, the case's thread may start another server or
    /// wait for something else (both from the thread that runs the case:
    /// see the module's opening). The booting postmaster is registered at
    /// once: a Ctrl-C before `ready` stops it with the others.
    pub fn launch(server: Cluster) -> Result<Starting> {
        if is_tied(&server) {
            return Err(format!("{} is already this run's", server.name()).into());
        }
        launch_tied(&server)?;
        Ok(Starting { server: Some(server) })
    }

    /// The server.
    pub fn server(&self) -> &Cluster {
        &self.server
    }
}

/// A server launched by [`TiedServer::launch`], not yet ready; its
/// postmaster is in the registry of tied children meanwhile, except while
/// [`Starting::ready`] waits for it (then a Ctrl-C leaves it to the
/// parent-death signal at the lab's exit).
pub struct Starting {
    /// The server; `None` once handed on to a [`TiedServer`].
    server: Option<Cluster>,
}

impl Starting {
    /// Waits until the server takes connections: then it is this run's,
    /// stopped when the returned server is dropped.
    pub fn ready(mut self) -> Result<TiedServer> {
        let server = self.server.take().expect("a Starting is readied once");
        await_tied(&server)?;
        Ok(TiedServer { server })
    }
}

impl Drop for Starting {
    /// Never waited for (an error came first): its postmaster gets
    /// SIGQUIT, PostgreSQL's immediate shutdown, which takes its own
    /// processes with it, and is reaped.
    fn drop(&mut self) {
        if let Some(mut child) = self.server.as_ref().and_then(take_tied) {
            end_postmaster(&mut child);
        }
    }
}

/// Takes `server`'s postmaster out of the registry, if it is there.
fn take_tied(server: &Cluster) -> Option<Child> {
    let mut tied = TIED.lock();
    tied.iter().position(|(s, _)| s.dir() == server.dir()).map(|at| tied.remove(at).1)
}

impl Drop for TiedServer {
    fn drop(&mut self) {
        if let Err(e) = stop_tied(&self.server, "fast") {
            eprintln!("lab: could not stop {}: {}", self.server.name(), crate::error::chain(e.as_ref()));
        }
    }
}

/// Starts `server` as this process's child, unless it already is one: a
/// launch and its wait, one right after the other.
pub(super) fn start_tied(server: &Cluster) -> Result<()> {
    if is_tied(server) {
        return Ok(());
    }
    launch_tied(server)?;
    await_tied(server)
}

/// Whether `server` is one of this process's tied children already.
fn is_tied(server: &Cluster) -> bool {
    TIED.lock().iter().any(|(s, _)| s.dir() == server.dir())
}

/// Launches `server`'s postmaster (a leftover in its place stopped first)
/// and registers it: a Ctrl-C before [`await_tied`] takes it out stops it
/// with the others.
fn launch_tied(server: &Cluster) -> Result<()> {
    stop_leftover(server)?;
    interrupt::on_stop(stop_all);
    let child = server.launch()?.ok_or_else(|| format!("{} still runs after the leftover found in its place was stopped", server.name()))?;
    TIED.lock().push((server.clone(), child));
    Ok(())
}

/// Waits until `server`'s launched postmaster is ready. It is out of the
/// registry while it is waited for (the wait needs the child itself; a
/// Ctrl-C meanwhile leaves it to the parent-death signal at the lab's
/// exit), back in once ready; gone already if Ctrl-C stopped it before.
fn await_tied(server: &Cluster) -> Result<()> {
    let child = take_tied(server).ok_or("interrupted: the server was stopped while it started")?;
    let child = server.await_launched(child)?;
    TIED.lock().push((server.clone(), child));
    Ok(())
}

/// A server found running in a tied server's place before its start can
/// only be a leftover of a run that died (see the module's opening): it is
/// stopped, with a line on stderr.
fn stop_leftover(server: &Cluster) -> Result<()> {
    if server.is_running()? {
        eprintln!("lab: {} ({}) was left running by a lab run that died; stopping it", server.name(), server.data_dir().display());
        server.stop_with("immediate")?;
    }
    Ok(())
}

/// Stops `server` with `pg_ctl stop -m <mode>` if it runs, and reaps its
/// postmaster if it was this process's child.
pub(super) fn stop_tied(server: &Cluster, mode: &str) -> Result<()> {
    let child = take_tied(server);
    let stopped = server.stop_with(mode);
    if let Some(mut child) = child {
        // Reaped; a server that would not stop is ended first.
        end_postmaster(&mut child);
    }
    stopped
}

/// Stops each of `servers` with its mode, all at once, each on a thread of
/// its own (a clean stop waits for a checkpoint and for the postmaster to
/// end, and the servers do not wait for each other); a server that would
/// not stop is named on stderr, as a drop does.
pub(super) fn stop_tied_together(servers: &[(&Cluster, &str)]) {
    std::thread::scope(|threads| {
        for (server, mode) in servers {
            threads.spawn(move || {
                if let Err(e) = stop_tied(server, mode) {
                    eprintln!("lab: could not stop {}: {}", server.name(), crate::error::chain(e.as_ref()));
                }
            });
        }
    });
}

/// Ends `a` and `b` at once: `a` dropped on a thread of its own, `b` on
/// this one (for a case's servers at its end: the partition cases' lease
/// store and resource, F18's pair and resource).
pub fn drop_together<A: Send, B: Send>(a: A, b: B) {
    std::thread::scope(|threads| {
        threads.spawn(move || drop(a));
        drop(b);
    });
}

/// Stops every server this process started as its child (Ctrl-C).
fn stop_all() {
    let all: Vec<(Cluster, Child)> = std::mem::take(&mut *TIED.lock());
    for (server, mut child) in all {
        // Stopped, then only reaped below; or still booting, launched and
        // not yet ready, with no pid file for pg_ctl to act on
        // (launch_tied); or a server that would not stop: ended there.
        let _ = server.stop_with("immediate");
        end_postmaster(&mut child);
    }
}
