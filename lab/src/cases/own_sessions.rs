//! The lab's own two sessions to the cluster, one to `lease26` and one to
//! `res26`, kept for a whole run of cases: every reset between and within
//! cases, and every read of a case's rows for its picture, goes through
//! them instead of logging in afresh.
//!
//! A login costs the lab a few milliseconds (a process on the server),
//! and a run resets the schemas some 70 times, each reset reading both
//! tables first: about 4 s of a run's overhead was resets, and a third of
//! that was logins.
//!
//! A case may take the server down under a kept session: F8 crashes and
//! restarts it, F13 restarts it with a jumped clock, F15's chaos run
//! restarts it. The kept session is then dead, and its next use fails on
//! a closed connection; [`OwnSessions::on`] drops it, logs in again and
//! does the work once more (only then: an error on a live session is the
//! work's own and stands). Everything done through these sessions is
//! safe to redo: reads, and a reset, whose one implicit transaction either
//! committed or did nothing. What the last load left is not the session's:
//! it is kept with the databases' other resets (`db::setup`'s record), and
//! the catalog signature a reset reads first tells whether it still holds
//! (see [`emptying`]). So a restart costs one login, not a load.

use crate::cluster::Endpoint;
use crate::db::{self, emptying, setup, Session};
use crate::error::Result;
use postgres::Client;
use std::sync::Mutex;

/// The kept sessions; none until first used.
#[derive(Default)]
pub struct OwnSessions {
    /// To `lease26`.
    lease: Mutex<Option<Session>>,
    /// To `res26`.
    res: Mutex<Option<Session>>,
}

impl OwnSessions {
    /// Runs `work` on the kept session to `dbname` (`lease26` or `res26`),
    /// logging in when there is none. If `work` fails because the kept
    /// session died with its server, the session is dropped and `work` runs
    /// again on a fresh one, whose error stands; any other error stands.
    pub fn on<T>(&self, dbname: &str, work: impl FnMut(&mut Client) -> Result<T>) -> Result<T> {
        self.on_kept(dbname, work)
    }

    /// Resets `dbname` to `schema` (see [`emptying::reset`]), after `before`
    /// has read what it needs of the rows about to go.
    pub fn reset<T>(&self, dbname: &str, schema: &'static str, mut before: impl FnMut(&mut Client) -> T) -> Result<T> {
        let server = Endpoint::lab()?;
        self.on_kept(dbname, |kept| {
            setup::with_load_record(&server, dbname, |record| {
                let read = before(kept);
                emptying::reset(kept, schema, record).map(|_| read)
            })
        })
    }

    fn on_kept<T>(&self, dbname: &str, mut work: impl FnMut(&mut Client) -> Result<T>) -> Result<T> {
        let slot = match dbname {
            db::LEASE_DB => &self.lease,
            db::RES_DB => &self.res,
            other => return Err(format!("the lab keeps no session to {other}").into()),
        };
        // A thread that panicked while holding the slot panicked between two
        // calls on the session (none panics inside one): the session is used on.
        let mut slot = slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(kept) = slot.as_mut() {
            match work(kept) {
                Ok(done) => return Ok(done),
                // Only a session that died is replaced; any other error is
                // the work's own, and stands.
                Err(_) if kept.is_closed() => *slot = None,
                Err(e) => return Err(e),
            }
        }
        let fresh = slot.insert(db::connect(dbname, "lab reset")?);
        work(fresh)
    }
}
