//! The lab's own two sessions to the cluster, one to `lease26` and one to
//! `res26`, kept for a whole run of cases: every reset between and within
//! cases, and every read of a case's rows for its picture, goes through
//! them instead of logging in afresh.
//!
//! A login costs the lab a few milliseconds (a process on the server, a
//! scram-sha-256 exchange), and a run resets the schemas some 70 times,
//! each reset reading both tables first: about 4 s of a run's overhead was
//! resets, and a third of that was logins.
//!
//! A case may take the server down under a kept session: F8 crashes and
//! restarts it, F13 restarts it with a jumped clock, F15's chaos run
//! restarts it. The kept session is then dead, and its next use fails on
//! a closed connection; [`OwnSessions::on`] drops it, logs in again and
//! does the work once more. Everything done through these sessions is
//! safe to redo: reads, and a reset, whose one implicit transaction either
//! committed or did nothing.

use crate::db;
use crate::error::Result;
use postgres::Client;
use std::sync::Mutex;

/// The kept sessions; none until first used.
#[derive(Default)]
pub struct OwnSessions {
    /// To `lease26`.
    lease: Mutex<Option<Client>>,
    /// To `res26`.
    res: Mutex<Option<Client>>,
}

impl OwnSessions {
    /// Runs `work` on the kept session to `dbname` (`lease26` or `res26`),
    /// logging in when there is none. If `work` fails on a session that was
    /// kept from before, that session may have died with its server: it is
    /// dropped, and `work` runs again on a fresh one, whose error stands.
    pub fn on<T>(&self, dbname: &str, mut work: impl FnMut(&mut Client) -> Result<T>) -> Result<T> {
        let slot = match dbname {
            db::LEASE_DB => &self.lease,
            db::RES_DB => &self.res,
            other => return Err(format!("the lab keeps no session to {other}").into()),
        };
        // A thread that panicked while holding the slot left at worst a
        // session in an unknown state: it is dropped below on its first error.
        let mut slot = slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(kept) = slot.as_mut() {
            match work(kept) {
                Ok(done) => return Ok(done),
                Err(_) => *slot = None,
            }
        }
        let fresh = slot.insert(db::connect(dbname, "lab reset")?);
        work(fresh)
    }
}
