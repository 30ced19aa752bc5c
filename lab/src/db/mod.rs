//! How every client — the lab, the cases, each holder process — reaches the
//! lab's cluster, and the schema each case starts from.
//!
//! Every client on this machine reaches a server through its Unix socket
//! ([`Endpoint::socket`], an absolute path, so a holder started from any
//! working directory reaches the same server), where the server lets in
//! only the lab's own account and asks for no password (`peer`, see
//! `cluster/access.rs`): [`open`] gives such a connection none. A holder on
//! another host of the lab's network connects over TCP and proves a
//! password (see [`crate::cluster::credentials`]); a holder sent through a
//! delay proxy connects over TCP too, to the proxy, and so reads its
//! password, which nobody asks for: the proxy forwards to the socket. The
//! experiments connect as the ordinary role `lab`; only [`setup`], the
//! replication setup in [`replication`] and the new passwords of every
//! start (`cluster/access.rs`) use the superuser.
//!
//! Every server is an [`Endpoint`]: `b3-26` for all cases, and F14's
//! primary and standby, whose lease store is the same `lease26` schema.
//!
//! The process that runs the cases keeps the sessions it has finished
//! with, tidied, for its next connect ([`pool`]).

pub mod emptying;
pub mod pool;
pub mod replication;
pub mod setup;

use crate::cluster::{self, credentials, Endpoint};
use crate::error::{Result, ResultExt};
pub use pool::Session;
use postgres::{Client, NoTls};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

/// `text` as an SQL string literal, for the statements that take no bind
/// parameters (ALTER SYSTEM) or go as one simple Query message: each
/// quote doubled (the server's `standard_conforming_strings` is on, its
/// default, so a backslash is only a backslash).
pub(crate) fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The database that holds the lease table.
pub const LEASE_DB: &str = "lease26";
/// The database that holds the protected resource.
pub const RES_DB: &str = "res26";

/// The schema of `lease26`, the one source for code and book: the lease
/// table, and beside it the bug zoo's job queue (F20–F28).
///
/// The queue's tables are part of every load, used or not, so that the
/// reset between two cases, and between two timelines of a queue case, can
/// empty them instead of loading the schema again (see [`emptying`]): a
/// case that loaded tables of its own would change the schema, and each
/// next reset would drop and make them again, 15–40 ms each on this disk.
pub const LEASE_SCHEMA: &str = concat!(include_str!("../../../sql/lease26.sql"), "\n", include_str!("../../../sql/queue26.sql"));
/// The schema of `res26`: the report's tables and the fence, and beside
/// them the objects of F29–F33 (`sql/object26.sql`), part of every load
/// for the same reason as the queue's.
pub const RES_SCHEMA: &str = concat!(include_str!("../../../sql/res26.sql"), "\n", include_str!("../../../sql/object26.sql"));

/// What the server said on a session besides results and errors: its
/// notices (`WARNING: …`, with `DETAIL: …` on a line of its own), in order.
pub type Notices = Arc<Mutex<Vec<String>>>;

/// Opens an autocommit connection to one of the lab's databases, as `lab`.
///
/// `who` becomes the session's `application_name`, so that a reader looking
/// at `pg_stat_activity` during a case can tell holder-a from holder-b.
pub fn connect(dbname: &str, who: &str) -> Result<Session> {
    connect_as(credentials::ROLE, dbname, who)
}

/// Opens a connection as `role` (the superuser only for the cluster's setup),
/// or takes an idle one of the same role and database (see [`pool`]).
pub fn connect_as(role: &str, dbname: &str, who: &str) -> Result<Session> {
    session(&Endpoint::lab()?, role, dbname, who, None)
}

/// A session to `server` as `role`, its notices into `notices` as [`open`]
/// says: an idle one of the same server, role and database when this
/// process keeps them and `server` is reached by its Unix socket (see
/// [`pool`]), a new login otherwise.
pub fn session(server: &Endpoint, role: &str, dbname: &str, who: &str, notices: Option<Notices>) -> Result<Session> {
    let Some(socket) = &server.socket else { return Ok(Session::plain(open(server, role, dbname, who, notices)?)) };
    let key = pool::Key { socket: socket.clone(), port: server.port, role: role.to_owned(), dbname: dbname.to_owned() };
    if let Some(kept) = pool::take(&key, who, notices.clone()) {
        return Ok(kept);
    }
    let sink = pool::NoticeSlot::new(notices);
    Ok(Session::keepable(open_into(server, role, dbname, who, sink.clone())?, key, sink))
}

/// Opens a connection to `server` as `role`. The server's notices on it go
/// into `notices` when given; otherwise they are dropped (the driver would
/// hand them to a logger, and the lab installs none).
pub fn open(server: &Endpoint, role: &str, dbname: &str, who: &str, notices: Option<Notices>) -> Result<Client> {
    open_into(server, role, dbname, who, pool::NoticeSlot::new(notices))
}

/// [`open`], its notices into whatever `sink` holds at the time.
fn open_into(server: &Endpoint, role: &str, dbname: &str, who: &str, sink: pool::NoticeSlot) -> Result<Client> {
    let port = server.port;
    let unreachable = || {
        let hint = if server.name == cluster::NAME {
            "; start it with `./run.sh cluster start`, or run cases with `./run.sh`, which starts and stops it"
        } else {
            ""
        };
        let at = server.socket_file().map_or_else(|| format!("{}:{port}", server.addr), |socket| socket.display().to_string());
        format!("cannot reach {} at {at} (database {dbname}){hint}", server.name)
    };
    let mut config = Client::configure();
    match &server.socket {
        // The socket: `peer`, the kernel names the account; the client has
        // no password to give, whoever asks (see cluster/access.rs).
        Some(folder) => config.host_path(folder),
        None => config.host(&server.addr.to_string()).password(server.password(role).with_context(unreachable)?),
    };
    config
        .port(port)
        .user(role)
        .dbname(dbname)
        .application_name(who)
        .connect_timeout(Duration::from_secs(5));
    config.notice_callback(move |notice| {
        let mut text = format!("{}: {}", notice.severity(), notice.message());
        if let Some(detail) = notice.detail() {
            text.push_str(&format!("\nDETAIL: {detail}"));
        }
        sink.push(text);
    });
    config.connect(NoTls).with_context(unreachable)
}

/// Replaces the `public` schema of `dbname` with the schema from `sql/`:
/// a load, which a reset does when it cannot empty (see [`emptying`]).
///
/// Every case starts from empty tables: F1 expects the first token to be 1,
/// F4 expects B's to be 2. Dropping the schema (rather than truncating) also
/// resets `write_attempt`'s id sequence and picks up any change to `sql/`.
/// `lab` may do this because it owns the database, and so its `public` schema.
pub fn reset_schema(client: &mut Client, schema: &str) -> Result<()> {
    client
        .batch_execute("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public;")
        .context("dropping the public schema")?;
    client.batch_execute(schema).context("loading the schema from sql/")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A literal doubles every quote, so no text can end it early (the
    /// JSON of a load's seeds, a session's new name).
    #[test]
    fn a_literal_doubles_quotes() {
        assert_eq!(literal(r#"[{"scope": "it's"}]"#), r#"'[{"scope": "it''s"}]'"#);
    }
}
