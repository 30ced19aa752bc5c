//! F14's replicated lease store, in SQL: its setup, the fault (the
//! standby's link to the primary cut, and mended), and the reads with which
//! the case watches both servers.
//!
//! Who does what (least privilege):
//! - `lab_admin`, the superuser, only for setup and for the fault: the
//!   roles, `lease26`, the replication settings and the standby's
//!   `primary_conninfo` (ALTER SYSTEM needs it), and the first look at the
//!   walsender's `state`/`sync_state`, which PostgreSQL shows only to
//!   superusers and `pg_read_all_stats`.
//! - `lab_replica` (LOGIN REPLICATION, nothing else): the base backup and
//!   the standby's WAL receiver.
//! - the server account: `pg_basebackup`, `pg_ctl promote` and the
//!   immediate stop, like every server command (`cluster::replica`).
//! - `lab`: the leases, and every check the transcript prints. Every role
//!   may read the WAL positions (`pg_current_wal_*_lsn()`,
//!   `pg_last_wal_receive_lsn()`), `pg_is_in_recovery()`, whether a
//!   walsender or a WAL receiver exists (their pid and name are public,
//!   their state is not), the wait event of its own role's sessions, and
//!   may cancel them (`pg_cancel_backend`).
//!
//! No lasting replication slot: the standby is started right after its
//! base backup, which carries the WAL written during the copy, and it is
//! thrown away at the end of its timeline; a slot would only outlive it on
//! the primary and hold WAL for a standby that never comes back. Only the
//! copy itself holds a temporary one (see [`build_with`]).

use super::setup::{admin_on, ensure_login_role, make_databases, Existing, LAB_ROLE};
use super::{literal, open, LEASE_DB, LEASE_SCHEMA};
use crate::cluster::replica::FailoverPair;
use crate::cluster::{credentials, Endpoint};
use crate::error::{Result, ResultExt};
use crate::poll;
use postgres::types::PgLsn;
use postgres::Client;
use std::time::Duration;

/// How the primary commits with respect to its standby.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A commit returns once it is in the primary's own WAL; the standby
    /// follows when it can (PostgreSQL's default).
    Async,
    /// A commit returns once the standby has it ([`SYNCHRONOUS_COMMIT`]).
    Sync,
}

// ANCHOR: sync_settings
/// The lease store's commit rule in the synchronous timeline: a commit
/// returns only after the standby has written, flushed *and replayed* it, so
/// the token an acquire returns is already readable on the standby, and a
/// promotion cannot lose it. (`on` would wait for the standby's flush
/// only: as safe for a failover, but the case could not read the token on
/// the standby at the moment the acquire returns.)
pub const SYNCHRONOUS_COMMIT: &str = "remote_apply";

/// `synchronous_standby_names` in the synchronous timeline: the one standby,
/// by the `application_name` it streams with. The name holds `-`, so it is
/// double-quoted.
pub fn synchronous_standby_names(pair: &FailoverPair) -> String {
    format!("FIRST 1 (\"{}\")", pair.standby().name())
}
// ANCHOR_END: sync_settings

/// The walsenders serving `application_name`, each as `state/sync_state`
/// (`streaming/async`, `streaming/sync`). Superuser or pg_read_all_stats
/// only: other roles see these columns as NULL.
const WALSENDER_STATE: &str =
    "SELECT state || '/' || sync_state FROM pg_stat_replication WHERE application_name = $1 ORDER BY backend_start";

/// The settings a session of the primary now runs with. A backend re-reads
/// the configuration at its next statement after the postmaster passes on
/// a reload, so the setup's own session seeing the new values means the
/// postmaster, and every server process with it, has been told.
const COMMIT_SETTINGS: &str =
    "SELECT current_setting('synchronous_standby_names'), current_setting('synchronous_commit')";

/// Makes a fresh replicated lease store: the primary started (made the
/// first time), its roles and an empty `lease26` created, a standby made
/// from a base backup and streaming, and, for [`Mode::Sync`], the primary
/// switched to synchronous commits. Returns how long the base backup took.
pub fn build(pair: &FailoverPair, mode: Mode) -> Result<Duration> {
    build_with(pair, mode, &[(LEASE_DB, LEASE_SCHEMA)])
}

/// The temporary replication slot that keeps a base backup's WAL on the
/// primary while the copy is made (see [`build_with`]).
const BACKUP_SLOT: &str = "lab_base_backup";

/// [`build`] with fresh copies of `databases` (name, schema) on the
/// primary, copied to the standby by its base backup: F18 keeps the
/// resource's `res26` on the lease store's own servers too, so that it
/// fails over with them.
pub fn build_with(pair: &FailoverPair, mode: Mode, databases: &[(&str, &str)]) -> Result<Duration> {
    pair.start_primary()?;
    let primary = pair.primary().endpoint();
    let mut admin = admin_on(&primary)?;
    // First of all, back to asynchronous: a primary that a synchronous
    // timeline left behind would make every commit below wait for a
    // standby that does not exist yet. ALTER SYSTEM commits nothing.
    admin.batch_execute("ALTER SYSTEM RESET synchronous_standby_names")?;
    admin.batch_execute("ALTER SYSTEM RESET synchronous_commit")?;
    reload_and_wait(&mut admin, &primary, "", "on")?;
    ensure_login_role(&mut admin, &primary, credentials::ROLE, LAB_ROLE)?;
    ensure_login_role(&mut admin, &primary, credentials::REPLICATOR, "REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE")?;
    make_databases(&mut admin, &primary, databases, Existing::Reload)?;

    end_stale_walsenders(&mut admin, pair)?;
    // The base backup collects the WAL it needs from the primary's pg_wal
    // at its end (`-X fetch`, see FailoverPair::build_standby). A
    // temporary slot, reserving WAL from the last checkpoint's redo point
    // (before the copy's own checkpoint) and held by this session,
    // keeps every segment from here on until the copy has it, whatever
    // checkpoints come meanwhile; it goes with the session, or here.
    admin.batch_execute(&format!("SELECT pg_create_physical_replication_slot({}, true, true)", literal(BACKUP_SLOT)))?;
    // By design: the standby a failover needs, copied, started, streaming
    // and, when asked, synchronous, is the experiment's own step.
    poll::designed(|| {
        let base_backup = pair.build_standby()?;
        // The copy has its WAL.
        admin.batch_execute(&format!("SELECT pg_drop_replication_slot({})", literal(BACKUP_SLOT)))?;
        wait_for_walsender(&mut admin, pair, "streaming/async")?;
        if mode == Mode::Sync {
            make_synchronous(&mut admin, pair, &primary)?;
        }
        Ok(base_backup)
    })
}

/// Switches the primary to commits that wait for the standby, and waits
/// until its walsender serves the standby as synchronous.
fn make_synchronous(admin: &mut Client, pair: &FailoverPair, primary: &Endpoint) -> Result<()> {
    // ANCHOR: make_synchronous
    let names = synchronous_standby_names(pair);
    admin.batch_execute(&format!("ALTER SYSTEM SET synchronous_standby_names = {}", literal(&names)))?;
    admin.batch_execute(&format!("ALTER SYSTEM SET synchronous_commit = {}", literal(SYNCHRONOUS_COMMIT)))?;
    // ANCHOR_END: make_synchronous
    reload_and_wait(admin, primary, &names, SYNCHRONOUS_COMMIT)?;
    wait_for_walsender(admin, pair, "streaming/sync")
}

/// Ends every walsender on the primary that still serves a standby of the
/// pair's name, and waits until `pg_stat_replication` lists none.
///
/// Before a timeline's standby is made, any such walsender is stale: it
/// served the last timeline's standby, which F18 promoted behind a cut, so
/// the end of its stream never reached the primary. The primary would keep
/// it until a send failed or `wal_sender_timeout` passed, and meanwhile
/// list two walsenders by the new standby's name, and might pick the dead
/// one as its synchronous standby.
fn end_stale_walsenders(admin: &mut Client, pair: &FailoverPair) -> Result<()> {
    let name = pair.standby().name();
    // pg_terminate_backend: SIGTERM to each walsender by that name.
    admin.query_one("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_replication WHERE application_name = $1", &[&name])?;
    let gone = poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
        Ok(admin.query_one("SELECT count(*) = 0 FROM pg_stat_replication WHERE application_name = $1", &[&name])?.get(0))
    })?;
    if !gone {
        return Err(format!("{}'s walsenders for {name} did not end within {:?}", pair.primary().name(), poll::BOUND).into());
    }
    Ok(())
}

/// The walsender that serves the standby, as `state/sync_state`, read as
/// the superuser; `none` when there is none (see [`read_walsender_state`]
/// for more than one).
pub fn walsender_state(pair: &FailoverPair) -> Result<String> {
    let mut admin = admin_on(&pair.primary().endpoint())?;
    read_walsender_state(&mut admin, pair)
}

/// One `state/sync_state` for each walsender by the standby's name, oldest
/// first: should a walsender on its way out ever stand beside the new one
/// (a stale one [`end_stale_walsenders`] did not catch, a receiver that
/// reconnected), a wait goes on rather than fail or read only one.
fn read_walsender_state(admin: &mut Client, pair: &FailoverPair) -> Result<String> {
    let rows = admin.query(WALSENDER_STATE, &[&pair.standby().name()]).context("reading pg_stat_replication")?;
    if rows.is_empty() {
        return Ok("none".into());
    }
    let states: Vec<String> = rows.iter().map(|r| r.get::<_, Option<String>>(0).unwrap_or_else(|| "none".into())).collect();
    Ok(states.join(", "))
}

fn wait_for_walsender(admin: &mut Client, pair: &FailoverPair, wanted: &str) -> Result<()> {
    let mut seen = String::new();
    let reached = poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
        seen = read_walsender_state(admin, pair)?;
        Ok(seen == wanted)
    })?;
    if !reached {
        return Err(format!("{}'s walsender for {} is {seen}, not {wanted}, after {:?}", pair.primary().name(), pair.standby().name(), poll::BOUND).into());
    }
    Ok(())
}

/// `pg_reload_conf()`, then waits until this session runs with the new
/// `synchronous_standby_names` and `synchronous_commit`.
fn reload_and_wait(admin: &mut Client, server: &Endpoint, names: &str, commit: &str) -> Result<()> {
    admin.batch_execute("SELECT pg_reload_conf()")?;
    let mut seen = (String::new(), String::new());
    let reloaded = poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
        let row = admin.query_one(COMMIT_SETTINGS, &[])?;
        seen = (row.get(0), row.get(1));
        Ok(seen.0 == names && seen.1 == commit)
    })?;
    if !reloaded {
        return Err(format!("{} still runs with {seen:?} after a reload to ({names:?}, {commit:?})", server.name).into());
    }
    Ok(())
}

// ANCHOR: cut
/// The fault: the standby's `primary_conninfo` now leads nowhere
/// ([`FailoverPair::unreachable_conninfo`]) and the standby reloads its
/// configuration. Its startup process ends the WAL receiver at once and
/// every new attempt fails, as if the link to the primary were cut. Returns
/// once both servers show the link gone: no walsender for the standby on
/// the primary, no WAL receiver on the standby.
pub fn cut_standby(pair: &FailoverPair) -> Result<()> {
    let mut admin = admin_on(&pair.standby().endpoint())?;
    admin.batch_execute(&format!("ALTER SYSTEM SET primary_conninfo = {}", literal(&pair.unreachable_conninfo())))?;
    admin.batch_execute("SELECT pg_reload_conf()")?;
    let mut primary = ReplicationView::connect(&pair.primary().endpoint())?;
    let mut standby = ReplicationView::connect(&pair.standby().endpoint())?;
    // By design: the experiment waits for the cut to show on both servers.
    let gone = poll::designed(|| {
        poll::poll_until(poll::BOUND, poll::EVERY, || -> Result<bool> {
            Ok(primary.walsenders(pair.standby().name())? == 0 && standby.wal_receivers()? == 0)
        })
    })?;
    if !gone {
        return Err(format!("{} still streams from {} {:?} after its primary_conninfo was cut", pair.standby().name(), pair.primary().name(), poll::BOUND).into());
    }
    Ok(())
}
// ANCHOR_END: cut

/// Mends the link: the standby's own `primary_conninfo` (the one written at
/// its base backup) is back, and it reloads; the WAL receiver reconnects
/// and fetches what it missed. Returns once the walsender is `wanted`
/// again (`streaming/sync` on a synchronous primary).
pub fn mend_standby(pair: &FailoverPair, wanted: &str) -> Result<()> {
    let mut admin = admin_on(&pair.standby().endpoint())?;
    admin.batch_execute("ALTER SYSTEM RESET primary_conninfo")?;
    admin.batch_execute("SELECT pg_reload_conf()")?;
    let mut primary = admin_on(&pair.primary().endpoint())?;
    // By design: the experiment waits for the standby to catch up.
    poll::designed(|| wait_for_walsender(&mut primary, pair, wanted))
}

/// How many walsenders serve `application_name` on this primary. Every
/// role sees the rows, and their pid and name; not their state.
const WALSENDERS: &str = "SELECT count(*) FROM pg_stat_replication WHERE application_name = $1";

/// Whether this standby runs a WAL receiver: the view has a row only while
/// one runs, and every role sees its pid.
const WAL_RECEIVERS: &str = "SELECT count(*) FROM pg_stat_wal_receiver";

/// Where the primary inserts its next WAL record: every record written
/// after this reading lies beyond it.
const INSERT_LSN: &str = "SELECT pg_current_wal_insert_lsn()";

/// How far the primary's WAL is flushed to its disk: a commit that has
/// returned lies at or before it.
const FLUSH_LSN: &str = "SELECT pg_current_wal_flush_lsn()";

/// How far this standby has received and flushed the primary's WAL; it
/// stays where it was while no WAL receiver runs.
const RECEIVED_LSN: &str = "SELECT pg_last_wal_receive_lsn()";

/// Whether the server is a standby (`true`) or takes writes.
const IN_RECOVERY: &str = "SELECT pg_is_in_recovery()";

/// What a session waits for, as `type/event` (`IPC/SyncRep`: a commit
/// waiting for its synchronous standby); open to the session's own role.
const WAIT_EVENT: &str =
    "SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE pid = $1";

/// What the session named `application_name` waits for, as `type/event`,
/// while it runs a statement (`state = 'active'`); a holder's sessions are
/// named after it (`holder-a`, `holder-a renewer`).
const WAIT_EVENT_OF: &str =
    "SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'";

/// Asks a session to cancel what it is doing (SIGINT to its backend);
/// allowed on sessions of one's own role.
const CANCEL: &str = "SELECT pg_cancel_backend($1)";

/// Ends a session (SIGTERM to its backend); the case's net when a cancel
/// would not end a wait.
const TERMINATE: &str = "SELECT pg_terminate_backend($1)";

/// The reads with which F14 watches one server of the pair, as `lab`, on
/// an autocommit session of its own.
pub struct ReplicationView {
    /// Connected to `lease26` of the watched server.
    client: Client,
}

impl ReplicationView {
    /// Connects an observer session to `server`.
    pub fn connect(server: &Endpoint) -> Result<ReplicationView> {
        Ok(ReplicationView { client: open(server, credentials::ROLE, LEASE_DB, "lab observer", None)? })
    }

    /// How many walsenders serve the standby named `standby`.
    pub fn walsenders(&mut self, standby: &str) -> Result<i64> {
        Ok(self.client.query_one(WALSENDERS, &[&standby]).context("reading pg_stat_replication")?.get(0))
    }

    /// How many WAL receivers run (0 or 1).
    pub fn wal_receivers(&mut self) -> Result<i64> {
        Ok(self.client.query_one(WAL_RECEIVERS, &[]).context("reading pg_stat_wal_receiver")?.get(0))
    }

    /// The primary's insert position.
    pub fn insert_lsn(&mut self) -> Result<PgLsn> {
        Ok(self.client.query_one(INSERT_LSN, &[])?.get(0))
    }

    /// The primary's flush position.
    pub fn flush_lsn(&mut self) -> Result<PgLsn> {
        Ok(self.client.query_one(FLUSH_LSN, &[])?.get(0))
    }

    /// The standby's received position; `None` if it never streamed.
    pub fn received_lsn(&mut self) -> Result<Option<PgLsn>> {
        Ok(self.client.query_one(RECEIVED_LSN, &[])?.get(0))
    }

    /// Whether the server is still a standby.
    pub fn in_recovery(&mut self) -> Result<bool> {
        Ok(self.client.query_one(IN_RECOVERY, &[])?.get(0))
    }

    /// The wait of session `pid`, e.g. `IPC/SyncRep`; `None` when it waits
    /// for nothing (or is gone).
    pub fn wait_event(&mut self, pid: i32) -> Result<Option<String>> {
        let row = self.client.query_opt(WAIT_EVENT, &[&pid]).context("reading pg_stat_activity")?;
        Ok(row.and_then(|r| r.get(0)))
    }

    /// The wait of the session named `application_name` while it runs a
    /// statement; `None` when it waits for nothing (or runs none).
    pub fn wait_event_of(&mut self, application_name: &str) -> Result<Option<String>> {
        let row = self.client.query_opt(WAIT_EVENT_OF, &[&application_name]).context("reading pg_stat_activity")?;
        Ok(row.and_then(|r| r.get(0)))
    }

    /// Cancels what session `pid` is doing; `true` when the signal was sent.
    pub fn cancel(&mut self, pid: i32) -> Result<bool> {
        Ok(self.client.query_one(CANCEL, &[&pid])?.get(0))
    }

    /// Ends session `pid`; `true` when the signal was sent.
    pub fn terminate(&mut self, pid: i32) -> Result<bool> {
        Ok(self.client.query_one(TERMINATE, &[&pid])?.get(0))
    }
}
