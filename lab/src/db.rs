//! How every client — the lab, the cases, each holder process — reaches the
//! lab's cluster, and the schema reset each case starts from.
//!
//! Clients use TCP on 127.0.0.1 rather than the Unix socket, so that a holder
//! started from any working directory reaches the same server. The port can
//! be moved with `LAB_PORT` (the tests use this to run a second, private
//! cluster); children inherit it, so a holder always talks to its parent's
//! cluster.

use crate::error::{Result, ResultExt};
use postgres::{Client, NoTls};
use std::time::Duration;

/// The database that holds the lease table.
pub const LEASE_DB: &str = "lease26";
/// The database that holds the protected resource.
pub const RES_DB: &str = "res26";
/// The cluster's superuser, created by `initdb -U`.
pub const USER: &str = "lab";
/// The only address the cluster listens on.
pub const HOST: &str = "127.0.0.1";
/// The cluster's port unless `LAB_PORT` says otherwise.
pub const DEFAULT_PORT: u16 = 55426;

/// The schema of `lease26`, the one source for code and book.
pub const LEASE_SCHEMA: &str = include_str!("../../sql/lease26.sql");
/// The schema of `res26`.
pub const RES_SCHEMA: &str = include_str!("../../sql/res26.sql");

/// The port clients connect to and the cluster listens on.
pub fn port() -> Result<u16> {
    match std::env::var("LAB_PORT") {
        Ok(text) => text
            .parse()
            .with_context(|| format!("LAB_PORT={text:?} is not a port number")),
        Err(_) => Ok(DEFAULT_PORT),
    }
}

/// Opens an autocommit connection to one of the lab's databases.
///
/// `who` becomes the session's `application_name`, so that a reader looking
/// at `pg_stat_activity` during a case can tell holder-a from holder-b.
pub fn connect(dbname: &str, who: &str) -> Result<Client> {
    let port = port()?;
    let mut config = Client::configure();
    config
        .host(HOST)
        .port(port)
        .user(USER)
        .dbname(dbname)
        .application_name(who)
        .connect_timeout(Duration::from_secs(5));
    config.connect(NoTls).with_context(|| {
        format!(
            "cannot reach the lab's PostgreSQL at {HOST}:{port} (database {dbname}); \
             start it with `./run.sh cluster start`, or run cases with `./run.sh`, which starts and stops it"
        )
    })
}

/// Replaces the `public` schema of `dbname` with the schema from `sql/`.
///
/// Every case starts from empty tables: F1 expects the first token to be 1,
/// F4 expects B's to be 2. Dropping the schema (rather than truncating) also
/// resets `write_attempt`'s id sequence and picks up any change to `sql/`.
pub fn reset_schema(client: &mut Client, schema: &str) -> Result<()> {
    client
        .batch_execute("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public;")
        .context("dropping the public schema")?;
    client.batch_execute(schema).context("loading the schema from sql/")
}
