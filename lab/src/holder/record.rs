//! The holder's side of its calls (`call.rs` is the line): each call
//! numbered, printed as it starts and as it returns. One counter per
//! process, shared by the main thread and the renewer, so that no two calls
//! of a process share a number.

use super::call::{Call, Invoke, Return};
use crate::vocabulary::Outcome;
use super::{failure_code, print_line};
use crate::error::Result;
use crate::renewer::Renewal;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The process's calls.
#[derive(Default)]
pub struct Calls {
    /// The last number given.
    last: AtomicU32,
}

impl Calls {
    /// A counter from 1, to share with the renewer.
    pub fn new() -> Arc<Calls> {
        Arc::new(Calls::default())
    }

    /// Prints a call's start; its number.
    fn begin(&self, invoke: Invoke) -> Result<u32> {
        let id = self.last.fetch_add(1, Ordering::SeqCst) + 1;
        print_line(&Call::Invoke { id, invoke })?;
        Ok(id)
    }

    /// Prints a call's return.
    fn end(&self, id: u32, ret: Return) -> Result<()> {
        print_line(&Call::Return { id, ret })
    }

    /// Makes one call whose answer is yes or no (renewed, accepted,
    /// released): `ok` or `fail`, or `info` with the error's code; returns
    /// what `run` returned.
    pub fn call(&self, invoke: Invoke, run: impl FnOnce() -> Result<bool>) -> Result<bool> {
        let id = self.begin(invoke)?;
        let answer = run();
        self.end(id, judged(&answer))?;
        answer
    }

    /// Starts an acquire, which may take several tries.
    pub fn acquiring(&self) -> Result<Acquiring<'_>> {
        Ok(Acquiring { id: self.begin(Invoke::Acquire)?, calls: self, tries: 0 })
    }

    /// A watcher for the renewer: each renewal of `token` a call of its own.
    pub fn renewals(self: &Arc<Calls>, token: i64) -> impl FnMut(Renewal<'_>) + Send + 'static {
        let calls = Arc::clone(self);
        let mut open = None;
        move |renewal| match renewal {
            // A line that cannot be printed means the parent has gone; the
            // holder's own next line fails on that, so the renewer goes on.
            Renewal::Sending => open = calls.begin(Invoke::Renew { token }).ok(),
            Renewal::Returned(answer) => {
                if let Some(id) = open.take() {
                    let _ = calls.end(id, judged(answer));
                }
            }
        }
    }
}

/// An acquire in progress: one call from the first try to the grant.
pub struct Acquiring<'a> {
    /// The process's calls.
    calls: &'a Calls,
    /// The call's number.
    id: u32,
    /// The statements sent so far.
    tries: u32,
}

impl Acquiring<'_> {
    /// One try; an error ends the call as `info`.
    pub fn try_once<T>(&mut self, run: impl FnOnce() -> Result<Option<T>>) -> Result<Option<T>> {
        self.tries += 1;
        let answer = run();
        if let Err(e) = &answer {
            self.calls.end(self.id, Return { code: Some(code_of(e.as_ref())), tries: Some(self.tries), ..plain(Outcome::Info) })?;
        }
        answer
    }

    /// The call returned `token`.
    pub fn granted(self, token: i64) -> Result<()> {
        self.calls.end(self.id, Return { token: Some(token), tries: Some(self.tries), ..plain(Outcome::Ok) })
    }

    /// The call gave up: someone else holds the lease.
    pub fn refused(self) -> Result<()> {
        self.calls.end(self.id, Return { tries: Some(self.tries), ..plain(Outcome::Fail) })
    }
}

/// `ok` for yes, `fail` for no, `info` with the code for an error.
fn judged(answer: &Result<bool>) -> Return {
    match answer {
        Ok(true) => plain(Outcome::Ok),
        Ok(false) => plain(Outcome::Fail),
        Err(e) => Return { code: Some(code_of(e.as_ref())), ..plain(Outcome::Info) },
    }
}

fn plain(outcome: Outcome) -> Return {
    Return { outcome, token: None, tries: None, code: None }
}

/// The server's SQLSTATE, `connection-closed`, or `error` for anything else.
fn code_of(err: &(dyn std::error::Error + 'static)) -> String {
    failure_code(err).unwrap_or_else(|| "error".into())
}
