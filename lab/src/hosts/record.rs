//! Which run made which network, and the removal of a network whose run is
//! gone.
//!
//! Every namespace of a network is named `lab26-<id>-<host>`: the lab's
//! prefix, the network's random id, the host. Before the first namespace
//! is made, the run records itself as the network's owner in the file
//! `target/lab/hosts/<id>` (or `$LAB_HOSTS_DIR/<id>`; in a folder the lab makes and marks, see
//! [`crate::safe_dir`]; written whole or not at all). Three nets remove the namespaces again: the
//! network's drop (the end of a case, an error, a panic), the interrupt
//! cleanup (Ctrl-C), and, for a run killed outright, the next run, which
//! finds the record of a run that no longer exists and removes that
//! network. A namespace named with the prefix but with no record in this
//! checkout is not this checkout's: it is left alone.

use super::netns::{self, Netns};
use crate::error::{Result, ResultExt};
use crate::owner::{self, Owner};
use crate::safe_dir::SafeDir;
use crate::{interrupt, paths, poll};
use std::time::Duration;
use std::io::Read;
use std::sync::Mutex;

/// The prefix of every namespace the lab makes.
pub const PREFIX: &str = "lab26-";

/// The networks this process has made and not yet removed, by id: what a
/// stop signal must remove.
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// One network's record: its id, in the records' folder.
#[derive(Debug)]
pub struct Record {
    /// Eight hex digits, random.
    id: String,
    /// `target/lab/hosts`, which holds the record `<id>`.
    records: SafeDir,
}

/// The records' folder, made (and marked) the first time.
fn records() -> Result<SafeDir> {
    let dir = paths::hosts_records_dir();
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    // Two runs making their first network at once: one makes the folder,
    // the other may find it a moment before its marker is written. Asked
    // again for a little while before that counts as someone else's folder.
    let mut made = SafeDir::open_or_make(&dir, 0o700);
    poll::poll_until(Duration::from_secs(1), poll::EVERY, || {
        if made.is_err() {
            made = SafeDir::open_or_make(&dir, 0o700);
        }
        Ok::<_, crate::Error>(made.is_ok())
    })?;
    made
}

impl Record {
    /// Removes what dead runs left, then records this run as the owner of a
    /// new network, before any of its namespaces exists.
    pub fn begin() -> Result<Record> {
        let records = records()?;
        sweep(&records)?;
        let mut bytes = [0u8; 4];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        // Registered before the first namespace: Ctrl-C from here on removes
        // whatever of this network exists.
        interrupt::on_stop(remove_live);
        // The id is listed and its record written under the list's lock, and
        // not at all once a stop signal has come: the cleanup then either
        // runs after both (and removes the record) or has already begun, and
        // the record is never written behind it as the process exits. (The
        // signal is marked before the cleanups are read, and the cleanup is
        // registered above, before the mark is asked.)
        let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        if interrupt::requested() {
            return Err("interrupted: no new network is made after a stop signal".into());
        }
        owner::write_in(&records, &id, &Owner::this_run())?;
        live.push(id.clone());
        Ok(Record { id, records })
    }

    /// The network's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The name of this network's namespace for `host`.
    pub fn netns_name(&self, host: &str) -> String {
        format!("{PREFIX}{}-{host}", self.id)
    }

    /// Makes this network's namespace for `host`, unless a stop signal has
    /// come: under the list's lock, so that the interrupt cleanup, which
    /// removes what it finds and then ends the process, never misses a
    /// namespace made while it works.
    pub fn add(&self, host: &str) -> Result<Netns> {
        let _live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        if interrupt::requested() {
            return Err("interrupted: no new host is made after a stop signal".into());
        }
        Netns::add(&self.netns_name(host))
    }

    /// Removes every namespace of this network and then the record.
    ///
    /// The list of live networks stays locked until the namespaces and the
    /// record are gone: the interrupt cleanup takes the same lock, so a
    /// Ctrl-C that lands during this removal waits for it instead of ending
    /// the process in its middle. (Taken off the list first, a chaos network
    /// was left half removed: the cleanup found nothing to do and exited
    /// while this thread had deleted one host of six. With the lock let go
    /// before the record's removal, a suite run in CI found the record of a
    /// chaos network whose namespaces were gone: the cleanup had exited in
    /// between.)
    pub fn end(self) -> Result<()> {
        let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        remove_network(&self.id)?;
        self.records.remove_file(&self.id)?;
        live.retain(|id| *id != self.id);
        Ok(())
    }
}

/// Removes the namespaces of network `id` (a leftover half of it too).
///
/// Each namespace is asked again, for up to [`REMOVE_BOUND`], while its
/// removal fails: a chaos network was once left half removed after a full
/// suite run (three hosts and the switch, its record kept), most likely by
/// one failed `ip netns del`; that must not leave the network for the next
/// run to sweep.
fn remove_network(id: &str) -> Result<()> {
    let deadline = std::time::Instant::now() + REMOVE_BOUND;
    loop {
        let mut first_error = None;
        for name in netns::listed(&format!("{PREFIX}{id}-")) {
            if let Err(e) = netns::remove(&name) {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            None => return Ok(()),
            Some(e) if std::time::Instant::now() >= deadline => return Err(e),
            Some(_) => std::thread::sleep(poll::EVERY),
        }
    }
}

/// How long a network's removal is retried before it is reported.
const REMOVE_BOUND: Duration = Duration::from_secs(5);

/// The interrupt cleanup: every network of this process, gone. It holds the
/// list's lock throughout, so a network's own removal ([`Record::end`]) is
/// either finished before it starts or never starts.
fn remove_live() {
    let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    for id in std::mem::take(&mut *live) {
        let _ = remove_network(&id);
        if let Ok(records) = records() {
            let _ = records.remove_file(&id);
        }
    }
}

/// Removes the networks of runs that no longer exist; returns their ids.
fn sweep(records: &SafeDir) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for id in recorded_ids(records)? {
        let gone = match owner::read_in(records, &id)? {
            Some(run @ Owner::Run { .. }) => run.is_dead_run(),
            Some(Owner::Reader) | None => false,
        };
        if gone {
            let names = remove_with_record(records, &id)?;
            if !names.is_empty() {
                eprintln!("lab: removed the network namespaces that a run which died left behind: {}", names.join(", "));
            }
            removed.push(id);
        }
    }
    Ok(removed)
}

/// Removes every network recorded in `dir`, whoever made it, with its
/// record; returns the namespaces that were still there. For the test
/// suite, once a group has ended: any record left is a network that the
/// group's runs did not remove. A folder that is missing holds none; one
/// without the lab's marker is refused.
pub fn remove_recorded(dir: &std::path::Path) -> Result<Vec<String>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let records = SafeDir::open(dir)?;
    let mut left = Vec::new();
    for id in recorded_ids(&records)? {
        let names = remove_with_record(&records, &id)?;
        left.push(if names.is_empty() { format!("the record of network {id}, its namespaces gone") } else { names.join(", ") });
    }
    Ok(left)
}

/// The ids of the networks recorded in `records`.
fn recorded_ids(records: &SafeDir) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(records.path())?.flatten() {
        let Some(id) = entry.file_name().to_str().map(str::to_owned) else { continue };
        // The marker, and a whole-write's leftover `<id>.partial`, are not records.
        if !id.starts_with('.') && !id.contains('.') {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Removes network `id`'s namespaces and then its record; returns the
/// namespaces that were there.
fn remove_with_record(records: &SafeDir, id: &str) -> Result<Vec<String>> {
    let names = netns::listed(&format!("{PREFIX}{id}-"));
    remove_network(id)?;
    records.remove_file(id)?;
    Ok(names)
}

/// The records' folder, for the tests that plant a dead run's record.
#[cfg(test)]
pub fn records_for_tests() -> SafeDir {
    records().expect("the records' folder")
}
