//! The background renewal thread of a holder.
//!
//! It renews on its own session every `every` (400 ms in F4/F5, about a
//! quarter of the 1500 ms ttl; 500 ms of etcd's 2 s in F16) and stops at
//! the first refused renewal: a refused renewal means the holding is over
//! and only a new acquire, with a new token, may start another. SIGSTOP
//! freezes this thread together with the rest of the process, which is
//! exactly what lets F4's lease expire, and F16's.
//!
//! It is written once for both stores, against [`LeaseService`]: on
//! PostgreSQL a renewal is the RENEW statement, on etcd a keep-alive.

use crate::error::Result;
use crate::lease::LeaseService;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the renewer has done so far.
#[derive(Clone, Debug)]
pub struct RenewState {
    /// Successful renewals.
    pub renewals: u32,
    /// A renewal was refused: the lease was lost.
    pub lost: bool,
    /// The local deadline after the last successful renewal.
    pub local_deadline: Instant,
    /// The store's error (the database's, etcd's) that stopped the renewer,
    /// if one did.
    pub error: Option<String>,
}

/// A running renewal thread; dropping it stops the thread.
pub struct Renewer {
    /// Closing (or sending on) this channel ends the thread's wait at once.
    stop: Option<mpsc::Sender<()>>,
    /// Shared with the thread.
    state: Arc<Mutex<RenewState>>,
    /// Joined on stop.
    thread: Option<JoinHandle<()>>,
}

impl Renewer {
    // ANCHOR: renewer_start
    /// Opens a second session on `store` and starts renewing `holding` there.
    pub fn start<S: LeaseService>(store: &S, holding: &S::Holding, every: Duration) -> Result<Renewer> {
        let mut store = store.another_session(&format!("{} renewer", holding.as_ref().holder))?;
        let mut grant = holding.clone();
        let state = Arc::new(Mutex::new(RenewState {
            renewals: 0,
            lost: false,
            local_deadline: grant.as_ref().local_deadline,
            error: None,
        }));
        let (stop, stopped) = mpsc::channel::<()>();
        let shared = Arc::clone(&state);
        let thread = std::thread::Builder::new().name("renewer".into()).spawn(move || loop {
            // The renewal period is the protocol's own rhythm, not a guess at
            // how long something takes; the channel makes stop() immediate.
            match stopped.recv_timeout(every) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            let outcome = store.renew(&mut grant);
            let mut s = shared.lock().unwrap();
            match outcome {
                Ok(true) => {
                    s.renewals += 1;
                    s.local_deadline = grant.as_ref().local_deadline;
                }
                Ok(false) => {
                    s.lost = true;
                    return;
                }
                Err(e) => {
                    s.error = Some(crate::error::chain(e.as_ref()));
                    return;
                }
            }
        })?;
        Ok(Renewer { stop: Some(stop), state, thread: Some(thread) })
    }
    // ANCHOR_END: renewer_start

    /// The local deadline as extended by the renewals so far.
    pub fn local_deadline(&self) -> Instant {
        self.state.lock().unwrap().local_deadline
    }

    /// Whether the thread has ended by itself (a refusal or an error).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops the thread and returns what it did.
    pub fn stop(mut self) -> RenewState {
        self.halt();
        self.state.lock().unwrap().clone()
    }

    fn halt(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        self.halt();
    }
}
