//! The cluster's setup, where the superuser connects: the experiments'
//! role, the two databases it owns, and the bench's checkpoints. (F14's
//! primary gets the same role and `lease26`, plus its replication role:
//! [`super::replication`].)
//!
//! `lab` is an ordinary role: it owns `lease26` and `res26` (so it may
//! drop and recreate their schema) and has no other privilege. Nothing the
//! experiments do needs more: `pg_backend_pid()`, and `pg_stat_activity`
//! rows of sessions of their own role (wait events included), are open to
//! every role. Above all it cannot run `COPY … TO PROGRAM`, which runs a
//! program as the server's operating-system account.

use super::emptying::{self, Loaded};
use super::{connect_as, open, session, LEASE_DB, LEASE_SCHEMA, RES_DB, RES_SCHEMA};
use crate::cluster::{credentials, Endpoint};
use crate::error::{Result, ResultExt};
use postgres::Client;

/// The superuser's setup session on `b3-26`.
fn admin() -> Result<super::Session> {
    connect_as(credentials::ADMIN, "postgres", "lab setup")
}

/// The superuser's setup session on `server`.
pub(super) fn admin_on(server: &Endpoint) -> Result<super::Session> {
    session(server, credentials::ADMIN, "postgres", "lab setup", None)
}

/// What the role `lab` may do on the cluster: log in, and nothing more.
pub(super) const LAB_ROLE: &str = "NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION";

/// Creates `role` with the password `server`'s credentials file holds for
/// it, and exactly the attributes `attributes`, if it does not exist yet.
pub(super) fn ensure_login_role(admin: &mut Client, server: &Endpoint, role: &str, attributes: &str) -> Result<()> {
    // pg_roles: one row per role of the cluster.
    let exists = admin.query_opt("SELECT 1 FROM pg_roles WHERE rolname = $1", &[&role])?.is_some();
    if !exists {
        let password = server.password(role)?;
        // CREATE ROLE takes no bind parameters; the password is 32 hex
        // digits (credentials.rs), so it needs no quoting beyond the quotes.
        assert!(password.chars().all(|c| c.is_ascii_hexdigit()), "a generated password is hex");
        admin
            .batch_execute(&format!("CREATE ROLE {role} LOGIN {attributes} PASSWORD '{password}'"))
            .with_context(|| format!("creating the role {role} on {}", server.name))?;
    }
    Ok(())
}

/// What [`make_databases`] does with a database that exists already.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Existing {
    /// Drop it and make it again: the run starts from nothing.
    Replace,
    /// Leave it, and what a reader put in it, alone.
    Keep,
    /// Keep the database and reset its schema `public` (emptied or loaded
    /// again, see [`reload`]), as every case's reset does on `b3-26`: for
    /// the lab's own servers beside it, whose databases hold nothing else,
    /// and where dropping and making a database again costs a hundred
    /// milliseconds and hundreds of files each time.
    Reload,
}

/// Makes each of `databases` (name, schema) on `server`, owned by `lab`,
/// with its schema from `sql/` loaded; one that exists already is replaced
/// or kept, as `existing` says.
pub(super) fn make_databases(admin: &mut Client, server: &Endpoint, databases: &[(&str, &str)], existing: Existing) -> Result<()> {
    for (name, schema) in databases {
        // pg_database: one row per database of the cluster, with its owner.
        let owner: Option<String> = admin.query_opt("SELECT pg_get_userbyid(datdba)::text FROM pg_database WHERE datname = $1", &[name])?.map(|r| r.get(0));
        match (owner.as_deref(), existing) {
            (Some(_), Existing::Keep) => continue,
            (Some(owner), Existing::Reload) if owner == credentials::ROLE => {
                reload(server, name, schema, true)?;
                continue;
            }
            _ => {}
        }
        // Separate statements: DROP/CREATE DATABASE refuse to run inside
        // the implicit transaction of a multi-statement batch. FORCE ends
        // sessions a reader may have left open in psql.
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .with_context(|| format!("dropping database {name} on {}", server.name))?;
        admin
            .batch_execute(&format!("CREATE DATABASE {name} OWNER {}", credentials::ROLE))
            .with_context(|| format!("creating database {name} on {}", server.name))?;
        // A load (the new database has no record a reset could match),
        // recorded, so that the next reset (in a run of cases, the first
        // case's) empties.
        let mut client = open(server, credentials::ROLE, name, "lab setup", None)?;
        with_load_record(server, name, |record| {
            *record = None;
            let reset = emptying::reset(&mut client, schema, record)?;
            // A server of the lab's own keeps the record from its first run on.
            store_after_load(&mut client, record, reset, existing == Existing::Reload)
        })?;
    }
    Ok(())
}

/// What the last load of each database left, by server (its folder and
/// port) and database, for as long as the process runs: one record for
/// every reset that goes through [`emptying::reset`] or
/// [`make_databases`] (a case's reset through the lab's own sessions, a
/// chaos or queue-chaos run's between its parts, the partition cases'
/// servers, F14's and F18's primary, a run's `CREATE DATABASE`), so that
/// none of them loads a schema another one loaded and nothing changed
/// since (a reset with `stored`, see [`reload`], also keeps it in the
/// database, for the next process). The benches and `lease-stores` load with [`super::reset_schema`] on
/// their own, on purpose (fresh tables for every measurement); a load
/// there changes the catalogs, so no record can then match.
type Loads = Vec<((std::path::PathBuf, u16, String), Loaded)>;
static LOADS: parking_lot::Mutex<Loads> = parking_lot::Mutex::new(Vec::new());

/// Runs `work` with the record of the last load of database `name` on
/// `server` (`None` if this process has none), taken out meanwhile and
/// put back after, whatever `work` left in it.
pub fn with_load_record<T>(server: &Endpoint, name: &str, work: impl FnOnce(&mut Option<Loaded>) -> Result<T>) -> Result<T> {
    let key = (server.dir.clone(), server.port, name.to_owned());
    let mut record = {
        let mut loads = LOADS.lock();
        loads.iter().position(|(k, _)| *k == key).map(|at| loads.remove(at).1)
    };
    let done = work(&mut record);
    let mut loads = LOADS.lock();
    // One record per key, even if two resets of a database ever overlapped.
    loads.retain(|(k, _)| *k != key);
    if let Some(loaded) = record {
        loads.push((key, loaded));
    }
    done
}

/// Resets the schema of database `name` on `server` to `schema`: by
/// emptying its tables when the record of its last load (see
/// [`with_load_record`]) is of that schema and the catalogs say nothing
/// changed it since, by loading it otherwise (see [`super::emptying`]).
/// F18 resets its primary's `lease26` and its resource's `res26` before
/// each of its three timelines: each load drops and makes some twenty
/// files, each emptying none.
///
/// Where `stored`, the record is also kept in the database itself (see
/// [`Loaded::stored`]), so that the next process's first reset of it
/// empties too: for the lab's own servers, whose databases outlive a run.
fn reload(server: &Endpoint, name: &str, schema: &str, stored: bool) -> Result<()> {
    with_load_record(server, name, |record| {
        let mut client = session(server, credentials::ROLE, name, "lab setup", None)?;
        if stored && record.is_none() {
            *record = Loaded::stored(&mut client)?;
        }
        let reset = emptying::reset(&mut client, schema, record)?;
        store_after_load(&mut client, record, reset, stored)
    })
}

/// Stores `record` in the database when `stored` and `reset` loaded the
/// schema (after an emptying there is no new load to store).
fn store_after_load(client: &mut Client, record: &Option<Loaded>, reset: emptying::Reset, stored: bool) -> Result<()> {
    match record {
        Some(loaded) if stored && reset == emptying::Reset::Loaded => loaded.store(client),
        _ => Ok(()),
    }
}

/// Resets database `dbname` on `b3-26` to `schema`, as `reload` does:
/// for the runs that reset between their parts (each mode of a chaos run,
/// each switch of the queue's), so that they, and the case after them,
/// empty rather than load.
pub fn reset_database(dbname: &str, schema: &str) -> Result<()> {
    // Not stored: every run of cases makes b3-26's databases again.
    reload(&Endpoint::lab()?, dbname, schema, false)
}

/// The role `lab` on `server`, made if it is missing, and `databases`
/// made as [`make_databases`] says.
fn databases_on(server: &Endpoint, databases: &[(&str, &str)], existing: Existing) -> Result<()> {
    let mut admin = admin_on(server)?;
    ensure_login_role(&mut admin, server, credentials::ROLE, LAB_ROLE)?;
    make_databases(&mut admin, server, databases, existing)
}

/// Drops and creates `lease26` and `res26` on `b3-26`, owned by `lab`, with
/// the schema from `sql/`: every run of cases starts from nothing.
pub fn recreate_databases() -> Result<()> {
    databases_on(&Endpoint::lab()?, &[(LEASE_DB, LEASE_SCHEMA), (RES_DB, RES_SCHEMA)], Existing::Replace)
}

/// Creates `lease26` and `res26` with their schema where they do not exist
/// yet, and leaves existing ones (and what a reader put in them) alone: the
/// book's commands after `./run.sh cluster start` need them.
pub fn ensure_databases() -> Result<()> {
    databases_on(&Endpoint::lab()?, &[(LEASE_DB, LEASE_SCHEMA), (RES_DB, RES_SCHEMA)], Existing::Keep)
}

/// Gives `server` fresh copies of `databases` (name, schema), owned by
/// `lab`: the role made if it is missing, each database dropped and made
/// again, its schema loaded. For a database whose users make schemas of
/// their own beside `public` (the queue crates' migrations make `apalis`
/// and `graphile_worker`, and extensions in `public`): replacing `public`
/// alone would leave their migrations recorded and their objects gone.
pub fn fresh_databases(server: &Endpoint, databases: &[(&str, &str)]) -> Result<()> {
    databases_on(server, databases, Existing::Replace)
}

/// Gives `server` (a partition case's lease store or resource, a server of
/// the lab's own beside `b3-26` that holds the lab's schemas alone, and
/// the record of their last load, see `Loaded::stored`) fresh
/// copies of `databases` (name, schema), owned by `lab`: the role made if
/// it is missing, each database made if it is missing, its schema reset
/// (`reload`). Every run of such a case starts from an empty schema, as
/// every case does on `b3-26`.
pub fn reloaded_databases(server: &Endpoint, databases: &[(&str, &str)]) -> Result<()> {
    databases_on(server, databases, Existing::Reload)
}

/// Writes every dirty buffer to disk now. `CHECKPOINT` is a superuser's
/// command (the role `lab` may not run it); the bench runs one before each
/// cell, so that no cell pays for the dirty pages of the one before, and the
/// full-page images that follow every checkpoint fall on each cell alike.
pub fn checkpoint() -> Result<()> {
    admin()?.batch_execute("CHECKPOINT").context("CHECKPOINT")
}
