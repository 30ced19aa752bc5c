//! F14's lease store: a primary and its streaming standby, two servers of
//! the lab's own beside `b3-26`, so that failing the lease store over never
//! pulls the shared `lease26` away from the other cases. F18 runs the same
//! pair on two hosts of the lab's network ([`FailoverPair::on_hosts`]): the
//! standby then streams from the primary's address across the switch, so
//! a partition cuts the replication link the way a network does.
//!
//! | server | socket (its port) | folder |
//! |---|---|---|
//! | `b3-26-primary` | `.s.PGSQL.<LAB_PORT + 1>` | `<cluster place>/primary` |
//! | `b3-26-standby` | `.s.PGSQL.<LAB_PORT + 2>` | `<cluster place>/standby` |
//!
//! On this machine each listens on its Unix socket only, and the standby
//! streams from the primary's socket (see [`super`]); on hosts, on its
//! host's address as well. Ports and folders follow `LAB_PORT` and
//! `LAB_CLUSTER_DIR`, so a test's
//! private cluster gets private replicas. The primary is made once, like
//! `b3-26` (initdb with passwords), and kept between runs. The standby is
//! made afresh for every timeline from a base backup of the primary (a
//! standby that has been promoted has left the primary's history for
//! good), written over the old standby's files ([`super::copy_over`]).
//! The base backup and the standby's WAL receiver connect as the replication
//! role [`credentials::REPLICATOR`] (LOGIN REPLICATION, no superuser), whose
//! password only the server account can read on the standby's side. Each
//! server's folder is a place of its own, split as `b3-26`'s is (see
//! [`super`]): what the lab writes into a server's data folder (the
//! standby's settings) goes through descriptors, never by path.
//!
//! Only a run of F14 (or F18) uses these servers, so they live exactly as
//! long as the run does: both are tied to it (see [`super::tied`]), and
//! the pair's `Drop` stops both.
//!
//! Nothing here speaks SQL: the replication role, the lease database, the
//! cut of the standby's link and every check are `db::replication`'s.

use super::tied::{start_tied, stop_tied, stop_tied_together};
use super::{copy_over, credentials, diagnose, Cluster};
use crate::error::Result;
use crate::hosts::Host;
use crate::poll;
use crate::error::ResultExt;
use crate::safe_dir::SafeDir;
use nix::fcntl::OFlag;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// The replication role's password file's name in the standby's place.
const PASSFILE: &str = "replication.pgpass";

/// How long a promotion may take, as `pg_ctl promote -t 60` allows.
const PROMOTE_BOUND: Duration = Duration::from_secs(60);

/// The primary's WAL segment size, in MB (initdb's default is 16). Each
/// standby is a base backup that carries the WAL written during the copy,
/// at least one whole segment: with 16 MB segments that one segment was
/// about a quarter of every copy F14 and F18 make (five a run); with 1 MB,
/// a few percent. Nothing the cases read depends on the size.
pub const WAL_SEGMENT_MB: u32 = 1;

/// F14's lease store: a primary and its streaming standby.
pub struct FailoverPair {
    /// `b3-26-primary`, on `LAB_PORT` + 1.
    primary: Cluster,
    /// `b3-26-standby`, on `LAB_PORT` + 2; also its `application_name` on
    /// the primary (`pg_stat_replication`, `synchronous_standby_names`).
    standby: Cluster,
}

impl FailoverPair {
    /// The pair's places beside `cluster` (nothing is started yet).
    pub fn beside(cluster: &Cluster) -> Result<FailoverPair> {
        Ok(FailoverPair { primary: cluster.sibling("primary", 1)?.with_wal_segment_mb(WAL_SEGMENT_MB), standby: cluster.sibling("standby", 2)? })
    }

    /// The same pair with the primary on `primary` and the standby on
    /// `standby`, two hosts of the lab's network (F18).
    pub fn on_hosts(cluster: &Cluster, primary: &Host, standby: &Host) -> Result<FailoverPair> {
        Ok(FailoverPair {
            primary: cluster.sibling("primary", 1)?.with_wal_segment_mb(WAL_SEGMENT_MB).on_host(primary),
            standby: cluster.sibling("standby", 2)?.on_host(standby),
        })
    }

    /// Where the standby reaches the primary: its host's address when the
    /// two are on hosts of the lab's network (F18), the folder of its Unix
    /// socket otherwise (F14).
    fn primary_addr(&self) -> String {
        // On this machine, the primary's Unix socket (it listens on nothing
        // else; the standby runs as the same server account, so it may
        // enter the socket's folder); on a host, its address there.
        self.primary.host().map_or_else(|| self.primary.socket_dir().display().to_string(), |h| h.addr().to_string())
    }

    /// The primary.
    pub fn primary(&self) -> &Cluster {
        &self.primary
    }

    /// The standby.
    pub fn standby(&self) -> &Cluster {
        &self.standby
    }

    /// Starts the primary if it is not running, initialising it the first
    /// time; returns the replication role's password (made the first time).
    pub fn start_primary(&self) -> Result<String> {
        start_tied(&self.primary)?;
        credentials::ensure(&self.primary.place()?, credentials::REPLICATOR)
    }

    // ANCHOR: build_standby
    /// Makes a fresh standby of the running primary and starts it:
    /// `pg_basebackup` copies the primary (as the server account,
    /// connecting as the replication role) with the WAL the copy needs,
    /// as a tar stream that the lab writes over the old standby's files
    /// (see [`super::copy_over`]), and the copy starts in standby mode,
    /// streaming from the primary. `-X fetch` collects that WAL at the
    /// end of the copy from the primary's `pg_wal`: the caller keeps it
    /// there meanwhile (`db::replication::build_with` holds a temporary
    /// replication slot). Returns how long the base backup took.
    pub fn build_standby(&self) -> Result<Duration> {
        let standby = &self.standby;
        stop_tied(standby, "immediate")?;
        let place = standby.make_folder()?;
        // Clients prove the same passwords on both: the roles are replicated.
        credentials::write_file(&place, &credentials::read_file(&self.primary.place()?)?)?;
        self.write_passfile(&place)?;
        let (server, owner) = (standby.server_folder()?, standby.server_owner());
        let data = server.sub_dir("data", owner, 0o700)?;
        // The log of this standby alone, as a fresh folder's would be
        // (emptied only once checked, see SafeDir::open_file).
        match server.open_file(super::LOG_NAME, OFlag::O_WRONLY | OFlag::O_TRUNC, owner) {
            Err(e) if !crate::safe_dir::is_not_found(e.as_ref()) => return Err(e),
            _ => {}
        }
        // An earlier lab set old standbys aside in this folder beside the
        // standby's place; nothing does now.
        SafeDir::open(standby.dir().parent().ok_or("the standby's place has no parent")?)?.remove_tree("standby.clearing")?;
        let started = Instant::now();
        // On hosts, from the standby's machine, across the switch.
        let mut backup = standby.host_command("pg_basebackup")?;
        backup
            // -D - -Ft: the copy as one tar stream on stdout, for the lab
            // to write in place; -X fetch: with the WAL written during the
            // copy, so the copy is consistent on its own; -c fast: the
            // backup's checkpoint at once, not spread; --no-manifest: no
            // checksums of every file, which nobody reads; -w: never a
            // prompt.
            .args(["-D", "-", "-Ft", "-X", "fetch", "-c", "fast", "--no-manifest", "-w"])
            .args(["-h", &self.primary_addr(), "-p", &self.primary.port().to_string(), "-U", credentials::REPLICATOR])
            .env("PGPASSFILE", self.passfile())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = backup.spawn().context("starting pg_basebackup")?;
        let mut stderr = child.stderr.take().expect("piped");
        let said = std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = stderr.read_to_end(&mut text);
            text
        });
        let stdout = child.stdout.take().expect("piped");
        // A pipe of 1 MiB rather than 64 KiB, and reads of 256 KiB: the
        // copy's sender does not wait on each file the lab compares.
        let _ = nix::fcntl::fcntl(&stdout, nix::fcntl::FcntlArg::F_SETPIPE_SZ(1 << 20));
        let written = copy_over::write_over(&data, owner, std::io::BufReader::with_capacity(256 << 10, stdout));
        if written.is_err() {
            // It may still be writing: nobody reads the rest.
            let _ = child.kill();
        }
        let status = child.wait()?;
        let out = Output { status, stdout: Vec::new(), stderr: said.join().map_err(|_| "the reader of pg_basebackup's stderr panicked")? };
        if let Err(e) = written {
            // The lab's own refusal first: it ended pg_basebackup.
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(e).with_context(|| format!("writing the base backup over the old standby (pg_basebackup said: {})", stderr.trim()));
        }
        if !status.success() {
            return Err(diagnose::command_error("pg_basebackup", &out, Some(&self.primary)).into());
        }
        let took = started.elapsed();
        // The copy is the server account's: written through descriptors.
        let mut conf = server.open_file("data/postgresql.conf", OFlag::O_WRONLY | OFlag::O_APPEND, owner)?;
        writeln!(
            conf,
            "\n# {}: F14's streaming standby of {}\n\
             unix_socket_directories = '{}'\n\
             primary_conninfo = '{}'\n",
            standby.name(),
            self.primary.name(),
            conf_quote(&standby.socket_dir().display().to_string()),
            conf_quote(&self.primary_conninfo()),
        )?;
        // The copy brought the primary's ALTER SYSTEM settings (its
        // synchronous_standby_names, say): they are the primary's, not the
        // standby's, which starts from its own file alone.
        server
            .open_file("data/postgresql.auto.conf", OFlag::O_WRONLY | OFlag::O_TRUNC, owner)?
            .write_all(b"# Do not edit this file manually!\n# It will be overwritten by the ALTER SYSTEM command.\n")?;
        // Its presence makes the server start as a standby; promotion removes it.
        server.open_file("data/standby.signal", OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC, owner)?;
        // A copy starts like a server that crashed, so before recovery it
        // makes every file of its folder durable: with one syncfs() as
        // every start of the lab's asks (`SYNC_AT_RECOVERY` in
        // lifecycle.rs). Measured in full runs, with the copy written in
        // place: about 0.05 s a start (0.2 s at a run's first build, which
        // also writes out what the run left dirty), against 0.13–0.15 s
        // every time for an fsync of each of a standby's ~1,600 files.
        start_tied(standby)?;
        Ok(took)
    }
    // ANCHOR_END: build_standby

    /// How the standby reaches its primary: the replication role, its
    /// password from a file only the server account reads, and the name the
    /// primary knows it by.
    pub fn primary_conninfo(&self) -> String {
        format!(
            "host={} port={} user={} passfile={} application_name={}",
            conninfo_quote(&self.primary_addr()),
            self.primary.port(),
            credentials::REPLICATOR,
            conninfo_quote(&self.passfile().display().to_string()),
            self.standby.name()
        )
    }

    /// A link to the primary that leads nowhere: a socket folder that does
    /// not exist, so every attempt fails at once and none can ever succeed.
    pub fn unreachable_conninfo(&self) -> String {
        format!(
            "host={} port={} user={} application_name={}",
            conninfo_quote(&self.standby.dir().join("no-primary").display().to_string()),
            self.primary.port(),
            credentials::REPLICATOR,
            self.standby.name()
        )
    }

    // ANCHOR: failover
    /// The primary's crash: `pg_ctl stop -m immediate` sends the postmaster
    /// SIGQUIT, and every server process exits at once, without a
    /// checkpoint and without sending the standby anything more.
    pub fn crash_primary(&self) -> Result<()> {
        // By design: the crash is the experiment's fault (see poll::designed).
        crate::poll::designed(|| stop_tied(&self.primary, "immediate"))
    }

    /// Promotes the standby: `pg_ctl promote` asks it to end recovery with
    /// the WAL it has, start a new timeline and take writes. Returns how
    /// long until its control file said `in production`, asked every few
    /// milliseconds (`pg_ctl promote -w` asks the same, but only every
    /// 100 ms, which would be most of what it measured).
    pub fn promote_standby(&self) -> Result<Duration> {
        // By design: the promotion is the experiment's step (see poll::designed).
        crate::poll::designed(|| self.promote())
    }

    fn promote(&self) -> Result<Duration> {
        let started = Instant::now();
        let out = self.standby.server_command("pg_ctl").args(["promote", "-W", "-s", "-D"]).arg(self.standby.data_dir()).output()?;
        if !out.status.success() {
            return Err(diagnose::command_error("pg_ctl promote", &out, Some(&self.standby)).into());
        }
        let mut state = String::new();
        let promoted = poll::poll_until(PROMOTE_BOUND, poll::EVERY, || -> Result<bool> {
            state = self.standby.control_state()?;
            Ok(state == "in production")
        })?;
        if !promoted {
            return Err(format!("{} is still {state} {PROMOTE_BOUND:?} after pg_ctl promote; its log {}:{}", self.standby.name(), self.standby.log_path().display(), self.standby.log_tail(8)).into());
        }
        Ok(started.elapsed())
    }
    // ANCHOR_END: failover

    /// The replication role's password file on the standby's side.
    fn passfile(&self) -> PathBuf {
        self.standby.dir().join(PASSFILE)
    }

    /// Writes the replication role's password where the server account
    /// (pg_basebackup, then the standby's WAL receiver) reads it, mode 0600
    /// as libpq demands: a new file in the standby's place (the lab's
    /// folder), given to that account through its descriptor.
    fn write_passfile(&self, place: &SafeDir) -> Result<()> {
        let password = credentials::password(self.primary.dir(), credentials::REPLICATOR)?;
        let name = PASSFILE;
        place.remove_file(name)?;
        let mut out = place.create_file(name, 0o600)?;
        writeln!(out, "*:*:*:{}:{password}", credentials::REPLICATOR)?;
        let owner = self.standby.server_owner();
        std::os::unix::fs::fchown(&out, Some(owner.uid.as_raw()), Some(owner.gid.as_raw()))?;
        Ok(())
    }
}

impl Drop for FailoverPair {
    fn drop(&mut self) {
        // The standby is rebuilt by every run; the primary is kept, so it is
        // stopped cleanly, and the next run starts it without a recovery.
        // The two at once.
        stop_tied_together(&[(&self.standby, "immediate"), (&self.primary, "fast")]);
    }
}

/// A value for a libpq connection string: quoted, with `\` and `'` escaped.
fn conninfo_quote(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// Text inside a single-quoted postgresql.conf value: `'` doubled.
fn conf_quote(value: &str) -> String {
    value.replace('\'', "''")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Connection-string values survive spaces and quotes; config values double quotes.
    #[test]
    fn quoting_keeps_odd_paths_whole() {
        assert_eq!(conninfo_quote("/srv/a b/it's"), r"'/srv/a b/it\'s'");
        assert_eq!(conf_quote("host='/x'"), "host=''/x''");
    }
}
