//! A run's ownership of the cluster: who started it, who must stop it, and
//! the lock that keeps two runs from resetting each other's tables.

use super::{Cluster, NAME};
use crate::error::Result;
use crate::{interrupt, paths};
use nix::fcntl::{Flock, FlockArg};
use std::fs;
use std::io::{Read, Write};
use std::sync::Mutex;

/// The cluster this process started and must stop again, if any.
static OWNED: Mutex<Option<Cluster>> = Mutex::new(None);

/// Holds the cluster for one run of cases: starts it if needed, stops it at
/// the end if it started it, and keeps other runs out meanwhile.
pub struct Session {
    /// The cluster in use.
    cluster: Cluster,
    /// Whether this session started it (and so must stop it).
    started_here: bool,
    /// An exclusive lock on `<cluster dir>.lock` (`target/lab/b3-26.lock`):
    /// two runs on one cluster would reset each other's tables mid-case.
    _run_lock: Flock<fs::File>,
}

impl Session {
    /// Locks out other runs, starts the cluster if it is not running, and
    /// recreates both databases.
    pub fn begin() -> Result<Session> {
        let cluster = Cluster::locate()?;
        let lock = lock_runs()?.map_err(|holder| {
            format!("another lab run (pid {holder}) is using the cluster; wait for it to finish")
        })?;
        let started_here = !cluster.is_running()?;
        if started_here {
            // Registered before starting, so Ctrl-C during the start stops it too.
            *OWNED.lock().unwrap_or_else(|p| p.into_inner()) = Some(cluster.clone());
            interrupt::on_stop(stop_owned);
            cluster.start()?;
        }
        let session = Session { cluster, started_here, _run_lock: lock };
        session.cluster.recreate_databases()?;
        Ok(session)
    }

    /// The cluster in use.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.started_here {
            stop_owned();
        }
    }
}

/// Takes the cluster's run lock, `<cluster dir>.lock` (`target/lab/b3-26.lock`),
/// without waiting: `Err(pid)` names the process that holds it.
pub fn lock_runs() -> Result<std::result::Result<Flock<fs::File>, String>> {
    let path = paths::cluster_dir().with_extension("lock");
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let file = fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            lock.set_len(0)?;
            write!(*lock, "{}", std::process::id())?;
            Ok(Ok(lock))
        }
        Err((mut file, _)) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            Ok(Err(pid.trim().to_owned()))
        }
    }
}

/// Stops the cluster this process started, if any. Called when a session
/// ends and by the interrupt handler; safe to call twice.
pub fn stop_owned() {
    let owned = OWNED.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(cluster) = owned {
        if let Err(e) = cluster.stop() {
            eprintln!("lab: could not stop cluster {NAME}: {}", crate::error::chain(e.as_ref()));
        }
    }
}
