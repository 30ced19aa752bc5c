//! A run's ownership of the cluster: who started it, who must stop it, and
//! the lock that keeps two runs from resetting each other's tables.

use crate::owner::{self, Owner};
use super::{Cluster, NAME};
use crate::error::Result;
use crate::{interrupt, safe_dir};
use nix::fcntl::{Flock, FlockArg, OFlag};
use std::fs;
use std::io::{Read, Write};
use parking_lot::Mutex;

/// The cluster this process started and must stop again, if any.
static OWNED: Mutex<Option<Cluster>> = Mutex::new(None);

/// Held while this process starts the cluster. The interrupt cleanup takes
/// it before stopping: a `pg_ctl stop` sent while the server is still
/// starting finds no server yet, and the server then came up after the run
/// had exited (once, Ctrl-C'd at the suite, with its folder already gone).
static STARTING: Mutex<()> = Mutex::new(());

/// Holds the cluster for one run of cases: starts it if needed, stops it at
/// the end if it started it, and keeps other runs out meanwhile.
pub struct Session {
    /// The cluster in use.
    cluster: Cluster,
    /// Whether this session started it (and so must stop it).
    started_here: bool,
    /// An exclusive lock on `<place>/lock` (`target/lab/b3-26/lock`): two
    /// runs on one cluster would reset each other's tables mid-case.
    _run_lock: Flock<fs::File>,
}

impl Session {
    /// Locks out other runs and starts the cluster if it is not running. A
    /// server left running by a run that was killed is taken over: this
    /// session stops it at its end, as if it had started it.
    pub fn begin() -> Result<Session> {
        let cluster = Cluster::locate()?;
        let lock = lock_runs()?.map_err(|holder| {
            format!("another lab run (pid {holder}) is using the cluster; wait for it to finish")
        })?;
        let started_here = if !cluster.is_running()? {
            // Registered before starting, so Ctrl-C during the start stops it
            // too, once the start has ended (STARTING).
            let _starting = STARTING.lock();
            own(&cluster);
            cluster.start()?;
            true
        } else if let Some(left @ Owner::Run { pid, .. }) = owner::read(cluster.dir())? {
            // The run lock is ours, so no live run uses the server; a run
            // that started it and is gone can no longer stop it.
            if !left.is_dead_run() {
                return Err(format!("lab run pid {pid} started the cluster and still runs; wait for it to finish").into());
            }
            eprintln!("lab: the cluster was left running by lab run pid {pid}, which was killed; this run takes it over and stops it at its end");
            own(&cluster);
            true
        } else {
            false
        };
        if started_here {
            owner::write(cluster.dir(), &Owner::this_run())?;
        }
        Ok(Session { cluster, started_here, _run_lock: lock })
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

/// Makes this process the one that stops `cluster`, on every exit path.
fn own(cluster: &Cluster) {
    *OWNED.lock() = Some(cluster.clone());
    interrupt::on_stop(stop_owned);
}

/// Takes the cluster's run lock, `<place>/lock` (`target/lab/b3-26/lock`),
/// without waiting: `Err(pid)` names the process that holds it. The file
/// is in the place, a folder of this account's that no other account can
/// write to (so none can lock it and block every run), mode 0600, opened
/// without following a link and never truncated by path (only once it is
/// locked, through its descriptor).
pub fn lock_runs() -> Result<std::result::Result<Flock<fs::File>, String>> {
    let place = Cluster::locate()?.place()?;
    let file = place.open_file(LOCK_FILE, OFlag::O_RDWR | OFlag::O_CREAT, safe_dir::Account::me())?;
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

/// The run lock's name in the place.
const LOCK_FILE: &str = "lock";

/// Stops the cluster this process started, if any, unless the reader has
/// claimed it meanwhile with `cluster start`. Called when a session ends and
/// by the interrupt handler; safe to call twice.
pub fn stop_owned() {
    let _started = STARTING.lock();
    let owned = OWNED.lock().take();
    if let Some(cluster) = owned {
        match owner::read(cluster.dir()) {
            Ok(Some(Owner::Reader)) if cluster.is_running().unwrap_or(false) => return,
            Ok(_) => {}
            // This run started it: stopping it is the safe side.
            Err(e) => eprintln!("lab: cannot read who owns cluster {NAME} now ({}); stopping it, as this run started it", crate::error::chain(e.as_ref())),
        }
        if let Err(e) = cluster.stop() {
            eprintln!("lab: could not stop cluster {NAME}: {}", crate::error::chain(e.as_ref()));
        }
    }
}
