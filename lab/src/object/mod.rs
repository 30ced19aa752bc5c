//! A resource that cannot compare tokens (F29–F33): an object store, as
//! the storage most jobs write to offers it. It knows nothing of leases or
//! tokens; what it offers instead is a compare-and-swap on its own
//! version: a write may be made conditional on the version the writer read
//! (GCS's `ifGenerationMatch`, etcd's `mod_revision` in a txn), or on the
//! ETag it read (S3's `If-Match`), and then the store refuses it if the
//! object changed meanwhile. Or a write carries no condition at all, and
//! only the writers' own timing protects it (Chubby's lock-delay).
//!
//! Here the store is a table in `res26` and each condition is judged in the
//! statement that writes: the atomic reference, against which a real store
//! that checks without a lock can later be measured. Every write is
//! recorded in `object_attempt` with the writer's lease token, which the
//! store never reads: the lab judges a write stale by it afterwards.
//!
//! - here: [`ObjectStore`], the store's operations;
//! - [`writer`]: a lease holder writing to it, naively (a condition on what
//!   it read) or claiming first (its lease token written into the object,
//!   every later write conditional on its own last write);
//! - [`stage`]: the cases' takeover (A reads and stands still, its lease
//!   runs out, B acquires and reads) and the lock-delay's wait;
//! - [`probe`]: F32's probe, concurrent conditional writes on one version;
//! - [`uncertain`]: F33's counter, a write whose answer was lost.

pub mod probe;
pub mod stage;
pub mod uncertain;
pub mod writer;

use crate::db;
use crate::error::Result;

/// An object as a read (or an accepted write) saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The body.
    pub body: String,
    /// The store's version.
    pub version: i64,
    /// The ETag: the MD5 of the body.
    pub etag: String,
    /// Who wrote it last.
    pub writer: String,
}

impl Seen {
    /// The ETag's first eight characters, as a transcript shows it.
    pub fn etag_short(&self) -> &str {
        &self.etag[..8.min(self.etag.len())]
    }
}

/// The condition a write carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition {
    /// Write only if the object's version is still this one.
    IfVersion(i64),
    /// Write only if the object's ETag is still this one (`If-Match`).
    IfMatch(String),
    /// Write whatever is there.
    None,
}

impl Condition {
    /// Its name in `object_attempt.condition`.
    fn name(&self) -> &'static str {
        match self {
            Condition::IfVersion(_) => "if-version",
            Condition::IfMatch(_) => "if-match",
            Condition::None => "none",
        }
    }

    /// What it expected, as `object_attempt.expected` keeps it.
    fn expected(&self) -> Option<String> {
        match self {
            Condition::IfVersion(v) => Some(v.to_string()),
            Condition::IfMatch(etag) => Some(etag.clone()),
            Condition::None => None,
        }
    }
}

// ANCHOR: get_sql
/// Reads the object: its body, version, ETag and last writer.
const GET: &str = "SELECT body, version, etag, writer FROM object WHERE key = $1";
// ANCHOR_END: get_sql

// ANCHOR: put_sql
/// A write conditional on the version: the comparison and the write are one
/// statement, and every write moves the version on by one, so a version
/// is never seen twice.
const PUT_IF_VERSION: &str = "
    UPDATE object SET body = $2, version = version + 1, etag = md5($2), writer = $3
     WHERE key = $1 AND version = $4
    RETURNING body, version, etag, writer";
/// A write conditional on the ETag (`If-Match`): the same, compared on the
/// MD5 of the body, which a body written again brings back.
const PUT_IF_MATCH: &str = "
    UPDATE object SET body = $2, version = version + 1, etag = md5($2), writer = $3
     WHERE key = $1 AND etag = $4
    RETURNING body, version, etag, writer";
/// A write with no condition: whatever is there is replaced.
const PUT: &str = "
    UPDATE object SET body = $2, version = version + 1, etag = md5($2), writer = $3
     WHERE key = $1
    RETURNING body, version, etag, writer";
// ANCHOR_END: put_sql

/// Records one write, accepted or not, in the transaction that made it.
const RECORD: &str = "INSERT INTO object_attempt (key, writer, token, condition, expected, accepted) VALUES ($1, $2, $3, $4, $5, $6)";

// ANCHOR: servers
/// How a store judges a conditional write: the reference, or one of the
/// two ways S3-compatible servers have been found to get it wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// The comparison and the write in one statement (the reference).
    Atomic,
    /// The condition checked first, then the object written, with nothing
    /// held between: two conditional writes that both checked before
    /// either wrote both succeed.
    CheckThenPut,
    /// The condition not looked at: every write succeeds.
    IgnoresCondition,
}
// ANCHOR_END: servers

impl Server {
    /// Every kind, in the probe's order.
    pub const ALL: [Server; 3] = [Server::Atomic, Server::CheckThenPut, Server::IgnoresCondition];

    /// Its name in transcripts.
    pub fn name(self) -> &'static str {
        match self {
            Server::Atomic => "atomic",
            Server::CheckThenPut => "check-then-put",
            Server::IgnoresCondition => "ignores-condition",
        }
    }
}

/// A session of one writer on the store.
pub struct ObjectStore {
    client: crate::db::Session,
    /// How this store judges conditions.
    server: Server,
    /// Who writes, as the store records it.
    writer: String,
    /// The writer's lease token: recorded with each write, never read by
    /// the store's statements.
    token: i64,
}

impl ObjectStore {
    /// Connects to `res26` as `writer`, whose lease token is `token`.
    pub fn connect(writer: &str, token: i64) -> Result<ObjectStore> {
        ObjectStore::connect_to(Server::Atomic, writer, token)
    }

    /// Connects to a store that judges conditions as `server` does.
    pub fn connect_to(server: Server, writer: &str, token: i64) -> Result<ObjectStore> {
        Ok(ObjectStore { client: db::connect(db::RES_DB, writer)?, server, writer: writer.to_owned(), token })
    }

    /// Creates `key` with `body`, version 1, in the objects' tables, which
    /// every load of `res26` makes (see [`db::RES_SCHEMA`]) and the
    /// resource's reset empties: so after a reset, `key` is the only object.
    pub fn reset(key: &str, body: &str) -> Result<()> {
        let mut client = db::connect(db::RES_DB, "lab objects")?;
        // The object exists before the case: version 1, written by nobody.
        client.execute("INSERT INTO object (key, body, version, etag, writer) VALUES ($1, $2, 1, md5($2), 'setup')", &[&key, &body])?;
        Ok(())
    }

    /// Reads `key`.
    pub fn get(&mut self, key: &str) -> Result<Seen> {
        let row = self.client.query_opt(GET, &[&key])?.ok_or_else(|| format!("object {key} does not exist"))?;
        Ok(seen(&row))
    }

    /// Writes `body` to `key` if `condition` holds; the object as written,
    /// or `None` when the store refused.
    pub fn put(&mut self, key: &str, body: &str, condition: &Condition) -> Result<Option<Seen>> {
        self.put_with_gap(key, body, condition, || Ok(()))
    }

    /// As [`ObjectStore::put`], running `gap` where the store can be
    /// interrupted: before the reference's one statement, which has no
    /// inside; between the check and the write of a check-then-put store.
    pub fn put_with_gap(&mut self, key: &str, body: &str, condition: &Condition, gap: impl FnOnce() -> Result<()>) -> Result<Option<Seen>> {
        let row = match self.server {
            Server::Atomic => {
                gap()?;
                let mut tx = self.client.transaction()?;
                let row = match condition {
                    Condition::IfVersion(v) => tx.query_opt(PUT_IF_VERSION, &[&key, &body, &self.writer, v])?,
                    Condition::IfMatch(etag) => tx.query_opt(PUT_IF_MATCH, &[&key, &body, &self.writer, etag])?,
                    Condition::None => tx.query_opt(PUT, &[&key, &body, &self.writer])?,
                };
                tx.execute(RECORD, &[&key, &self.writer, &self.token, &condition.name(), &condition.expected(), &row.is_some()])?;
                tx.commit()?;
                row
            }
            Server::CheckThenPut => {
                // The check, on its own: nothing is held once it returns.
                let now = self.get(key)?;
                let holds = match condition {
                    Condition::IfVersion(v) => now.version == *v,
                    Condition::IfMatch(etag) => now.etag == *etag,
                    Condition::None => true,
                };
                let row = if holds {
                    gap()?;
                    self.client.query_opt(PUT, &[&key, &body, &self.writer])?
                } else {
                    None
                };
                self.client.execute(RECORD, &[&key, &self.writer, &self.token, &condition.name(), &condition.expected(), &row.is_some()])?;
                row
            }
            Server::IgnoresCondition => {
                gap()?;
                let row = self.client.query_opt(PUT, &[&key, &body, &self.writer])?;
                self.client.execute(RECORD, &[&key, &self.writer, &self.token, &condition.name(), &condition.expected(), &row.is_some()])?;
                row
            }
        };
        Ok(row.as_ref().map(seen))
    }
}

fn seen(row: &postgres::Row) -> Seen {
    Seen { body: row.get(0), version: row.get(1), etag: row.get(2), writer: row.get(3) }
}
