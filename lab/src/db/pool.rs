//! The lab's idle sessions, kept for the next connect to the same server,
//! role and database in this process ([`super::session`]).
//!
//! A login costs the server a new process: about 2 ms on an idle machine
//! and 3–4 ms during a run. A run of all cases logged in some 470 times in
//! the lab's own process (observers, the in-process workers of the queue
//! and object cases, F3's sixteen contenders three times over), most of
//! them right after an earlier session to the same database had ended. So
//! a [`Session`] that ends goes back here instead of logging out, and the
//! next connect takes it: the same run logs in some 150 times.
//!
//! Only the process that runs the cases keeps sessions (the runner turns
//! it on with [`keep_idle_sessions`]): a holder process logs in and out as
//! any client does. Only sessions reached by a Unix socket are kept (the
//! cluster's, and those to a case's own servers, told apart by the
//! socket's folder and port); one over TCP logs out.
//!
//! A kept session must be as good as a new login for whoever takes it:
//! - On its way in, it is tidied: an open transaction rolled back, its
//!   settings put back to their defaults, its advisory locks, cursors,
//!   listens and temporary tables let go; and it is renamed `lab idle`,
//!   so a case that looks a session up by its `application_name` (in
//!   `pg_stat_activity`) sees it gone, as it would be after a logout.
//! - On its way out, it takes the new owner's name; that statement is
//!   also the proof that the session is alive. A session whose server
//!   restarted or terminated it meanwhile (F8's crash, F13's clock, the
//!   chaos run) fails there and is thrown away, and the next one (or a new
//!   login) is taken instead.
//! - A session that cannot be tidied is not kept.

use super::Notices;
use postgres::Client;
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Whether this process keeps idle sessions.
static KEEP: AtomicBool = AtomicBool::new(false);

/// The idle sessions, oldest first, each with its server, role and database.
static IDLE: Mutex<Vec<Session>> = Mutex::new(Vec::new());

/// At most this many idle sessions are kept: more than a case has open at
/// once (F3's sixteen contenders and the lab's own), far below the
/// cluster's `max_connections`; past it, the oldest logs out.
pub const MOST: usize = 24;

/// The server, role and database of a session.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Key {
    /// The server's Unix socket folder.
    pub socket: PathBuf,
    /// The server's port.
    pub port: u16,
    /// The role it logged in as.
    pub role: String,
    /// The database it is connected to.
    pub dbname: String,
}

/// Turns keeping on for this process (the case runner's).
pub fn keep_idle_sessions() {
    KEEP.store(true, Ordering::Relaxed);
}

/// Where a session's notices go: the sink of whoever has the session now
/// (the driver takes one callback per connection, for its whole life).
#[derive(Clone, Default)]
pub struct NoticeSlot(Arc<Mutex<Option<Notices>>>);

impl NoticeSlot {
    /// A slot that sends notices to `notices`, or drops them.
    pub fn new(notices: Option<Notices>) -> NoticeSlot {
        NoticeSlot(Arc::new(Mutex::new(notices)))
    }

    /// Hands one notice to the sink in the slot, if any.
    pub fn push(&self, text: String) {
        if let Some(sink) = &*self.0.lock().unwrap_or_else(|p| p.into_inner()) {
            sink.lock().push(text);
        }
    }

    fn set(&self, notices: Option<Notices>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = notices;
    }
}

/// A kept session for `key`, renamed `who`, its notices into `notices`, if
/// one is idle and alive.
pub fn take(key: &Key, who: &str, notices: Option<Notices>) -> Option<Session> {
    if !KEEP.load(Ordering::Relaxed) {
        return None;
    }
    loop {
        let mut session = {
            let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
            let at = idle.iter().rposition(|s| s.key.as_ref() == Some(key))?;
            idle.remove(at)
        };
        // The new owner's name, and the proof the session is alive: a dead
        // one fails here and is dropped (not kept: it is closed). One
        // simple Query message: a single round trip, where a statement
        // with a parameter is two (prepared, then run).
        if session.batch_execute(&format!("SELECT set_config('application_name', {}, false)", super::literal(who))).is_ok() {
            session.notices.set(notices);
            return Some(session);
        }
        drop(session.forgotten());
    }
}

/// A session to one of the lab's databases: a [`Client`] that goes back to
/// the idle sessions when it ends, if this process keeps them.
pub struct Session {
    /// The connection; `None` only once given back.
    client: Option<Client>,
    /// Where it may go back to; `None` for a session never to be kept.
    key: Option<Key>,
    /// Where its notices go.
    notices: NoticeSlot,
}

impl Session {
    /// A session that may be kept when it ends; its connection sends its
    /// notices to `notices`.
    pub fn keepable(client: Client, key: Key, notices: NoticeSlot) -> Session {
        Session { client: Some(client), key: Some(key), notices }
    }

    /// A session that logs out when it ends (one reached over TCP).
    pub fn plain(client: Client) -> Session {
        Session { client: Some(client), key: None, notices: NoticeSlot::default() }
    }
}

impl Deref for Session {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("a session has its client until dropped")
    }
}

impl DerefMut for Session {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("a session has its client until dropped")
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let (Some(mut client), Some(key)) = (self.client.take(), self.key.take()) else { return };
        if !KEEP.load(Ordering::Relaxed) || client.is_closed() || std::thread::panicking() {
            return;
        }
        self.notices.set(None);
        if !matches!(tidy(&mut client), Ok(true)) {
            return;
        }
        let kept = Session { client: Some(client), key: Some(key), notices: self.notices.clone() };
        // Past the cap, the oldest go (they may be of a server a case has
        // stopped), logged out once the list is let go.
        let evicted: Vec<Session> = {
            let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
            idle.push(kept);
            let over = idle.len().saturating_sub(MOST);
            idle.drain(..over).collect()
        };
        for oldest in evicted {
            drop(oldest.forgotten());
        }
    }
}

impl Session {
    /// The connection alone, never to be kept (it logs out when dropped).
    fn forgotten(mut self) -> Option<Client> {
        self.key = None;
        self.client.take()
    }
}

/// Puts a session back to what a new login has: what DISCARD ALL does,
/// except dropping prepared statements and their plans (the driver keeps
/// its own for type lookups, and closes the rest when they are dropped)
/// and putting back the role (see below).
/// `Ok(false)` when the session answered something it should not have.
fn tidy(client: &mut Client) -> Result<bool, postgres::Error> {
    // A transaction left open (a raw BEGIN; the driver's own transactions
    // roll back when dropped): its locks go with it. Only then: outside a
    // transaction ROLLBACK puts a warning in the server's log. One simple
    // Query message sets the statement clock once, and a transaction it
    // starts itself starts at that time: the two clocks differ only inside
    // a block opened earlier. (The extended protocol sets the statement
    // clock again at Execute, so it would always see them differ.) In a
    // failed block the question is refused.
    let open = match client.simple_query("SELECT transaction_timestamp() <> statement_timestamp()") {
        Ok(messages) => match messages.iter().find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(row) => Some(row.get(0)),
            _ => None,
        }) {
            Some(Some("t")) => true,
            Some(Some("f")) => false,
            // No row, or not a boolean: not a session to keep.
            _ => return Ok(false),
        },
        Err(e) if e.code() == Some(&postgres::error::SqlState::IN_FAILED_SQL_TRANSACTION) => true,
        Err(e) => return Err(e),
    };
    if open {
        client.batch_execute("ROLLBACK")?;
    }
    // Each in the implicit transaction of one message, all or nothing:
    // cursors, settings (not the role: RESET ALL leaves it, and nothing in
    // the lab sets one), session-level advisory locks, listens, temporary
    // tables, sequence state; then the idle name.
    client.batch_execute(
        "CLOSE ALL; RESET ALL; SELECT pg_advisory_unlock_all(); UNLISTEN *; DISCARD TEMP; DISCARD SEQUENCES; \
         SELECT set_config('application_name', 'lab idle', false);",
    )?;
    Ok(true)
}
